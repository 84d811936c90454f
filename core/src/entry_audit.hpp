#pragma once
// Double entries a processor can see, and the probes that repair them.
//
// What a candidate's probe reply says of its trees is kept in compact form: per tree
// where it may enter our group, its parent. From those, a processor p finds peers q
// that are "close" (rtt(p, q) at most 1/`group_rtt_gap` of the RTT to p's own parent in a
// tree) and whose parent in that tree is, like p's, not close: the group of processors
// around p is then entered twice in that tree (by two branches, or by one path that
// leaves the group and comes back). The parent rules can merge such entries (the worse entrant moves under the
// better one) but only when one of the two measures the other after both entries
// exist; the measurement schedule may have ended before. So a round that would end
// first probes every such suspect once; and when a fresh probe shows that the other
// entrant is the one that should move (our own rules kept us), that peer is told to
// measure us (`wire::measure_me`), at most once per round.
//
// Assumes that group boundaries (a machine, a LAN, a site) show as a jump of at least
// `group_rtt_gap` in RTT from inside (rule_context.hpp). A wrong guess costs one probe and changes nothing by itself: only the
// parent rules move a processor.

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "banyan/core/messages.hpp"
#include "banyan/core/types.hpp"

namespace banyan::sup {

struct parts;

class entry_audit {
public:

  explicit entry_audit(parts& s) : s_(s) {}

  /// A probe of `q` returned its trees (before the rules judged them).
  void note(proc_id q, const std::vector<wire::tree_info>& trees);
  /// A close peer whose last known trees show a double entry with ours and that this
  /// round has not audited yet; marks it audited. no_proc: none.
  proc_id next_suspect();
  /// After the rules judged a fresh probe of `q` and adopted nothing: true when q's
  /// trees still show a double entry with ours, q has not been told this round, and so
  /// q should measure us (the caller sends `wire::measure_me`).
  bool should_tell(proc_id q);
  /// A new measuring round: every peer may be audited and told again.
  void new_round();
  /// p is gone.
  void forget(proc_id p);
  void reset();

  std::uint64_t audits() const noexcept { return audits_; }
  std::uint64_t told() const noexcept { return told_; }

private:
  struct seen {
    tree_key tree;
    proc_id parent = no_proc; ///< q's parent in `tree`
    friend bool operator==(const seen& a, const seen& b) {
      return a.tree == b.tree && a.parent == b.parent;
    }
  };
  /// Whether q's trees (as last seen) and ours show a double entry.
  bool doubled(proc_id q) const;

  parts& s_;
  std::map<proc_id, std::vector<seen>> seen_;
  std::set<proc_id> audited_, told_this_round_;
  /// What each peer told to measure us was seen doing then: it is told again only once
  /// that has changed (a round does not reset it), so two entrants whose rules both keep
  /// them where they are do not ask each other for ever.
  std::map<proc_id, std::vector<seen>> told_what_;
  std::uint64_t audits_ = 0, told_ = 0;
};

} // namespace banyan::sup
