#include "banyan/core/entry_hints.hpp"

#include <algorithm>

namespace banyan {

namespace {

bool on_path(const wire::tree_info& info, proc_id p) {
  return std::find(info.path.begin(), info.path.end(), p) != info.path.end();
}

/// A rate the bandwidth rule's merge could accept instead of `current` (within the margin).
bool comparable(rate offered, rate current, const rule_context& ctx) {
  return offered >= current * (1.0 - ctx.bw_margin);
}

} // namespace

bool is_entry(const tree_state& t, const rule_context& ctx) {
  return t.key().kind == tree_kind::bandwidth && !t.is_root() && t.parent() != no_proc
         && ctx.min_rtt != duration::max() && !ctx.local(t.rtt_parent());
}

entry_response respond_to_entry(const tree_state& self, proc_id self_id, proc_id sender,
                                const wire::tree_info& sender_info, const rule_context& ctx) {
  if (self.key().kind != tree_kind::bandwidth || sender_info.tree != self.key()
      || !sender_info.connected || !self.connected() || sender == self_id)
    return entry_response::ignore;
  // Fed through the sender: it is our LAN's entry, rightly.
  if (self.has_ancestor(sender))
    return entry_response::ignore;
  // The sender is fed through us (the root, or a path that leaves the LAN below us and
  // comes back): it may move under us, never we under it.
  if (on_path(sender_info, self_id))
    return entry_response::answer;
  if (is_entry(self, ctx)) {
    // Two entries: the one receiving less moves (a tie: the higher id), the other stays.
    auto mine = self.est();
    const bool i_move = mine < sender_info.est || (mine == sender_info.est && self_id > sender);
    return i_move ? entry_response::probe : entry_response::answer;
  }
  // Fed inside the LAN, not through the sender: a second way in. Worth the sender's probe
  // only if we receive about as much as it does.
  return comparable(self.est(), sender_info.est, ctx) ? entry_response::answer
                                                      : entry_response::ignore;
}

bool probe_answerer(const tree_state& self, proc_id self_id, proc_id answerer,
                    const wire::tree_info& answerer_info, const rule_context& ctx) {
  return answerer_info.tree == self.key() && answerer != self_id && answerer_info.connected
         && is_entry(self, ctx) && !on_path(answerer_info, self_id)
         && comparable(answerer_info.est, self.est(), ctx);
}

} // namespace banyan
