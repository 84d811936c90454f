#pragma once
// A tiny discrete-event loop that drives supervisors directly, without CAF or a
// bandwidth-sharing model: each message takes one-way latency plus size over the
// path bandwidth of a topology. It lets the protocol be tested in microseconds;
// the actor-level tests run the same supervisors on the real emulated network.

#include <map>
#include <memory>
#include <queue>
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
    sups_[p] = std::make_unique<supervisor>(p, cfg_, seed_ * 7919 + p + 1000 * ++joins_);
    outbox out;
    sups_[p]->join(now_, contact, wanted, out);
    carry_out(p, out);
  }

  void leave(proc_id p, proc_id recipient = no_proc) {
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
      if (!s)
        continue; // gone
      outbox out;
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
      if (s && s->measuring())
        return true;
    return false;
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
    bool operator<(const event& o) const {
      return at != o.at ? at > o.at : order > o.order;
    }
  };

  void carry_out(proc_id p, outbox& out) {
    for (auto& e : out.sends) {
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
    for (auto& t : out.timers)
      queue_.push({now_ + t.after, order_++, p, true, t.token, 0});
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
};

} // namespace banyan::test
