#pragma once
// One real supervisor among scripted peers, in virtual time: every peer answers pings,
// bandwidth probes and adoption requests at the RTT and rate the test gives it, with the
// tree figures the test gives it (changed whenever the test likes), and accepts every
// adoption. The test sends the supervisor what the peers would (tree updates, orphans),
// and reads what it sent. For rules that turn on what a peer says at a given moment,
// which a grid of real supervisors would only reach by chance.

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::test {

class scripted_peers {
public:
  struct peer {
    duration rtt{std::chrono::milliseconds(1)};
    rate bw = 10e6;
    /// What the peer says of its place, per tree (a root says so of its own trees).
    std::map<tree_key, wire::tree_info> trees;
  };

  /// Processors 0..n-1 found the computation, each owning one vnode; `self` is real.
  scripted_peers(proc_id self, std::size_t n, supervisor_config cfg, std::uint64_t seed)
    : sup(self, cfg, seed), peers(n) {
    for (proc_id p = 0; p < n; ++p) {
      members_.push_back({p, "", 0});
      routes_.assign(vnode_set::range(p, p + 1), p, 0);
    }
  }

  /// Gives peer q the info a connected non-root processor has in every tree rooted at
  /// another peer (dist = its RTT, path {root}, est `est`), and a root's in its own.
  void default_trees(proc_id q, rate est) {
    for (proc_id r = 0; r < peers.size(); ++r)
      for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
        wire::tree_info i;
        i.tree = {r, k};
        i.connected = true;
        if (r == q) {
          i.est = infinite_rate;
        } else {
          i.dist = peers[q].rtt;
          i.est = est;
          i.path = {r};
        }
        peers[q].trees[i.tree] = i;
      }
  }

  void start() {
    outbox out;
    sup.found(now_, members_, routes_, out);
    carry_out(out);
  }

  /// Peer `from` sends the supervisor `m`, arriving now.
  void deliver(proc_id from, wire::message m) {
    outbox out;
    sup.on_message(now_, from, m, out);
    carry_out(out);
  }

  /// Peer `from` sends the supervisor `m` now: it arrives half an RTT later, after what
  /// the peer sent before (FIFO, as on a connection).
  void tell(proc_id from, wire::message m) { arrive(from, now_ + peers[from].rtt / 2, std::move(m)); }

  /// Runs `f` at `at` (a peer's doing, say).
  void at(timestamp when, std::function<void()> f) { queue_.emplace(key{when, order_++}, std::move(f)); }

  /// Runs everything due until `until` (or until nothing is left), then sets the clock there.
  void run_until(timestamp until) {
    while (!queue_.empty() && queue_.begin()->first.first <= until) {
      auto i = queue_.begin();
      auto f = std::move(i->second);
      now_ = i->first.first;
      queue_.erase(i);
      f();
    }
    now_ = until;
  }
  /// Runs until nothing is left (the supervisor idle, its timers all fired).
  void run() {
    while (!queue_.empty())
      run_until(queue_.begin()->first.first);
  }

  timestamp now() const { return now_; }

  supervisor sup;
  std::vector<peer> peers;
  /// Everything the supervisor sent, in order, with when.
  std::vector<std::pair<timestamp, wire::envelope>> sent;
  /// Called for each of them as it is sent (before the peer's answer is scheduled).
  std::function<void(const wire::envelope&)> on_send;

private:
  using key = std::pair<timestamp, std::uint64_t>;

  void carry_out(outbox& out) {
    for (auto& t : out.timers) {
      auto token = t.token;
      at(now_ + t.after, [this, token] {
        outbox o;
        sup.on_timer(now_, token, o);
        carry_out(o);
      });
    }
    for (auto& e : out.sends) {
      sent.emplace_back(now_, e);
      if (on_send)
        on_send(e);
      answer(e);
    }
  }

  /// `m` from peer q arrives at `when`, or after the last thing q sent, if later.
  void arrive(proc_id q, timestamp when, wire::message m) {
    auto& last = last_[q];
    last = std::max(last, when);
    at(last, [this, q, m = std::move(m)] { deliver(q, m); });
  }

  // The peer handles each request half an RTT after it was sent, with its figures then,
  // and its answer takes another half (a bandwidth reply its transfer time on top).
  void answer(const wire::envelope& e) {
    if (e.to >= peers.size())
      return;
    auto q = e.to;
    const auto half = peers[q].rtt / 2;
    if (auto* ping = std::get_if<wire::ping>(&e.body)) {
      arrive(q, now_ + 2 * half, wire::pong{ping->seq});
    } else if (auto* req = std::get_if<wire::bw_request>(&e.body)) {
      at(now_ + half, [this, q, half, seq = req->seq] {
        auto& p = peers[q];
        wire::bw_reply reply;
        reply.seq = seq;
        for (auto& [k, i] : p.trees)
          reply.trees.push_back(i);
        auto bare = wire::wire_size(reply);
        reply.padding = bare < wire::bw_probe_bytes
                          ? static_cast<std::uint32_t>(wire::bw_probe_bytes - bare) : 0u;
        auto bytes = static_cast<double>(wire::wire_size(wire::message{reply}));
        auto transfer = duration{static_cast<duration::rep>(bytes * 1e9 / p.bw)};
        arrive(q, now_ + half, wire::pong{seq}); // the mark
        arrive(q, now_ + half + transfer, std::move(reply));
      });
    } else if (auto* adopt = std::get_if<wire::adopt_request>(&e.body)) {
      at(now_ + half, [this, q, half, req = *adopt] {
        wire::adopt_reply yes{req.seq, {}};
        for (auto& s : req.trees)
          yes.verdicts.push_back({s.tree, true, peers[q].trees[s.tree], no_proc});
        arrive(q, now_ + half, std::move(yes));
      });
    }
  }

  std::vector<wire::member> members_;
  routing_table routes_;
  timestamp now_{0};
  std::map<proc_id, timestamp> last_; ///< when the last message from each peer arrives
  std::uint64_t order_ = 0;
  std::map<key, std::function<void()>> queue_;
};

} // namespace banyan::test
