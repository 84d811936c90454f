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
  auto& e = suspects_[p];
  e = {};
  e.seq = seq;
  e.incarnation = s_.members.info(p)->incarnation;
  e.since = now;
  report(now, tree_event::kind::suspected, p, out);
  start_round(now, p, e, out);
}

void suspicion::start_round(timestamp now, proc_id p, suspect_entry& e, outbox& out) {
  e.round = now;
  e.heard = timestamp::max();
  s_.send(out, p, wire::ping{e.seq}); // the connection may work again
  // k helpers drawn among the other members not suspected themselves.
  std::vector<proc_id> helpers;
  for (auto m : s_.members.list())
    if (m != s_.self && m != p && suspects_.count(m) == 0)
      helpers.push_back(m);
  const auto k = static_cast<std::size_t>(std::max(0, s_.cfg.indirect_probes));
  // Health pings older than the longest round are answered by now or never.
  const auto keep = s_.cfg.suspect_timeout * (2 * (local_health::max_score + 1));
  for (auto i = health_pings_.begin(); i != health_pings_.end();)
    i = now - i->second.sent > keep ? health_pings_.erase(i) : std::next(i);
  e.helped = false;
  for (std::size_t i = 0; i < helpers.size() && i < k; ++i) {
    auto j = std::uniform_int_distribution<std::size_t>(i, helpers.size() - 1)(s_.rng);
    std::swap(helpers[i], helpers[j]);
    e.asked.insert(helpers[i]);
    e.helped = true;
    s_.send(out, helpers[i], wire::ping_req{e.seq, p});
    const auto h = s_.next_seq++;
    health_pings_[h] = {helpers[i], p, now};
    s_.send(out, helpers[i], wire::ping{h}); // are we heard at all?
  }
  // Fewer helpers than k, because we suspect the others too: ping those (not asked to
  // help) to learn whether anyone hears us; a processor that hears nobody suspects
  // everyone in turn, and must not lose its evidence for want of helpers.
  std::size_t asked_now = std::min(helpers.size(), k);
  for (auto m : s_.members.list()) {
    if (asked_now >= k)
      break;
    if (m == s_.self || m == p || suspects_.count(m) == 0)
      continue;
    const auto h = s_.next_seq++;
    health_pings_[h] = {m, p, now};
    s_.send(out, m, wire::ping{h});
    e.helped = true;
    ++asked_now;
  }
  const auto timeout = s_.cfg.suspect_timeout * s_.health.multiplier();
  e.due = now + timeout;
  s_.start_timer(out, timeout, timer_token::suspect(e.seq));
}

void suspicion::heard(timestamp now, timestamp sent, suspect_entry& e) {
  if (sent >= e.round && e.heard == timestamp::max())
    e.heard = now;
}

bool suspicion::unreachable(timestamp now, proc_id p, outbox& out) {
  for (auto& [q, e] : suspects_)
    heard(now, now, e); // a refused connection: the network answered us
  bool helping = false;
  for (auto i = helping_.begin(); i != helping_.end();)
    if (i->second.target == p) {
      helping = true;
      s_.send(out, i->second.asker, wire::ping_ack{i->second.asker_seq, p, false});
      i = helping_.erase(i);
    } else {
      ++i;
    }
  auto i = suspects_.find(p);
  if (i == suspects_.end())
    return helping;
  i->second.direct_failed = true;
  if (hopeless(i->second))
    declare(now, p, out);
  return true;
}

bool suspicion::hopeless(const suspect_entry& e) const {
  // Without helpers nobody corroborates our failure: the timeout decides.
  return e.direct_failed && !e.asked.empty() && e.unreached == e.asked;
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
  if (!s_.members.is_member(m.target)) {
    s_.send(out, from, wire::ping_ack{m.seq, m.target, false}); // we buried it, or never knew it
    return;
  }
  const auto seq = s_.next_seq++;
  helping_[seq] = {from, m.seq, m.target, now};
  s_.send(out, m.target, wire::ping{seq});
}

void suspicion::on(timestamp now, proc_id from, const wire::ping_ack& m, outbox& out) {
  auto i = suspects_.find(m.target);
  if (i == suspects_.end() || i->second.seq != m.seq || from == m.target)
    return;
  s_.health.answered(now); // the helper heard us
  heard(now, i->second.since, i->second); // (asked in some round: the first one's is sure)
  if (m.reached) {
    clear(now, m.target, out);
    return;
  }
  if (i->second.asked.count(from) != 0)
    i->second.unreached.insert(from);
  if (hopeless(i->second))
    declare(now, m.target, out);
}

bool suspicion::on(timestamp now, proc_id from, const wire::pong& m, outbox& out) {
  if (auto h = health_pings_.find(m.seq); h != health_pings_.end()) {
    if (h->second.to != from)
      return false;
    s_.health.answered(now);
    const auto about = h->second.about;
    const auto sent = h->second.sent;
    health_pings_.erase(h);
    // Evidence for the round of `about` that sent it: this helper had our ping_req
    // about it first (the same connection, in order). Another suspicion's helper
    // proves nothing of the connections this round used.
    if (auto i = suspects_.find(about); i != suspects_.end())
      heard(now, sent, i->second);
    // Sent while we suspected the one answering: that suspicion is over too.
    if (auto i = suspects_.find(from); i != suspects_.end() && sent >= i->second.since)
      clear(now, from, out);
    return true;
  }
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
  clear(now, from, out);
  return true;
}

void suspicion::clear(timestamp now, proc_id p, outbox& out) {
  suspects_.erase(p);
  s_.watch.heard_from(now, p); // the watch's silence is over too
  report(now, tree_event::kind::suspicion_cleared, p, out);
}

void suspicion::report(timestamp now, tree_event::kind what, proc_id p, outbox& out) const {
  tree_event e;
  e.what = what;
  e.at = now;
  e.peer = p;
  out.events.push_back(std::move(e));
}

void suspicion::on_timer(timestamp now, std::uint64_t seq, outbox& out) {
  auto i = std::find_if(suspects_.begin(), suspects_.end(),
                        [&](auto& e) { return e.second.seq == seq; });
  if (i == suspects_.end())
    return; // cleared, or the suspect left meanwhile
  auto& e = i->second;
  // Fired late: we did not run, and the silence was ours. Or nobody answered the
  // round's pings: we may be the one cut off (local_health.hpp). Another round, longer.
  const auto half = s_.cfg.suspect_timeout / 2;
  const bool late = now - e.due > half;
  const bool unheard = e.helped && e.heard == timestamp::max();
  if (late || unheard) {
    s_.health.worsen();
    start_round(now, i->first, e, out);
    return;
  }
  // Heard only in the round's last half timeout: the helpers that answered got our ping_req
  // just before (the same connection, in order) and may not have had the suspect's
  // answer yet (a backlog of ours draining). Another round, no longer.
  if (e.helped && e.heard > e.due - half) {
    start_round(now, i->first, e, out);
    return;
  }
  declare(now, i->first, out);
}

void suspicion::declare(timestamp now, proc_id p, outbox& out) {
  auto i = suspects_.find(p);
  const auto inc = i->second.incarnation;
  suspects_.erase(i);
  // Still the incarnation we suspected (a newer one came back through a join: not it).
  if (auto info = s_.members.info(p); info && info->incarnation == inc)
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
  health_pings_.clear();
}

} // namespace banyan::sup
