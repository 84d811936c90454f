#pragma once
// What was measured of the paths to other processors: the best figures per peer (the
// smallest RTT, the widest bandwidth: contention only ever makes a measurement look
// worse), the widest rate measured to anyone, and figures of processors that are no
// members now, given back when a processor of that id at the same transport address is
// admitted again (a path's figures are the network's, not the membership's). From these
// comes the rule context: who is local.

#include <map>
#include <optional>
#include <string>

#include "banyan/core/rule_context.hpp"
#include "banyan/core/types.hpp"

namespace banyan::sup {

struct parts;

struct peer_figures {
  duration rtt = duration::max();
  rate bw = 0;
};

class path_memory {
public:
  explicit path_memory(parts& s) : s_(s) {}

  std::optional<duration> measured_rtt(proc_id p) const;
  std::optional<rate> measured_bw(proc_id p) const;
  /// The figures of every peer measured (members and, after a leave, former members).
  const std::map<proc_id, peer_figures>& figures() const noexcept { return figures_; }
  /// Records a probe's RTT to p; returns the best so far.
  duration note_rtt(proc_id p, duration rtt);
  /// Records a probe's rate to p; returns the best so far.
  rate note_bw(proc_id p, rate bw);
  /// The path to p drifted (drift_watch): its figure is now `rtt` / `bw`, whatever was
  /// measured before (the best-figure rule assumes a path that does not change).
  void replace_rtt(proc_id p, duration rtt) { figures_[p].rtt = rtt; }
  void replace_bw(proc_id p, rate bw) { figures_[p].bw = bw; }
  /// The best RTT to p, duration::max() if none (no entry is made).
  duration best_rtt(proc_id p);
  /// The widest rate measured to anyone: the sender capacity of the bandwidth rule.
  rate widest() const noexcept { return widest_; }
  void set_widest(rate r) noexcept { widest_ = r; }

  /// What the parent rules may know: the variant and, once two classes of RTT are seen
  /// (or one LAN is), the LAN's RTT.
  rule_context context() const;
  bool is_local(proc_id p) const;
  std::optional<duration> smallest_remote_rtt() const;

  /// Member p was admitted at `address`: its remembered figures come back (same address,
  /// ours unchanged).
  void restore(proc_id p, const std::string& address);
  /// Member p (at `address`) is gone: its figures move to the memory.
  void forget(proc_id p, const std::string& address);
  /// We leave: every figure of a member we know is remembered (the figures themselves
  /// stay until the next join, for the engines that still route by them).
  void remember_all();
  /// A new membership of ours starts: only the memory remains.
  void start_life() { figures_.clear(); }
  /// Takes over the memory and sender capacity of an earlier incarnation of ours.
  void recall(const path_memory& earlier);

private:
  void remember(proc_id p, const std::string& address, const peer_figures& f);

  parts& s_;
  std::map<proc_id, peer_figures> figures_;
  struct remembered_path {
    std::string address;
    peer_figures figures;
  };
  std::map<proc_id, remembered_path> remembered_;
  std::string remembered_from_; ///< our own address when the memory was made
  rate widest_ = 0;
};

} // namespace banyan::sup
