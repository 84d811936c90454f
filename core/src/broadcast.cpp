#include "banyan/core/broadcast.hpp"

#include <algorithm>
#include <set>

#include "banyan/core/owner_groups.hpp"
#include "banyan/core/vnode_blocks.hpp"

namespace banyan {

namespace {

shared_bytes assemble(const std::vector<shared_bytes>& segments, std::uint64_t total) {
  if (segments.size() == 1)
    return segments.front();
  // At the origin the segments are slices of the message itself: no copy.
  shared_bytes whole = segments.front();
  bool contiguous = true;
  for (std::size_t k = 1; k < segments.size() && contiguous; ++k)
    contiguous = whole.extend(segments[k]);
  if (contiguous && whole.size() == total)
    return whole;
  std::vector<std::uint8_t> all;
  all.reserve(static_cast<std::size_t>(total));
  for (auto& s : segments)
    all.insert(all.end(), s.begin(), s.end());
  return shared_bytes(std::move(all));
}

} // namespace

std::size_t segment_for(const broadcast_config& cfg, std::size_t bytes) {
  auto seg = std::max<std::size_t>(cfg.segment_size, 1);
  const auto min_count = std::max<std::size_t>(cfg.min_segments, 1);
  while (seg <= cfg.max_segment / 2 && bytes / (seg * 2) >= min_count)
    seg *= 2;
  return seg;
}

broadcast_engine::broadcast_engine(tree_view& view, broadcast_config cfg)
  : view_(view), cfg_(cfg), next_seq_(cfg.first_seq),
    next_tag_(cfg.first_tag != 0 ? cfg.first_tag : cfg.first_seq) {
  cfg_.segment_size = std::max<std::size_t>(cfg_.segment_size, 1);
  if (cfg_.blocks)
    cfg_.offer_handoff = false; // a new owner's own stream need not carry these blocks
}

shared_bytes broadcast_engine::part_of(const shared_bytes& seg, const vnode_set& header,
                                       const vnode_set& part) const {
  if (!cfg_.blocks)
    return seg;
  return slice_blocks(seg, header, part, block_size_of(header, seg.size()));
}

bool broadcast_engine::unusable(timestamp now, proc_id p) const {
  auto i = unreachable_.find(p);
  return i != unreachable_.end() && now < i->second;
}

tree_choice broadcast_engine::configured_choice() const {
  return {cfg_.rule, cfg_.long_threshold, {cfg_.send_overhead, cfg_.segment_size}};
}

expected<wire::collective_id> broadcast_engine::broadcast(timestamp now, shared_bytes message,
                                                          broadcast_outbox& out) {
  return broadcast(now, std::move(message), configured_choice(), out);
}

expected<wire::collective_id> broadcast_engine::broadcast(timestamp now, shared_bytes message,
                                                          const tree_choice& choice,
                                                          broadcast_outbox& out) {
  view_.refresh();
  return broadcast_to(now, std::move(message), view_.all_vnodes(), choice, out);
}

expected<wire::collective_id> broadcast_engine::broadcast_to(timestamp now, shared_bytes message,
                                                             const vnode_set& to,
                                                             broadcast_outbox& out) {
  return broadcast_to(now, std::move(message), to, configured_choice(), out);
}

expected<wire::collective_id> broadcast_engine::broadcast_to(timestamp now, shared_bytes message,
                                                             const vnode_set& to,
                                                             const tree_choice& choice,
                                                             broadcast_outbox& out) {
  view_.refresh();
  if (!view_.participating())
    return make_error(errc::stopped, "processor " + std::to_string(view_.self()) +
                                       " no longer takes part and cannot broadcast");
  if (!view_.all_vnodes().includes(to))
    return make_error(errc::invalid_argument,
                      "a broadcast to " + to.to_string() + ": not a part of the namespace");
  if (cfg_.blocks && block_size_of(to, message.size()) == 0)
    return make_error(errc::invalid_argument,
                      std::to_string(message.size()) + " bytes are not one block of the same "
                      "size for each of the " + std::to_string(to.size()) +
                      " vnodes");
  const wire::collective_id id{view_.self(), next_seq_++, cfg_.kind, cfg_.life};
  ++stats_.started;
  // Decided once, here: the kind travels in every frame of the broadcast, and so does
  // the segment length (receivers place segments by their index and length).
  // Block mode (a scatter) always takes the latency tree: its frames are never
  // segmented, so every hop stores and forwards its whole share (docs/decisions.md).
  const auto kind = cfg_.blocks                       ? tree_kind::latency
                    : message.size() > cfg_.max_whole ? tree_kind::bandwidth
                                                      : choose_tree(view_, message.size(), choice);
  const auto segment = segment_for(cfg_, message.size());
  if (acks_for(id))
    track(now, id, message, to, kind, segment, out);
  return originate(now, id, to, false, kind, message, out, segment);
}

expected<wire::collective_id> broadcast_engine::send(timestamp now, vnode_set to,
                                                     shared_bytes message,
                                                     broadcast_outbox& out) {
  view_.refresh();
  if (!view_.participating())
    return make_error(errc::stopped, "processor " + std::to_string(view_.self()) +
                                       " no longer takes part and cannot send");
  if (cfg_.message_kind == collective_kind::none)
    return make_error(errc::invalid_argument, "send: this engine sends no messages");
  if (to.empty())
    return make_error(errc::invalid_argument, "send: no destination vnode");
  if (!view_.all_vnodes().includes(to))
    return make_error(errc::invalid_argument, "send: vnodes " + (to - view_.all_vnodes()).to_string() +
                                                " do not exist (vnodes are " +
                                                view_.all_vnodes().to_string() + ")");
  const wire::collective_id id{view_.self(), next_seq_++, cfg_.message_kind, cfg_.life};
  ++stats_.sent;
  return originate(now, id, to, true, threshold_tree(message.size(), cfg_.long_threshold),
                   message, out);
}

wire::collective_id broadcast_engine::originate(timestamp now, wire::collective_id id,
                                                const vnode_set& to, bool direct,
                                                tree_kind kind, const shared_bytes& message,
                                                broadcast_outbox& out, std::size_t segment) {
  // Segments go with the bandwidth tree (and with long point-to-point messages).
  const bool is_long = kind == tree_kind::bandwidth;
  if (segment == 0)
    segment = cfg_.segment_size;
  std::size_t count = 1;
  if (is_long && !cfg_.blocks)
    count = std::max<std::size_t>(1, (message.size() + segment - 1) / segment);
  // The origin is the first receiver of its own message, for every vnode it is for.
  const stream_key key{id, view_.self(), next_tag_++};
  if (count == 1) {
    stream s;
    s.key = key;
    s.header = to;
    s.kind = kind;
    s.total = message.size();
    s.direct = direct;
    s.shallow = !direct && kind == tree_kind::latency && cfg_.shallow_bytes != 0 &&
                message.size() <= cfg_.shallow_bytes;
    run_whole(now, s, message, out);
    return id;
  }
  open(key, to, kind, static_cast<std::uint32_t>(count), message.size(), direct, 0);
  for (std::size_t i = 0; i < count; ++i) {
    const auto at = i * segment;
    const auto n = is_long ? std::min(segment, message.size() - at) : message.size();
    feed(now, key, static_cast<std::uint32_t>(i), message.slice(at, n), out);
  }
  return id;
}

wire::collective_id broadcast_engine::op_of(const wire::message& m) {
  if (auto* s = std::get_if<wire::bcast_segment>(&m))
    return s->op;
  if (auto* o = std::get_if<wire::bcast_offer>(&m))
    return o->op;
  if (auto* a = std::get_if<wire::bcast_answer>(&m))
    return a->op;
  if (auto* k = std::get_if<wire::bcast_ack>(&m))
    return k->op;
  return {};
}

bool broadcast_engine::on_message(timestamp now, proc_id from, const wire::message& m,
                                  broadcast_outbox& out) {
  if (auto* s = std::get_if<wire::bcast_segment>(&m))
    return on_segment(now, from, *s, out);
  if (auto* o = std::get_if<wire::bcast_offer>(&m)) {
    view_.refresh();
    // One that no longer takes part owns nothing and knows little: the offer goes back
    // and its sender sends the bytes.
    if (!view_.participating())
      return false;
    on_offer(now, from, *o, out);
    return true;
  }
  if (auto* a = std::get_if<wire::bcast_answer>(&m)) {
    view_.refresh();
    on_answer(now, *a, out);
    return true;
  }
  if (auto* k = std::get_if<wire::bcast_ack>(&m)) {
    view_.refresh();
    acknowledged(now, k->op, k->vnodes, out);
    return true;
  }
  return false;
}

bool broadcast_engine::on_segment(timestamp now, proc_id from, const wire::bcast_segment& m,
                                  broadcast_outbox& out) {
  view_.refresh();
  const stream_key key{m.op, from, m.stream};
  auto i = streams_.find(key);
  // A new stream only from its first frame, and only while taking part or able to
  // relay it to a member that knows better (a processor that has left: the frames
  // already on their way to it need not cross the network twice, there and back).
  if (i == streams_.end() && (!m.first || !(view_.participating() || view_.relaying())))
    return false;
  if (m.count == 0 || m.index >= m.count ||
      (cfg_.blocks && (m.count != 1 || block_size_of(m.vnodes, m.payload.size()) == 0))) {
    ++stats_.malformed;
    return true;
  }
  if (i == streams_.end() && m.count == 1) {
    // A whole message: planned, sent on and delivered now, never stored.
    stream s;
    s.key = key;
    s.header = m.vnodes;
    s.kind = m.kind;
    s.total = m.total;
    s.direct = m.direct;
    s.hops = m.hops;
    run_whole(now, s, m.payload, out);
    return true;
  }
  if (i == streams_.end())
    open(key, m.vnodes, m.kind, m.count, m.total, m.direct, m.hops);
  else if (i->second.count != m.count || i->second.header != m.vnodes) {
    ++stats_.malformed;
    return true;
  }
  feed(now, key, m.index, m.payload, out);
  return true;
}

void broadcast_engine::on_timer(timestamp now, std::uint64_t token, broadcast_outbox& out) {
  if (auto k = ticks_.find(token); k != ticks_.end()) {
    ticks_.erase(k);
    view_.refresh();
    check_pending(now, out);
    return;
  }
  auto t = timers_.find(token);
  if (t == timers_.end())
    return;
  const auto key = t->second;
  timers_.erase(t);
  auto i = streams_.find(key);
  if (i == streams_.end())
    return;
  view_.refresh();
  stream& s = i->second;
  s.held = false;
  plan(now, s, out);
  for (std::uint32_t k = 0; k < s.count; ++k)
    if (s.have[k])
      dispatch(now, key, k, s.segments[k], out);
  if (!keeps_all(s))
    std::vector<shared_bytes>(s.count).swap(s.segments);
  if (s.received == s.count)
    complete(now, key, out);
}

void broadcast_engine::on_undeliverable(timestamp now, proc_id to, const wire::message& m,
                                        broadcast_outbox& out) {
  if (auto* o = std::get_if<wire::bcast_offer>(&m)) {
    // Nobody took it there: the vnodes are still ours, and the bytes go (avoiding `to`).
    view_.refresh();
    ++stats_.bounces;
    unreachable_[to] = now + cfg_.unreachable_memory;
    auto i = offers_.find(o->tag);
    if (i == offers_.end())
      return;
    auto back = std::move(i->second);
    offers_.erase(i);
    ++stats_.offer_fallbacks;
    hand_on(now, back.msg, back.vnodes, back.hops, false, out);
    return;
  }
  if (auto* a = std::get_if<wire::bcast_answer>(&m)) {
    resend_answer(now, to, *a, out);
    return;
  }
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  if (!seg)
    return; // an acknowledgement whose receiver is gone: nobody to hear it
  view_.refresh();
  ++stats_.bounces;
  unreachable_[to] = now + cfg_.unreachable_memory;
  // The stream that sent this part there sends its later segments here instead.
  if (auto o = tag_owner_.find(seg->stream); o != tag_owner_.end()) {
    if (auto i = streams_.find(o->second); i != streams_.end())
      for (auto& f : i->second.forwards)
        if (f.tag == seg->stream)
          f.local = true;
    tag_owner_.erase(o);
  }
  // Every segment of that part, bounced or diverted, gathers in one held stream.
  const stream_key key{seg->op, view_.self(), seg->stream};
  if (!streams_.count(key))
    local_stream(seg->op, seg->kind, seg->count, seg->total, seg->stream, seg->vnodes, out);
  feed(now, key, seg->index, seg->payload, out);
}

void broadcast_engine::on_view_change(timestamp now, broadcast_outbox& out) {
  view_.refresh();
  release_held(now, out); // a lease renewed, or vnodes held for no longer ours
  if (cfg_.acknowledge) {
    drop_stale(now);
    // Owners of uncovered vnodes changed (an adoption, a handover): send them again
    // once acknowledgements of deliveries made before the change have landed.
    for (auto& [op, p] : pending_) {
      if (p.resend_at != timestamp::max())
        continue;
      for (auto& [owner, vs] : view_.owners(p.to - p.covered)) {
        if (owner == no_proc)
          continue;
        auto was = p.owners.find(owner);
        if (was == p.owners.end() || !was->second.includes(vs)) {
          p.resend_at = now + cfg_.resend_grace;
          arm(now, p.resend_at, out);
          break;
        }
      }
    }
  }
  for (auto i = unreachable_.begin(); i != unreachable_.end();)
    i = now >= i->second ? unreachable_.erase(i) : std::next(i);
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                             [&](const kept& k) { return now >= k.until; }),
              kept_.end());
}

broadcast_engine::stream& broadcast_engine::open(const stream_key& key, const vnode_set& header,
                                                 tree_kind kind, std::uint32_t count,
                                                 std::uint64_t total, bool direct,
                                                 std::uint32_t hops) {
  auto [i, fresh] = streams_.try_emplace(key);
  stream& s = i->second;
  if (!fresh)
    return s;
  s.key = key;
  s.header = header;
  s.kind = kind;
  s.count = count;
  s.total = total;
  s.direct = direct;
  s.hops = hops;
  s.segments.resize(count);
  s.have.assign(count, false);
  return s;
}

broadcast_engine::stream& broadcast_engine::local_stream(const wire::collective_id& op,
                                                         tree_kind kind, std::uint32_t count,
                                                         std::uint64_t total,
                                                         std::uint64_t tag,
                                                         const vnode_set& vnodes,
                                                         broadcast_outbox& out) {
  const stream_key key{op, view_.self(), tag};
  stream& s = open(key, vnodes, kind, count, total, true, 0);
  s.fresh = true;
  s.held = true;
  ++stats_.holds;
  const auto token = next_token_++;
  timers_[token] = key;
  out.timers.push_back({cfg_.retry_delay, token});
  return s;
}

void broadcast_engine::feed(timestamp now, const stream_key& key, std::uint32_t index,
                            const shared_bytes& seg, broadcast_outbox& out) {
  auto i = streams_.find(key);
  if (i == streams_.end())
    return;
  stream& s = i->second;
  if (index >= s.count || s.have[index]) {
    ++stats_.malformed;
    return;
  }
  s.have[index] = true;
  ++s.received;
  s.last_fed = now;
  if (!s.planned && !s.held)
    plan(now, s, out); // once per stream, at its first segment
  if (keeps_all(s))
    s.segments[index] = seg;
  if (!s.planned)
    return;
  dispatch(now, key, index, seg, out);
  if (s.received == s.count)
    complete(now, key, out);
}

void broadcast_engine::plan(timestamp now, stream& s, broadcast_outbox& out) {
  s.planned = true;
  const proc_id self = view_.self();
  auto rest = s.header;
  // (I) what this processor owns
  if (view_.participating()) {
    s.deliver = rest & view_.own_vnodes();
    rest -= s.deliver;
  }
  s.out_hops = s.fresh ? 0 : s.hops + 1;
  // Vnodes delivered here while they were ours (a copy reaching their past owner, such
  // as an origin's resend after we were taken for crashed): acknowledged, not sent on.
  if (!rest.empty() && !s.fresh)
    rest -= answer_for_past(now, std::get<0>(s.key), rest, out);
  if (rest.empty())
    return;
  auto hold = [&](const vnode_set& part) {
    forward f{self, part, true, next_tag_++, true};
    s.forwards.push_back(f);
    local_stream(std::get<0>(s.key), s.kind, s.count, s.total, f.tag, part, out);
  };
  if (!s.fresh && s.hops >= cfg_.max_hops) {
    hold(rest); // gone round too long: wait, then go point-to-point afresh
    return;
  }
  // (I') a shallow start: the origin's LAN straight from here (after the tree's frames)
  std::map<proc_id, vnode_set> shallow;
  if (s.shallow && !s.fresh)
    shallow = shallow_parts(now, s, rest);
  // (II) down the tree, the child with the most descendants first; also on a direct
  // stream of a broadcast: what reaches its receiver point-to-point while trees heal
  // may be the receiver's whole subtree. Not after a hold (hops exhausted or a bounce:
  // the tree is what failed).
  if (!s.fresh && !is_p2p(std::get<0>(s.key))) {
    auto kids = view_.children({std::get<0>(s.key).origin, s.kind});
    std::sort(kids.begin(), kids.end(), [](const tree_child& a, const tree_child& b) {
      return a.descendants != b.descendants ? a.descendants > b.descendants : a.id < b.id;
    });
    s.forwards.reserve(kids.size()); // one allocation, not one per doubling
    for (auto& c : kids) {
      if (c.id == self || c.id == no_proc || unusable(now, c.id))
        continue;
      auto part = rest & c.subtree;
      if (part.empty())
        continue;
      rest -= part;
      s.forwards.push_back({c.id, std::move(part), false, next_tag_++, false});
      if (!s.transient)
        tag_owner_[s.forwards.back().tag] = s.key;
    }
  }
  for (auto& [p, part] : shallow) {
    s.forwards.push_back({p, std::move(part), true, next_tag_++, false});
    s.forwards.back().shallow = true;
    if (!s.transient)
      tag_owner_[s.forwards.back().tag] = s.key;
  }
  // (III) point-to-point to the owners (or a peer that knows better), as a tree of
  // direct streams
  auto parts = route_to_owners(view_, rest, [&](proc_id p) { return unusable(now, p); });
  if (auto mine = parts.find(self); mine != parts.end()) {
    hold(mine->second); // nobody to send it to yet
    parts.erase(mine);
  }
  for (auto& g : group_owners(view_, parts, cfg_.direct_fanout)) {
    s.forwards.push_back({g.head, std::move(g.vnodes), true, next_tag_++, false});
    if (!s.transient)
      tag_owner_[s.forwards.back().tag] = s.key;
  }
}

std::map<proc_id, vnode_set> broadcast_engine::shallow_parts(timestamp now, const stream& s,
                                                             vnode_set& rest) {
  const proc_id self = view_.self();
  std::size_t lan = 1;
  for (auto p : view_.peers())
    if (view_.local(p) && ++lan > cfg_.shallow_max_procs)
      return {};
  std::set<proc_id> kids;
  for (auto& c : view_.children({std::get<0>(s.key).origin, s.kind}))
    kids.insert(c.id);
  auto parts = route_to_owners(view_, rest, [&](proc_id p) { return unusable(now, p); });
  for (auto i = parts.begin(); i != parts.end();) {
    if (i->first == self || kids.count(i->first) || !view_.local(i->first)) {
      i = parts.erase(i);
      continue;
    }
    rest -= i->second;
    ++i;
  }
  return parts;
}

void broadcast_engine::dispatch(timestamp now, const stream_key& key, std::uint32_t index,
                                const shared_bytes& seg, broadcast_outbox& out) {
  dispatch(now, streams_.at(key), index, seg, out);
}

void broadcast_engine::dispatch(timestamp now, stream& s, std::uint32_t index,
                                const shared_bytes& seg, broadcast_outbox& out) {
  // Feeding a held stream never dispatches, so `s` and its forwards stay where they are.
  const auto& op = std::get<0>(s.key);
  out.sends.reserve(out.sends.size() + s.forwards.size());
  for (std::size_t k = 0; k < s.forwards.size(); ++k) {
    forward& f = s.forwards[k];
    const auto part = part_of(seg, s.header, f.vnodes);
    if (f.local)
      feed(now, {op, view_.self(), f.tag}, index, part, out);
    else
      send_segment(now, s.out_hops, f, {op, s.kind, s.count, cfg_.blocks ? part.size() : s.total},
                   index, part, out);
  }
}

void broadcast_engine::run_whole(timestamp now, stream& s, const shared_bytes& payload,
                                 broadcast_outbox& out) {
  // What `feed` does for the first (and here only) segment, then `complete`.
  s.transient = true;
  s.count = 1;
  s.received = 1;
  plan(now, s, out);
  dispatch(now, s, 0, payload, out);
  if (keeps_all(s))
    s.segments.assign(1, payload);
  finish(now, s, out);
}

void broadcast_engine::complete(timestamp now, const stream_key& key, broadcast_outbox& out) {
  auto i = streams_.find(key);
  stream s = std::move(i->second);
  streams_.erase(i);
  for (auto& f : s.forwards)
    if (!f.local)
      tag_owner_.erase(f.tag);
  finish(now, s, out);
}

void broadcast_engine::finish(timestamp now, stream& s, broadcast_outbox& out) {
  const auto vnodes = s.deliver | s.adopted;
  if (vnodes.empty())
    return;
  whole msg{{std::get<0>(s.key), s.kind, s.count, s.total}, s.header, s.out_hops,
            std::move(s.segments)};
  const auto bytes = assemble(msg.segments, msg.head.total);
  settle(now, msg, bytes, vnodes, s.adopted.empty() ? 0 : s.adopted_hops, out);
  // Kept after settling (which reads `msg` only), so the copy for offers is `msg` itself.
  keep(now, std::move(msg), bytes);
}

void broadcast_engine::settle(timestamp now, const whole& msg, const shared_bytes& bytes,
                              const vnode_set& vnodes, std::uint32_t hops,
                              broadcast_outbox& out) {
  vnode_set own;
  if (view_.participating())
    own = vnodes & view_.own_vnodes();
  const auto moved = vnodes - own;
  if (!own.empty() && (now < fence_until_ || !view_.may_deliver(now))) {
    hold(now, msg, bytes, own, hops, out); // made later if still ours, else handed on
  } else if (!own.empty()) {
    auto fresh = own;
    if (acks_for(msg.head.op)) {
      const auto again = repeats(now, msg.head.op, own);
      stats_.repeats += again.size();
      fresh -= again;
    }
    if (!fresh.empty()) {
      stats_.delivered += fresh.size();
      out.deliveries.push_back({msg.head.op, fresh, part_of(bytes, msg.header, fresh),
                                  is_p2p(msg.head.op)});
    }
    if (acks_for(msg.head.op)) {
      if (msg.head.op.origin == view_.self()) {
        acknowledged(now, msg.head.op, own, out);
      } else {
        out.sends.push_back({view_.self(), msg.head.op.origin, wire::bcast_ack{msg.head.op, own}});
        ++stats_.acks_sent;
        ++frames_sent_;
        last_send_ = now;
      }
    }
  }
  if (!moved.empty()) {
    const auto rest = moved - answer_for_past(now, msg.head.op, moved, out);
    if (!rest.empty())
      hand_on(now, msg, rest, hops, cfg_.offer_handoff, out);
  }
}

void broadcast_engine::keep(timestamp now, whole msg, const shared_bytes& bytes) {
  if (is_p2p(msg.head.op) || cfg_.blocks || !view_.participating() || cfg_.keep_count == 0 ||
      bytes.size() > cfg_.keep_bytes)
    return;
  auto stale = [&](const kept& k) { return now >= k.until || k.msg.head.op == msg.head.op; };
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(), stale), kept_.end());
  kept_.push_back({std::move(msg), bytes, now + cfg_.keep_for});
  std::size_t total = 0;
  for (auto& k : kept_)
    total += k.bytes.size();
  while (kept_.size() > cfg_.keep_count || total > cfg_.keep_bytes) {
    total -= kept_.front().bytes.size();
    kept_.erase(kept_.begin());
  }
}

const broadcast_engine::kept* broadcast_engine::kept_copy(timestamp now,
                                                          const wire::collective_id& op) const {
  for (auto& k : kept_)
    if (k.msg.head.op == op && now < k.until)
      return &k;
  return nullptr;
}

void broadcast_engine::track(timestamp now, const wire::collective_id& id,
                             const shared_bytes& message, const vnode_set& to, tree_kind kind,
                             std::size_t segment, broadcast_outbox& out) {
  // The message as `originate` cuts it: a resend's segments are the original's.
  pending_op p;
  const bool is_long = kind == tree_kind::bandwidth;
  std::size_t count = 1;
  if (is_long)
    count = std::max<std::size_t>(1, (message.size() + segment - 1) / segment);
  p.msg.head = {id, kind, static_cast<std::uint32_t>(count), message.size()};
  for (std::size_t i = 0; i < count; ++i) {
    const auto at = i * segment;
    p.msg.segments.push_back(count == 1 ? message
                                        : message.slice(at, std::min(segment, message.size() - at)));
  }
  p.msg.header = to;
  p.to = to;
  p.owners = view_.owners(to);
  p.first_owners = p.owners;
  p.progress = now;
  p.deadline = now + cfg_.complete_within;
  pending_[id] = std::move(p);
  arm(now, std::min(now + cfg_.resend_after, now + cfg_.complete_within), out);
}

void broadcast_engine::acknowledged(timestamp now, const wire::collective_id& op,
                                    const vnode_set& vnodes, broadcast_outbox& out) {
  auto i = pending_.find(op);
  if (i == pending_.end())
    return; // complete or given up already, or not ours
  auto& p = i->second;
  const auto add = (vnodes & p.to) - p.covered;
  if (add.empty())
    return;
  p.covered |= add;
  p.progress = now;
  if (!p.covered.includes(p.to))
    return;
  out.completions.push_back({op, true, {}, {}, p.resends});
  ++stats_.completed;
  pending_.erase(i);
}

void broadcast_engine::check_pending(timestamp now, broadcast_outbox& out) {
  release_held(now, out);
  if (cfg_.acknowledge)
    drop_stale(now);
  auto next = timestamp::max();
  for (auto i = pending_.begin(); i != pending_.end();) {
    auto& p = i->second;
    const auto missing = p.to - p.covered;
    if (now >= p.deadline) {
      out.completions.push_back({i->first, false, missing, view_.owners(missing), p.resends});
      ++stats_.failed;
      i = pending_.erase(i);
      continue;
    }
    if (now >= p.progress + cfg_.resend_after)
      p.resend_at = std::min(p.resend_at, now);
    if (now >= p.resend_at) {
      p.resend_at = timestamp::max();
      p.progress = now;
      // Whoever held these vnodes' part may be gone: the origin sends it again, offered
      // first (a receiver with a live stream or a kept copy takes it), else the bytes.
      // An origin that has left sends nothing more (its outcome may still complete).
      if (view_.participating()) {
        p.owners = view_.owners(missing);
        ++p.resends;
        ++stats_.resends;
        // A vnode whose owner changed since the start goes to its owner of then, if
        // that processor has not refused us lately: it may be alive and have delivered
        // it (taken for crashed while only slow, its acknowledgement late or dropped as
        // a buried processor's). It acknowledges what it delivered and sends the rest
        // on to the owner of the moment (`plan`, `settle`); one that is gone refuses
        // the bytes and they come back here and go to the new owner
        // (`on_undeliverable`). So the new owner delivers only what the old one did
        // not. The bytes, not an offer: an offer refused falls back to the new owner.
        // A past owner that has not answered within `past_owner_wait` (stopped, say) is
        // passed over, and the vnodes go to their owner of the moment, as before: a
        // stopped processor's runtime fences its deliveries when it runs again
        // (`fence`). So what is assumed is that a processor taken for crashed either
        // answers within `past_owner_wait` or finds its stall and fences.
        auto rest = missing;
        const bool waited = p.past_since != timestamp::max() &&
                            now - p.past_since >= cfg_.past_owner_wait;
        for (auto& [was, vs] : p.first_owners) {
          if (was == view_.self() || was == no_proc || unusable(now, was))
            continue;
          auto part = vs & rest;
          if (waited)
            part -= p.past_tried;
          if (auto same = p.owners.find(was); same != p.owners.end())
            part -= same->second;
          if (part.empty())
            continue;
          rest -= part;
          p.past_tried |= part;
          p.past_since = std::min(p.past_since, now);
          stats_.past_owner_resends += part.size();
          forward f{was, part, true, next_tag_++, false};
          for (std::uint32_t k = 0; k < p.msg.head.count; ++k) {
            auto head = p.msg.head;
            const auto seg = part_of(p.msg.segments[k], p.msg.header, part);
            if (cfg_.blocks)
              head.total = seg.size();
            send_segment(now, 0, f, head, k, seg, out);
          }
        }
        if (!rest.empty())
          hand_on(now, p.msg, rest, 0, cfg_.offer_handoff, out);
      }
    }
    next = std::min({next, p.deadline, p.resend_at, p.progress + cfg_.resend_after});
    ++i;
  }
  if (!fenced_.empty() && now < fence_until_)
    next = std::min(next, fence_until_);
  if (next != timestamp::max())
    arm(now, next, out);
}

void broadcast_engine::drop_stale(timestamp now) {
  for (auto i = streams_.begin(); i != streams_.end();) {
    auto& s = i->second;
    if (s.held || s.received == s.count || now - s.last_fed <= cfg_.stale_stream) {
      ++i;
      continue;
    }
    for (auto& f : s.forwards)
      if (!f.local)
        tag_owner_.erase(f.tag);
    ++stats_.stale_dropped;
    i = streams_.erase(i);
  }
}

void broadcast_engine::arm(timestamp now, timestamp at, broadcast_outbox& out) {
  for (auto& [token, when] : ticks_)
    if (when <= at)
      return;
  const auto token = next_token_++;
  ticks_[token] = at;
  out.timers.push_back({std::max(at - now, duration::zero()), token});
}

vnode_set broadcast_engine::repeats(timestamp now, const wire::collective_id& op,
                                    const vnode_set& vnodes) {
  auto& h = history_[op];
  const auto again = vnodes & h.first;
  h.first |= vnodes;
  h.second = now + cfg_.history_for;
  if (history_.size() > cfg_.history_count) {
    for (auto i = history_.begin(); i != history_.end();)
      i = now >= i->second.second && i->first != op ? history_.erase(i) : std::next(i);
    while (history_.size() > cfg_.history_count) {
      auto oldest = history_.end();
      for (auto i = history_.begin(); i != history_.end(); ++i)
        if (i->first != op && (oldest == history_.end() || i->second.second < oldest->second.second))
          oldest = i;
      history_.erase(oldest);
    }
  }
  return again;
}

vnode_set broadcast_engine::delivered_here(const wire::collective_id& op,
                                          const vnode_set& vnodes) const {
  auto h = history_.find(op);
  return h == history_.end() ? vnode_set{} : vnodes & h->second.first;
}

vnode_set broadcast_engine::answer_for_past(timestamp now, const wire::collective_id& op,
                                            const vnode_set& vnodes, broadcast_outbox& out) {
  if (!acks_for(op))
    return {};
  auto done = delivered_here(op, vnodes);
  if (view_.participating())
    done -= view_.own_vnodes(); // ours: `settle` acknowledges them
  if (done.empty())
    return done;
  stats_.delivered_before += done.size();
  if (op.origin == view_.self()) {
    acknowledged(now, op, done, out);
  } else {
    out.sends.push_back({view_.self(), op.origin, wire::bcast_ack{op, done}});
    ++stats_.acks_sent;
    ++frames_sent_;
    last_send_ = now;
  }
  return done;
}

std::string broadcast_engine::describe() const {
  std::string r;
  for (auto& [key, s] : streams_) {
    auto& [op, from, tag] = key;
    r += "broadcast (" + std::to_string(op.origin) + "," + std::to_string(op.seq) + ") from " +
         std::to_string(from) + " stream " + std::to_string(tag) + " for " +
         s.header.to_string() + ": " + std::to_string(s.received) + "/" +
         std::to_string(s.count) + " segments" + (s.held ? ", held" : "") +
         (s.planned ? ", delivers " + s.deliver.to_string() : ", not planned") +
         (s.adopted.empty() ? "" : ", adopted " + s.adopted.to_string());
    for (auto& f : s.forwards)
      r += ", " + f.vnodes.to_string() + (f.local ? " held as " : f.direct ? " direct to " : " to child ") +
           (f.local ? std::to_string(f.tag) : std::to_string(f.to));
    r += "\n";
  }
  for (auto& [tag, o] : offers_)
    r += "broadcast (" + std::to_string(o.msg.head.op.origin) + "," +
         std::to_string(o.msg.head.op.seq) + ") offered to " + std::to_string(o.to) + " for " +
         o.vnodes.to_string() + " (offer " + std::to_string(tag) + "), no answer yet\n";
  for (auto& [op, p] : pending_)
    r += "broadcast (" + std::to_string(op.origin) + "," + std::to_string(op.seq) +
         ") started here: acknowledged by " + p.covered.to_string() + ", sent again " +
         std::to_string(p.resends) + " times\n";
  return r;
}

void broadcast_engine::send_segment(timestamp now, std::uint32_t hops, forward& f,
                                    const message_head& head, std::uint32_t index,
                                    const shared_bytes& seg, broadcast_outbox& out) {
  wire::bcast_segment m;
  m.op = head.op;
  m.kind = head.kind;
  m.vnodes = f.vnodes;
  m.direct = f.direct;
  m.hops = hops;
  m.stream = f.tag;
  m.first = !f.opened;
  f.opened = true;
  m.index = index;
  m.count = head.count;
  m.total = head.total;
  m.payload = seg;
  out.sends.push_back({view_.self(), f.to, std::move(m)});
  ++(f.shallow ? stats_.shallow_frames : f.direct ? stats_.direct_frames : stats_.tree_frames);
  ++frames_sent_;
  last_send_ = now;
}

} // namespace banyan
