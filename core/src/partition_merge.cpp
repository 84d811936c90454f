#include "partition_merge.hpp"

#include <algorithm>

#include "supervisor_parts.hpp"

namespace banyan::sup {

void partition_merge::buried(timestamp now, proc_id p, std::uint64_t inc) {
  if (s_.cfg.merge_window.count() > 0)
    buried_[p] = {inc, now};
}

wire::merge_offer partition_merge::my_side() const {
  wire::merge_offer offer;
  const auto& info = s_.members.all_info();
  for (std::size_t i = 0; i < info.size(); ++i)
    if (s_.members.is_member(info.id(i)) || info.id(i) == s_.self)
      offer.members.push_back(info.member(i));
  return offer;
}

void partition_merge::tick(timestamp now, outbox& out) {
  if (s_.status != supervisor::status::member)
    return;
  for (auto i = buried_.begin(); i != buried_.end();) {
    if (now - i->second.since > s_.cfg.merge_window || s_.members.is_member(i->first)) {
      i = buried_.erase(i); // given up on, or back among us
      continue;
    }
    s_.send(out, i->first, my_side());
    ++i;
  }
}

void partition_merge::on(timestamp now, proc_id from, const wire::merge_offer& m, outbox& out) {
  if (s_.status != supervisor::status::member || s_.members.is_member(from) || m.members.empty())
    return; // not one of us, or of one side with us already
  auto theirs = m.members;
  // They count us, or a member of our side, in: no split between us, or an offer sent
  // while the split was still forming (its sender had buried only some of us), which a
  // connection that stalled delivers when the partition heals. Its list overstates the
  // sender's side; the sender's later offers tell.
  if (std::any_of(theirs.begin(), theirs.end(),
                  [&](auto& x) { return x.id == s_.self || s_.members.is_member(x.id); }))
    return;
  const auto& mine = s_.members.list();
  auto lowest = [](const std::vector<wire::member>& ms) {
    proc_id low = no_proc;
    for (auto& x : ms)
      low = std::min(low, x.id);
    return low;
  };
  const bool they_win = theirs.size() > mine.size()
                        || (theirs.size() == mine.size() && lowest(theirs) < mine.front());
  if (!they_win) {
    s_.send(out, from, my_side()); // the sender's side yields when it reads ours
    return;
  }
  // We yield: our vnodes are the winner's (its side adopted them), our side dissolves
  // into it, one member at a time.
  s_.owners.report_disowned(now, from, s_.owners.own(), out);
  old_side_.clear();
  for (auto p : mine)
    if (p != s_.self)
      old_side_.insert(p);
  for (auto& x : theirs)
    s_.members.exhume(now, x.id, x.incarnation, out); // we took them for crashed: they were not
  buried_.clear();
  s_.life.rejoin(now, from, out);
}

bool partition_merge::from_old_side(proc_id from, const wire::message& m) const {
  if (old_side_.count(from) == 0 || s_.members.is_member(from))
    return false;
  return std::holds_alternative<wire::member_joined>(m)
         || std::holds_alternative<wire::member_left>(m)
         || std::holds_alternative<wire::routing_update>(m);
}

bool partition_merge::from_buried(proc_id from, const wire::message& m) const {
  if (from == s_.self || s_.members.is_member(from) || !s_.members.has_left_before(from))
    return false;
  if (auto* j = std::get_if<wire::member_joined>(&m))
    return j->who.id != from; // its own new incarnation, announced: admitted or refused as ever
  return std::holds_alternative<wire::member_left>(m)
         || std::holds_alternative<wire::routing_update>(m);
}

void partition_merge::reset() { buried_.clear(); }

} // namespace banyan::sup
