// Handing vnodes on (docs/collectives.md): a broadcast that reached vnodes this
// processor no longer owns goes to their new owners, as an offer of the responsibility
// (`bcast_offer`, answered by `bcast_answer`) or as the whole message; an offer that comes
// here is taken when a stream or a kept copy of the broadcast can serve it.
#include "banyan/core/broadcast.hpp"

#include <iterator>

#include "banyan/core/owner_groups.hpp"

namespace banyan {

void broadcast_engine::hand_on(timestamp now, const whole& msg, const vnode_set& vnodes,
                               std::uint32_t hops, bool offer, broadcast_outbox& out) {
  const proc_id self = view_.self();
  auto parts = route_to_owners(view_, vnodes, [&](proc_id p) { return unusable(now, p); });
  if (auto mine = parts.find(self); mine != parts.end()) {
    // Nobody to hand them to yet: held here, then planned afresh.
    auto& held = local_stream(msg.head.op, msg.head.kind, msg.head.count, msg.head.total,
                              next_tag_++, mine->second, out);
    const auto held_key = held.key;
    for (std::uint32_t k = 0; k < msg.head.count; ++k)
      feed(now, held_key, k, part_of(msg.segments[k], msg.header, mine->second), out);
    parts.erase(mine);
  }
  if (parts.empty())
    return;
  if (offer && !is_p2p(msg.head.op) && hops < cfg_.max_offer_hops) {
    // The responsibility, not the bytes: a new owner most likely receives this broadcast
    // for its own vnodes anyway. The vnodes stay ours until its answer says otherwise.
    for (auto& [owner, part] : parts) {
      const auto tag = next_tag_++;
      out.sends.push_back({self, owner, wire::bcast_offer{msg.head.op, part, tag, hops}});
      offers_[tag] = offer_out{owner, std::move(part), hops, msg};
      ++stats_.offered;
      ++frames_sent_;
    }
    last_send_ = now;
    return;
  }
  // The whole message goes to the new owners.
  ++stats_.redirected;
  for (auto& g : group_owners(view_, parts, cfg_.direct_fanout)) {
    forward f{g.head, std::move(g.vnodes), true, next_tag_++, false};
    for (std::uint32_t k = 0; k < msg.head.count; ++k) {
      const auto part = part_of(msg.segments[k], msg.header, f.vnodes);
      auto head = msg.head;
      if (cfg_.blocks)
        head.total = part.size();
      send_segment(now, msg.out_hops, f, head, k, part, out);
    }
  }
}

void broadcast_engine::on_offer(timestamp now, proc_id from, const wire::bcast_offer& m,
                                broadcast_outbox& out) {
  bool taken = false;
  if (!is_p2p(m.op) && !m.vnodes.empty() && !cfg_.blocks) {
    // A stream of that broadcast here that has kept every segment delivers to them too
    // when it completes; else a completed copy kept here delivers now.
    // (With acknowledgements, not a stream that has stopped receiving: its sender may
    // have crashed, and the offer's vnodes would wait with it.)
    for (auto i = streams_.lower_bound({m.op, 0, 0});
         i != streams_.end() && std::get<0>(i->first) == m.op && !taken; ++i)
      if (keeps_all(i->second) &&
          (!cfg_.acknowledge || i->second.held || now - i->second.last_fed <= cfg_.resend_grace)) {
        i->second.adopted |= m.vnodes;
        i->second.adopted_hops = std::max(i->second.adopted_hops, m.hops + 1);
        taken = true;
      }
    if (!taken)
      if (auto* k = kept_copy(now, m.op)) {
        const auto msg = k->msg;
        const auto bytes = k->bytes;
        taken = true;
        settle(now, msg, bytes, m.vnodes, m.hops + 1, out);
      }
  }
  ++(taken ? stats_.offers_taken : stats_.offers_refused);
  out.sends.push_back({view_.self(), from, wire::bcast_answer{m.op, m.tag, taken}});
  ++frames_sent_;
  last_send_ = now;
}

void broadcast_engine::on_answer(timestamp now, const wire::bcast_answer& m,
                                 broadcast_outbox& out) {
  auto i = offers_.find(m.tag);
  if (i == offers_.end() || i->second.msg.head.op != m.op)
    return;
  auto o = std::move(i->second);
  offers_.erase(i);
  if (m.accepted)
    return; // theirs now
  ++stats_.offer_fallbacks;
  hand_on(now, o.msg, o.vnodes, o.hops, false, out);
}

void broadcast_engine::resend_answer(timestamp now, proc_id to, const wire::bcast_answer& a,
                                     broadcast_outbox& out) {
  // A bounce says the connection broke, not that nobody runs there: a processor that
  // restarted since we last wrote to it (it left and rejoined) is reached on a new
  // connection, and its offer waits for this answer (an offer has no timeout: the
  // vnodes stay the offerer's until it is answered). Sent again once; a second bounce
  // means nobody runs there. Harmless where the offerer did restart: offer tags are
  // never reused across incarnations (`first_tag`), so the new one ignores it.
  for (auto i = answers_resent_.begin(); i != answers_resent_.end();)
    i = now >= i->second ? answers_resent_.erase(i) : std::next(i);
  if (!answers_resent_.try_emplace({to, a.tag}, now + cfg_.unreachable_memory).second)
    return;
  out.sends.push_back({view_.self(), to, a});
  ++frames_sent_;
  last_send_ = now;
}

} // namespace banyan
