#include "suspicion.hpp"

#include <algorithm>
#include <vector>

#include "supervisor_parts.hpp"

namespace banyan::sup {

void suspicion::suspect(timestamp now, proc_id p, outbox& out) {
  if (p == s_.self || !s_.members.is_member(p) || suspects_.count(p) != 0)
    return;
  if (s_.cfg.suspect_timeout.count() <= 0) {
    s_.watch.declare_crashed(now, p, out);
    return;
  }
  const auto seq = s_.next_seq++;
  suspects_[p] = {seq, s_.members.info(p)->incarnation, now};
  s_.send(out, p, wire::ping{seq}); // the connection may work again
  // k helpers drawn among the other members not suspected themselves.
  std::vector<proc_id> helpers;
  for (auto m : s_.members.list())
    if (m != s_.self && m != p && suspects_.count(m) == 0)
      helpers.push_back(m);
  const auto k = static_cast<std::size_t>(std::max(0, s_.cfg.indirect_probes));
  for (std::size_t i = 0; i < helpers.size() && i < k; ++i) {
    auto j = std::uniform_int_distribution<std::size_t>(i, helpers.size() - 1)(s_.rng);
    std::swap(helpers[i], helpers[j]);
    s_.send(out, helpers[i], wire::ping_req{seq, p});
  }
  s_.start_timer(out, s_.cfg.suspect_timeout, timer_token::suspect(seq));
}

bool suspicion::helper_ping_failed(proc_id p) {
  bool helping = false;
  for (auto i = helping_.begin(); i != helping_.end();)
    if (i->second.target == p) {
      helping = true;
      i = helping_.erase(i);
    } else {
      ++i;
    }
  return helping && suspects_.count(p) == 0;
}

void suspicion::on(timestamp now, proc_id from, const wire::ping_req& m, outbox& out) {
  // Requests nobody answered (the target never did) are forgotten after the timeout.
  for (auto i = helping_.begin(); i != helping_.end();)
    if (now - i->second.since > s_.cfg.suspect_timeout)
      i = helping_.erase(i);
    else
      ++i;
  if (m.target == s_.self) {
    s_.send(out, from, wire::ping_ack{m.seq, m.target}); // asked about ourselves: alive
    return;
  }
  if (!s_.members.is_member(m.target))
    return; // we buried it, or never knew it: no evidence from us
  const auto seq = s_.next_seq++;
  helping_[seq] = {from, m.seq, m.target, now};
  s_.send(out, m.target, wire::ping{seq});
}

void suspicion::on(timestamp now, proc_id from, const wire::ping_ack& m, outbox&) {
  auto i = suspects_.find(m.target);
  if (i != suspects_.end() && i->second.seq == m.seq && from != m.target)
    clear(now, m.target);
}

bool suspicion::on(timestamp now, proc_id from, const wire::pong& m, outbox& out) {
  if (auto h = helping_.find(m.seq); h != helping_.end()) {
    if (h->second.target != from)
      return false;
    s_.send(out, h->second.asker, wire::ping_ack{h->second.asker_seq, from});
    helping_.erase(h);
    return true;
  }
  auto i = suspects_.find(from);
  if (i == suspects_.end() || i->second.seq != m.seq)
    return false;
  clear(now, from);
  return true;
}

void suspicion::clear(timestamp now, proc_id p) {
  suspects_.erase(p);
  s_.watch.heard_from(now, p); // the watch's silence is over too
}

void suspicion::on_timer(timestamp now, std::uint64_t seq, outbox& out) {
  auto i = std::find_if(suspects_.begin(), suspects_.end(),
                        [&](auto& e) { return e.second.seq == seq; });
  if (i == suspects_.end())
    return; // cleared, or the suspect left meanwhile
  const auto p = i->first;
  const auto inc = i->second.incarnation;
  suspects_.erase(i);
  // Still the incarnation we suspected (a newer one came back through a join: not it).
  if (auto* info = s_.members.info(p); info && info->incarnation == inc)
    s_.watch.declare_crashed(now, p, out);
}

void suspicion::forget(proc_id p) {
  suspects_.erase(p);
  for (auto i = helping_.begin(); i != helping_.end();)
    if (i->second.target == p || i->second.asker == p)
      i = helping_.erase(i);
    else
      ++i;
}

void suspicion::reset() {
  suspects_.clear();
  helping_.clear();
}

} // namespace banyan::sup
