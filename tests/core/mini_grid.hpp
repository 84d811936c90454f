#pragma once
// A tiny discrete-event loop that drives supervisors directly, without CAF or a
// bandwidth-sharing model: each message takes one-way latency plus size over the
// path bandwidth of a topology. It lets the protocol be tested in microseconds;
// the actor-level tests run the same supervisors on the real emulated network.

#include <map>
#include <memory>
#include <queue>
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
  mini_grid(topology topo, std::uint64_t seed, supervisor_config cfg = {})
    : topo_(std::move(topo)), seed_(seed), cfg_(cfg), sups_(topo_.proc_count()) {}

  void start(std::size_t n = 0) {
    if (n == 0)
      n = topo_.proc_count();
    std::vector<wire::member> members;
    routing_table routes;
    for (proc_id p = 0; p < n; ++p) {
      members.push_back({p, ""});
      routes.assign(vnode_set{p}, p, 0);
    }
    for (proc_id p = 0; p < n; ++p) {
      sups_[p] = std::make_unique<supervisor>(p, cfg_, seed_ * 1000003 + p);
      outbox out;
      sups_[p]->found(now_, members, routes, out);
      carry_out(p, out);
    }
  }

  void join(proc_id p, proc_id contact, vnode_set wanted) {
    if (trace_ >= 0) std::fprintf(stderr, "t=%.3f JOIN %u via %u\n", to_ms(now_), p, contact);
    sups_[p] = std::make_unique<supervisor>(p, cfg_, seed_ * 7919 + p + 1000 * ++joins_);
    outbox out;
    sups_[p]->join(now_, contact, wanted, out);
    carry_out(p, out);
  }

  void leave(proc_id p, proc_id recipient = no_proc) {
    if (trace_ >= 0) std::fprintf(stderr, "t=%.3f LEAVE %u\n", to_ms(now_), p);
    outbox out;
    auto err = sups_[p]->leave(now_, recipient, out);
    if (err)
      throw std::runtime_error(err->to_string());
    carry_out(p, out); // it goes on answering until a member took its vnodes
  }

  /// Runs until nothing is left to do or `limit` events were processed.
  std::size_t run(std::size_t limit = 10'000'000) {
    std::size_t n = 0;
    while (!queue_.empty() && n < limit) {
      auto ev = queue_.top();
      queue_.pop();
      now_ = ev.at;
      ++n;
      auto& s = sups_[ev.to];
      if (ev.unreachable != no_proc) {
        if (s) {
          outbox out;
          s->on_unreachable(now_, ev.unreachable, out);
          carry_out(ev.to, out);
        }
        continue;
      }
      bool running = s && s->state() != supervisor::status::left &&
                     s->state() != supervisor::status::idle;
      if (!running) {
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
      audit(e);
      auto bytes = static_cast<double>(wire::wire_size(e.body));
      auto bw = topo_.path_bandwidth(e.from, e.to);
      auto tx = bw == infinite_rate ? duration{0} : duration{static_cast<std::int64_t>(bytes / bw * 1e9)};
      auto at = now_ + topo_.send_overhead + tx + topo_.one_way(e.from, e.to);
      // FIFO per ordered pair, as TCP and the emulated network guarantee.
      auto& last = last_[{e.from, e.to}];
      at = std::max(at, last);
      last = at;
      auto id = next_msg_++;
      envelopes_[id] = e;
      queue_.push({at, order_++, e.to, false, 0, id});
    }
    // A timer belongs to the incarnation that set it (as a delayed message belongs
    // to its actor): it is dropped if the processor has been replaced meanwhile.
    for (auto& t : out.timers)
      queue_.push({now_ + t.after, order_++, p, true, t.token, 0, no_proc, sups_[p] ? sups_[p].get() : nullptr});
    out.clear();
  }

  topology topo_;
  std::uint64_t seed_;
  supervisor_config cfg_;
  std::vector<std::unique_ptr<supervisor>> sups_;
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
  std::map<vnode_id, std::string> history_;
};

} // namespace banyan::test
