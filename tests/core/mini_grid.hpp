#pragma once
// A tiny discrete-event loop that drives supervisors directly, without CAF or a
// bandwidth-sharing model: each message takes one-way latency plus size over the
// path bandwidth of a topology. It lets the protocol be tested in microseconds;
// the actor-level tests run the same supervisors on the real emulated network.
//
// Riders (optional): protocol engines that ride along each supervisor, such as the
// collective engines. A rider takes the messages it sends (its own types), sees every
// event of its supervisor, has its own timers, and keeps its processor reachable after
// the supervisor has left for as long as it says it is `active`. A rider's message that
// cannot be delivered (nobody runs there, or the incarnation it was sent to is gone)
// comes back to the rider that sent it, one way later, as from a refused connection.
// Riders' messages travel on connections, as over TCP: a sender's messages to a
// processor go to the incarnation its connection reached, and only once a bounce has
// told the sender that the connection broke does a later message reach a newer
// incarnation.

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <queue>
#include <set>
#include <random>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "banyan/core/supervisor.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree.hpp"

namespace banyan::test {

class mini_grid {
public:
  /// Something riding along one supervisor instance (see the top of this file). It
  /// reports sends and timers through the supervisor's `outbox` type (events unused).
  class rider {
  public:
    virtual ~rider() = default;
    /// Returns false when it does not take `m`: it bounces back to the sender.
    virtual bool on_message(timestamp now, proc_id from, const wire::message& m, outbox& out) = 0;
    virtual void on_timer(timestamp now, std::uint64_t token, outbox& out) = 0;
    /// After every event its supervisor handled (the supervisor's sends go first).
    virtual void after_supervisor(timestamp now, outbox& out) = 0;
    /// Then the events that handling reported (crash recovery: `adopted`).
    virtual void on_supervisor_events(timestamp, const std::vector<tree_event>&, outbox&) {}
    /// `m`, sent by this rider to `to`, could not be delivered.
    virtual void on_undeliverable(timestamp now, proc_id to, const wire::message& m, outbox& out) = 0;
    /// Still has work: keeps the processor reachable after its supervisor has left.
    virtual bool active(timestamp now) const = 0;
  };
  /// Makes the rider of a new supervisor instance (at start and at every join).
  using rider_factory = std::function<std::unique_ptr<rider>(proc_id, const supervisor&)>;

  mini_grid(topology topo, std::uint64_t seed, supervisor_config cfg = {},
            supervisor_test_hooks hooks = {})
    : topo_(std::move(topo)), seed_(seed), cfg_(cfg), hooks_(hooks), sups_(topo_.proc_count()),
      riders_(topo_.proc_count()) {}

  /// Set before `start`.
  void set_rider_factory(rider_factory f) { make_rider_ = std::move(f); }
  rider* rider_of(proc_id p) const { return riders_[p].get(); }
  /// Reachable: its supervisor runs, or its rider is still active.
  bool reachable(proc_id p) const { return supervisor_running(p) || rider_active(p); }
  /// Rider messages that bounced back to a rider instance that was gone (lost).
  std::size_t lost_rider_messages() const { return lost_rider_messages_; }
  /// Runs `f` on processor p's rider now and sends what it produced.
  void with_rider(proc_id p, const std::function<void(rider&, timestamp, outbox&)>& f) {
    if (!riders_[p])
      return;
    outbox out;
    f(*riders_[p], now_, out);
    carry_out_rider(p, out);
  }

  /// Founds processors 0..n-1 (all: n = 0), processor p owning vnodes
  /// [p * per_proc, (p + 1) * per_proc).
  void start(std::size_t n = 0, vnode_id per_proc = 1) {
    if (n == 0)
      n = topo_.proc_count();
    std::vector<wire::member> members;
    routing_table routes;
    for (proc_id p = 0; p < n; ++p) {
      members.push_back({p, ""});
      routes.assign(vnode_set::range(p * per_proc, (p + 1) * per_proc), p, 0);
    }
    for (proc_id p = 0; p < n; ++p) {
      sups_[p] = std::make_unique<supervisor>(p, cfg_, seed_ * 1000003 + p, hooks_);
      outbox out;
      sups_[p]->found(now_, members, routes, out);
      carry_out(p, out);
      attach_rider(p);
    }
  }

  void join(proc_id p, proc_id contact, vnode_set wanted) {
    if (trace_ >= 0) std::fprintf(stderr, "t=%.3f JOIN %u via %u\n", to_ms(now_), p, contact);
    sups_[p] = std::make_unique<supervisor>(p, cfg_, seed_ * 7919 + p + 1000 * ++joins_, hooks_);
    outbox out;
    sups_[p]->join(now_, contact, wanted, out);
    carry_out(p, out);
    attach_rider(p);
  }

  /// Processor p, which has left, joins again with the supervisor it had, as a
  /// banyan::node does (the emulated cluster's new incarnation recalls what its
  /// predecessor measured instead: supervisor::recall_paths);
  /// `address`, when given, is its transport address from now on.
  void join_again(proc_id p, proc_id contact, vnode_set wanted,
                  std::optional<std::string> address = std::nullopt) {
    if (address)
      sups_[p]->set_address(*address);
    outbox out;
    sups_[p]->join(now_, contact, wanted, out);
    carry_out(p, out);
    attach_rider(p);
  }

  /// Churn tests: processor p (which has left) joins again through a random live
  /// contact; half of the time it asks for a random 30% of the vnodes [0, vnodes).
  template <class Rng>
  void rejoin_randomly(proc_id p, vnode_id vnodes, Rng& rng) {
    auto l = live();
    std::vector<proc_id> contacts;
    for (proc_id q = 0; q < l.size(); ++q)
      if (l[q])
        contacts.push_back(q);
    auto c = contacts[std::uniform_int_distribution<std::size_t>(0, contacts.size() - 1)(rng)];
    vnode_set wanted;
    if (std::bernoulli_distribution(0.5)(rng))
      for (vnode_id v = 0; v < vnodes; ++v)
        if (std::bernoulli_distribution(0.3)(rng))
          wanted.insert(v);
    join(p, c, wanted);
  }

  /// Churn tests: one step of random churn among processors [0, n) (n vnodes). Draws a
  /// processor p, then `what` in [0, kinds): below `acts`, p acts if it is live
  /// (`act(p, what)`: a collective started, a message sent); otherwise p leaves if it is
  /// live and more than two members remain, or rejoins (`rejoin_randomly`) if it has left
  /// and is no longer reachable.
  template <class Rng, class Act>
  void churn_step(Rng& rng, proc_id n, int kinds, int acts, Act&& act) {
    const auto p = std::uniform_int_distribution<proc_id>(0, n - 1)(rng);
    const auto l = live();
    const auto what = std::uniform_int_distribution<int>(0, kinds - 1)(rng);
    if (what < acts) {
      if (l[p])
        act(p, what);
    } else if (l[p] && live_count() > 2) {
      leave(p);
    } else if (!reachable(p) && sups_[p]->state() == supervisor::status::left) {
      rejoin_randomly(p, n, rng);
    }
  }

  void leave(proc_id p, proc_id recipient = no_proc) {
    if (trace_ >= 0) std::fprintf(stderr, "t=%.3f LEAVE %u\n", to_ms(now_), p);
    outbox out;
    auto err = sups_[p]->leave(now_, recipient, out);
    if (err)
      throw std::runtime_error(err->to_string());
    carry_out(p, out); // it goes on answering until a member took its vnodes
    notify_rider(p);
  }

  /// Processor p's own trees are to be used (supervisor::prepare; trees on demand).
  void prepare(proc_id p) {
    outbox out;
    sups_[p]->prepare(now_, out);
    carry_out(p, out);
    notify_rider(p);
  }

  /// Processor p crashes: it stops at once, without a handover (its vnodes stay named
  /// as its own until someone adopts them).
  void crash(proc_id p) {
    if (trace_ >= 0) std::fprintf(stderr, "t=%.3f CRASH %u\n", to_ms(now_), p);
    sups_[p].reset();
    riders_[p].reset();
  }

  /// Processor p does not run for `d` (a stopped process): everything due for it
  /// (messages, timers) waits until then, in order; the others' connections stay open.
  void freeze(proc_id p, duration d) { frozen_[p] = now_ + d; }

  /// Every message for which `which` returns true takes `extra` longer (a slow path; the
  /// pair's later messages wait behind it, FIFO as ever), the riders' too. Replaces an
  /// earlier one.
  void slow(std::function<bool(const wire::envelope&)> which, duration extra) {
    slow_ = std::move(which);
    slow_extra_ = extra;
  }
  /// The next `count` supervisor messages for which `which` returns true vanish without
  /// a trace, as frames written behind a handshake that the peer then refused (TCP hands
  /// them to the kernel; nothing comes back). Replaces an earlier one.
  void lose(std::function<bool(const wire::envelope&)> which, int count) {
    lose_ = std::move(which);
    lose_left_ = count;
  }
  /// How many messages lose() took.
  int lost() const noexcept { return lost_; }

  /// Cuts every link between a processor of `a` and one of `b`, both ways: a message that
  /// arrives over a cut link is refused, as when nobody runs there (the sender learns it
  /// one way later, as from a refused connection). Cuts add up until `heal`.
  void cut(const std::vector<proc_id>& a, const std::vector<proc_id>& b) {
    for (auto x : a)
      for (auto y : b) {
        cut_.insert({x, y});
        cut_.insert({y, x});
      }
  }
  /// Stalls every link between a processor of `a` and one of `b`, both ways, as a
  /// partition does to TCP connections: nothing arrives and nothing is refused; what is
  /// sent meanwhile waits, and arrives (in order) at `heal`, as TCP delivers at last what
  /// it kept sending. Supervisor messages only (no riders).
  void stall(const std::vector<proc_id>& a, const std::vector<proc_id>& b) {
    for (auto x : a)
      for (auto y : b) {
        stalled_.insert({x, y});
        stalled_.insert({y, x});
      }
  }
  /// Every cut link works again (for messages arriving from now on); every stalled one
  /// too, and what waited on it arrives now.
  void heal() {
    cut_.clear();
    stalled_.clear();
    for (auto ev : held_) {
      ev.at = now_;
      ev.order = order_++;
      queue_.push(ev);
    }
    held_.clear();
  }

  /// Processor `at` is told that `p` is unreachable (a refused connection), now.
  void suspect(proc_id at, proc_id p) {
    outbox out;
    sups_[at]->on_unreachable(now_, p, out);
    carry_out(at, out);
    notify_rider(at);
  }

  /// Crash-related supervisor events (crash_detected, adopted, disowned), with the
  /// processor that reported each, in order.
  const std::vector<std::pair<proc_id, tree_event>>& crash_events() const { return crash_events_; }
  /// Handover events (gained, released), with the processor that reported each, in order.
  const std::vector<std::pair<proc_id, tree_event>>& handover_events() const { return handover_events_; }
  /// Burial events (member_buried, member_returned), with the processor that reported
  /// each, in order.
  const std::vector<std::pair<proc_id, tree_event>>& burial_events() const { return burial_events_; }
  /// Suspicion events (suspected, suspicion_cleared), with the processor that reported
  /// each, in order.
  const std::vector<std::pair<proc_id, tree_event>>& suspicion_events() const {
    return suspicion_events_;
  }

  /// Runs until nothing is left to do or `limit` events were processed.
  std::size_t run(std::size_t limit = 10'000'000) {
    std::size_t n = 0;
    while (!queue_.empty() && n < limit) {
      auto ev = queue_.top();
      queue_.pop();
      if (auto f = frozen_.find(ev.to); f != frozen_.end() && ev.at < f->second) {
        ev.at = f->second; // popped in time order: re-queued in the same order
        ev.order = order_++;
        queue_.push(ev);
        continue;
      }
      now_ = ev.at;
      ++n;
      auto& s = sups_[ev.to];
      if (ev.rider_event) {
        run_rider_event(ev);
        continue;
      }
      if (ev.unreachable != no_proc) {
        if (s) {
          outbox out;
          s->on_unreachable(now_, ev.unreachable, out);
          carry_out(ev.to, out);
          notify_rider(ev.to);
        }
        continue;
      }
      if (!ev.is_timer && stalled_.count({envelopes_[ev.msg].from, ev.to}) != 0) {
        held_.push_back(ev); // popped in time order: kept in the same order
        continue;
      }
      bool running = s && s->state() != supervisor::status::left &&
                     s->state() != supervisor::status::idle;
      if (!running || (!ev.is_timer && cut_.count({envelopes_[ev.msg].from, ev.to}) != 0)) {
        // Nobody there: the sender learns it one way later, as from a refused connection.
        if (!ev.is_timer) {
          auto from = envelopes_[ev.msg].from;
          envelopes_.erase(ev.msg);
          queue_.push({now_ + topo_.one_way(ev.to, from), order_++, from, false, 0, 0, ev.to});
        }
        continue;
      }
      outbox out;
      if (!ev.is_timer && trace_ >= 0 &&
          (trace_ == static_cast<long>(ev.to) || trace2_ == static_cast<long>(ev.to)) &&
          (std::holds_alternative<wire::member_joined>(envelopes_[ev.msg].body) ||
           std::holds_alternative<wire::member_left>(envelopes_[ev.msg].body) ||
           std::holds_alternative<wire::join_accept>(envelopes_[ev.msg].body) ||
           std::holds_alternative<wire::join_request>(envelopes_[ev.msg].body)))
      {
        auto& b = envelopes_[ev.msg].body;
        long who = -1;
        if (auto* j = std::get_if<wire::member_joined>(&b)) who = j->who.id;
        if (auto* l = std::get_if<wire::member_left>(&b)) who = l->who;
        if (auto* r = std::get_if<wire::join_request>(&b)) who = r->newcomer.id;
        std::string ms;
        for (auto m : s->members()) ms += std::to_string(m) + ",";
        std::fprintf(stderr, "t=%.3f %u <- %u %s(%ld) | %s members %s\n", to_ms(now_), ev.to,
                     envelopes_[ev.msg].from, wire::name_of(b), who, s->describe().c_str(), ms.c_str());
      }
      if (ev.is_timer && ev.owner != s.get())
        continue; // set by an earlier incarnation
      if (ev.is_timer)
        s->on_timer(now_, ev.token, out);
      else
        s->on_message(now_, envelopes_[ev.msg].from, envelopes_[ev.msg].body, out);
      if (!ev.is_timer)
        envelopes_.erase(ev.msg);
      carry_out(ev.to, out);
      notify_rider(ev.to);
    }
    return n;
  }

  /// Processes the events due within `d` of now, then moves the clock to now + d.
  void run_for(duration d) {
    auto until = now_ + d;
    while (!queue_.empty() && queue_.top().at <= until)
      run(1);
    now_ = until;
  }

  bool busy() const {
    for (auto& s : sups_)
      if (s && s->busy())
        return true;
    return false;
  }

  /// Who is still busy and why, for failure messages.
  std::string busy_report() const {
    std::string r;
    for (proc_id p = 0; p < sups_.size(); ++p)
      if (sups_[p] && sups_[p]->busy())
        r += sups_[p]->describe() + "; ";
    if (!r.empty())
      for (proc_id p = 0; p < sups_.size(); ++p)
        if (sups_[p] && !sups_[p]->busy()) {
          r += "[" + sups_[p]->describe() + " members";
          for (auto m : sups_[p]->members())
            r += " " + std::to_string(m);
          r += "] ";
        }
    return r;
  }

  banyan::tree tree_of(tree_key k) const {
    std::vector<proc_id> parents(sups_.size(), no_proc);
    for (proc_id p = 0; p < sups_.size(); ++p)
      if (sups_[p])
        parents[p] = sups_[p]->parent(k);
    return banyan::tree{k.root, parents};
  }

  std::vector<bool> live() const {
    std::vector<bool> l(sups_.size());
    for (std::size_t p = 0; p < sups_.size(); ++p)
      l[p] = sups_[p] != nullptr && sups_[p]->state() == supervisor::status::member;
    return l;
  }
  /// How many processors are members.
  std::size_t live_count() const {
    const auto l = live();
    return static_cast<std::size_t>(std::count(l.begin(), l.end(), true));
  }

  const supervisor* sup(proc_id p) const { return sups_[p].get(); }
  const topology& topo() const { return topo_; }
  timestamp now() const { return now_; }

private:
  struct event {
    timestamp at;
    std::uint64_t order;
    proc_id to;
    bool is_timer;
    std::uint64_t token;
    std::uint64_t msg;
    proc_id unreachable = no_proc; ///< set: tell `to` that this processor is not running
    const supervisor* owner = nullptr; ///< timers: the incarnation that set it
    bool rider_event = false;  ///< a rider's message, timer or bounce
    std::uint64_t target = 0;  ///< rider events: the rider instance it is for (0: none)
    bool bounce = false;       ///< rider message coming back to its sender
    bool operator<(const event& o) const {
      return at != o.at ? at > o.at : order > o.order;
    }
  };

  /// Every (vnode, epoch) announced on the wire must name one owner: an ownership
  /// ledger. Offers (vnode_handover) may be refused, so only announcements count:
  /// routing_update and member_left, sent once the recipient has taken the vnodes.
  void audit(const wire::envelope& e) {
    auto check = [&](const std::vector<wire::route_entry>& routes) {
      for (auto& r : routes)
        r.vnodes.for_each([&](vnode_id v) {
          history_[v] += " | t=" + std::to_string(to_ms(now_)) + " " + std::to_string(e.from) +
                         "->" + std::to_string(r.owner) + "@" + std::to_string(r.epoch) + " " +
                         wire::name_of(e.body) + " to " + std::to_string(e.to);
          auto [it, fresh] = ledger_.emplace(std::make_pair(v, r.epoch), r.owner);
          if (!fresh && it->second != r.owner)
            conflicts_.push_back("t=" + std::to_string(to_ms(now_)) + " ms: vnode " +
                                 std::to_string(v) + " epoch " + std::to_string(r.epoch) +
                                 " given to " + std::to_string(r.owner) + " by " +
                                 std::to_string(e.from) + " (" + wire::name_of(e.body) +
                                 ") but already to " + std::to_string(it->second) +
                                 "; history:" + history_[v]);
        });
    };
    if (auto* m = std::get_if<wire::routing_update>(&e.body))
      check(m->routes);
    else if (auto* l = std::get_if<wire::member_left>(&e.body))
      check(l->routes);
  }

public:
  const std::vector<std::string>& ownership_conflicts() const { return conflicts_; }
  /// Every route entry for v that crossed the wire, in order.
  std::string ownership_history(vnode_id v) const {
    auto i = history_.find(v);
    return i == history_.end() ? std::string{} : i->second;
  }

private:
  void carry_out(proc_id p, outbox& out) {
    for (auto& e : out.sends) {
      if (lose_left_ > 0 && lose_ && lose_(e)) {
        --lose_left_;
        ++lost_;
        continue;
      }
      audit(e);
      auto bytes = static_cast<double>(wire::wire_size(e.body));
      auto bw = topo_.path_bandwidth(e.from, e.to);
      auto tx = bw == infinite_rate ? duration{0} : duration{static_cast<std::int64_t>(bytes / bw * 1e9)};
      auto at = now_ + topo_.send_overhead + tx + topo_.one_way(e.from, e.to);
      if (slow_ && slow_(e))
        at += slow_extra_;
      // FIFO per ordered pair, as TCP and the emulated network guarantee.
      auto& last = last_[{e.from, e.to}];
      at = std::max(at, last);
      last = at;
      auto id = next_msg_++;
      envelopes_[id] = e;
      queue_.push({at, order_++, e.to, false, 0, id});
    }
    if (riders_[p])
      for (auto& ev : out.events)
        rider_events_[p].push_back(ev);
    for (auto& ev : out.events)
      if (ev.what == tree_event::kind::crash_detected || ev.what == tree_event::kind::adopted ||
          ev.what == tree_event::kind::disowned)
        crash_events_.emplace_back(p, ev);
      else if (ev.what == tree_event::kind::gained || ev.what == tree_event::kind::released)
        handover_events_.emplace_back(p, ev);
      else if (ev.what == tree_event::kind::member_buried
               || ev.what == tree_event::kind::member_returned)
        burial_events_.emplace_back(p, ev);
      else if (ev.what == tree_event::kind::suspected
               || ev.what == tree_event::kind::suspicion_cleared)
        suspicion_events_.emplace_back(p, ev);
    // A timer belongs to the incarnation that set it (as a delayed message belongs
    // to its actor): it is dropped if the processor has been replaced meanwhile.
    for (auto& t : out.timers)
      queue_.push({now_ + t.after, order_++, p, true, t.token, 0, no_proc, sups_[p] ? sups_[p].get() : nullptr});
    out.clear();
  }

  bool supervisor_running(proc_id p) const {
    auto& s = sups_[p];
    return s && s->state() != supervisor::status::left && s->state() != supervisor::status::idle;
  }
  bool rider_active(proc_id p) const { return riders_[p] && riders_[p]->active(now_); }

  void attach_rider(proc_id p) {
    if (!make_rider_)
      return;
    riders_[p] = make_rider_(p, *sups_[p]);
    rider_ids_[p] = next_rider_id_++;
    notify_rider(p);
  }

  void notify_rider(proc_id p) {
    if (!riders_[p])
      return;
    outbox out;
    riders_[p]->after_supervisor(now_, out);
    if (auto i = rider_events_.find(p); i != rider_events_.end()) {
      auto events = std::move(i->second);
      rider_events_.erase(i);
      riders_[p]->on_supervisor_events(now_, events, out);
    }
    carry_out_rider(p, out);
  }

  void run_rider_event(const event& ev) {
    auto* r = riders_[ev.to].get();
    const std::uint64_t here = r ? rider_ids_[ev.to] : 0;
    outbox out;
    if (ev.is_timer) {
      // A timer dies with its rider instance, and with its processor once that stopped.
      if (r && here == ev.target && reachable(ev.to)) {
        r->on_timer(now_, ev.token, out);
        carry_out_rider(ev.to, out);
      }
      return;
    }
    auto e = std::move(envelopes_[ev.msg]);
    envelopes_.erase(ev.msg);
    std::uint64_t sender = 0;
    if (auto i = sender_of_.find(ev.msg); i != sender_of_.end()) {
      sender = i->second;
      sender_of_.erase(i);
    }
    if (ev.bounce) {
      conn_.erase({e.from, e.to}); // the sender learns that its connection broke
      if (r && here == ev.target) {
        r->on_undeliverable(now_, e.to, e.body, out);
        carry_out_rider(ev.to, out);
      } else {
        ++lost_rider_messages_;
      }
      return;
    }
    // Delivered only to the instance it was sent to, while its processor is reachable;
    // what the rider does not take bounces too.
    if (r && here == ev.target && reachable(ev.to) && cut_.count({e.from, ev.to}) == 0) {
      bool taken = r->on_message(now_, e.from, e.body, out);
      carry_out_rider(ev.to, out);
      if (taken)
        return;
    }
    auto id = next_msg_++;
    auto from = e.from;
    envelopes_[id] = std::move(e);
    event back{now_ + topo_.one_way(ev.to, from), order_++, from, false, 0, id};
    back.rider_event = true;
    back.bounce = true;
    back.target = sender;
    queue_.push(back);
  }

  // Riders' messages (bulk data) also queue at the sender: one transmission at a time,
  // so that a pipeline of segments really streams.
  void carry_out_rider(proc_id p, outbox& out) {
    for (auto& e : out.sends) {
      auto bytes = static_cast<double>(wire::wire_size(e.body));
      auto bw = topo_.path_bandwidth(e.from, e.to);
      auto tx = bw == infinite_rate ? duration{0} : duration{static_cast<std::int64_t>(bytes / bw * 1e9)};
      auto& nic = nic_free_[e.from];
      auto departs = std::max(now_, nic) + topo_.send_overhead;
      nic = departs + tx;
      auto at = departs + tx + topo_.one_way(e.from, e.to);
      if (slow_ && slow_(e))
        at += slow_extra_;
      auto& last = last_[{e.from, e.to}];
      at = std::max(at, last);
      last = at;
      auto id = next_msg_++;
      event ev{at, order_++, e.to, false, 0, id};
      ev.rider_event = true;
      auto [conn, fresh] = conn_.try_emplace({e.from, e.to}, instance(e.to));
      (void) fresh;
      ev.target = conn->second;
      sender_of_[id] = instance(p);
      envelopes_[id] = std::move(e);
      queue_.push(ev);
    }
    for (auto& t : out.timers) {
      event ev{now_ + t.after, order_++, p, true, t.token, 0};
      ev.rider_event = true;
      ev.target = instance(p);
      queue_.push(ev);
    }
    out.clear();
  }

  topology topo_;
  std::uint64_t seed_;
  supervisor_config cfg_;
  supervisor_test_hooks hooks_;
  std::vector<std::unique_ptr<supervisor>> sups_;
  std::vector<std::unique_ptr<rider>> riders_;
  rider_factory make_rider_;
  std::map<std::uint64_t, std::uint64_t> sender_of_; ///< rider messages in flight: sender instance
  /// Rider instances are numbered (never reused, unlike addresses): 0 means none.
  std::vector<std::uint64_t> rider_ids_ = std::vector<std::uint64_t>(sups_.size(), 0);
  std::uint64_t next_rider_id_ = 1;
  std::uint64_t instance(proc_id p) const { return riders_[p] ? rider_ids_[p] : 0; }
  std::size_t lost_rider_messages_ = 0;
  std::map<proc_id, timestamp> nic_free_; ///< riders' messages: when each sender's NIC is free
  /// Riders' connections: (from, to) -> the rider instance they reach.
  std::map<std::pair<proc_id, proc_id>, std::uint64_t> conn_;
  std::priority_queue<event> queue_;
  std::map<std::uint64_t, wire::envelope> envelopes_;
  std::map<std::pair<proc_id, proc_id>, timestamp> last_;
  std::uint64_t next_msg_ = 0, order_ = 0;
  timestamp now_{0};
  int joins_ = 0;
  long trace2_ = std::getenv("BANYAN_TRACE_PROC2") ? std::atol(std::getenv("BANYAN_TRACE_PROC2")) : -1;
  long trace_ = std::getenv("BANYAN_TRACE_PROC") ? std::atol(std::getenv("BANYAN_TRACE_PROC")) : -1;
  std::map<std::pair<vnode_id, std::uint64_t>, proc_id> ledger_;
  std::vector<std::string> conflicts_;
  std::vector<std::pair<proc_id, tree_event>> crash_events_;
  std::vector<std::pair<proc_id, tree_event>> handover_events_;
  std::vector<std::pair<proc_id, tree_event>> burial_events_;
  std::vector<std::pair<proc_id, tree_event>> suspicion_events_;
  std::map<proc_id, timestamp> frozen_; ///< freeze(): until when
  std::set<std::pair<proc_id, proc_id>> cut_; ///< cut(): links (from, to) that refuse
  std::set<std::pair<proc_id, proc_id>> stalled_; ///< stall(): links (from, to) that hold
  std::vector<event> held_;                        ///< what waits on them, in order
  std::function<bool(const wire::envelope&)> slow_; ///< slow(): which messages
  duration slow_extra_{0};
  std::function<bool(const wire::envelope&)> lose_; ///< lose(): which messages
  int lose_left_ = 0;
  int lost_ = 0;
  std::map<proc_id, std::vector<tree_event>> rider_events_; ///< for the rider, not yet seen
  std::map<vnode_id, std::string> history_;
};

} // namespace banyan::test
