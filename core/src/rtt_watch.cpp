#include "rtt_watch.hpp"

#include <cmath>
#include <random>
#include <set>

#include "supervisor_parts.hpp"

namespace banyan::sup {

namespace {
/// High samples in a row, each within steady_share of the first, that make a drift.
constexpr int confirmations = 3;
constexpr double steady_share = 0.1;
} // namespace

void rtt_watch::arm(outbox& out) {
  if (armed_ || s_.cfg.background_period.count() <= 0 || s_.cfg.rtt_watch_period.count() <= 0
      || s_.status != supervisor::status::member)
    return;
  armed_ = true;
  const auto period = s_.cfg.rtt_watch_period.count();
  const auto jitter =
      std::uniform_int_distribution<duration::rep>(-period / 4, period / 4)(s_.rng);
  s_.start_timer(out, duration{period + jitter}, timer_token::rtt_watch(++gen_));
}

void rtt_watch::ping(timestamp now, proc_id p, outbox& out) {
  const auto seq = s_.next_seq++;
  pending_[seq] = {p, now};
  ++pings_;
  s_.send(out, p, wire::ping{seq});
}

void rtt_watch::on_timer(timestamp now, std::uint64_t gen, outbox& out) {
  if (gen != gen_)
    return; // armed before a reset
  armed_ = false;
  if (s_.status != supervisor::status::member)
    return;
  s_.drift.resume(now, out);
  std::set<proc_id> busy;
  for (auto i = pending_.begin(); i != pending_.end();) {
    if (now - i->second.sent > s_.cfg.probe_timeout) {
      i = pending_.erase(i); // unanswered: no strike (it may be lost, or the peer gone)
    } else {
      busy.insert(i->second.to);
      ++i;
    }
  }
  std::set<proc_id> parents;
  for (auto& t : s_.trees.all())
    if (t && t->parent() != no_proc && s_.members.is_member(t->parent())
        && !s_.paths.is_local(t->parent()))
      parents.insert(t->parent());
  for (auto p : parents)
    if (!busy.count(p))
      ping(now, p, out);
}

bool rtt_watch::on(timestamp now, proc_id from, const wire::pong& m, outbox& out) {
  auto i = pending_.find(m.seq);
  if (i == pending_.end() || i->second.to != from)
    return false;
  const auto rtt = now - i->second.sent;
  pending_.erase(i);
  if (!s_.drift.rtt_trusted(now, from))
    return true;
  bool far = false;
  for (auto& t : s_.trees.all())
    if (t && t->parent() == from) {
      const auto limit = (1 + s_.cfg.drift) * static_cast<double>(t->rtt_parent().count())
                         + static_cast<double>(s_.cfg.lan_margin.count());
      if (static_cast<double>(rtt.count()) > limit)
        far = true;
    }
  if (!far) {
    strikes_.erase(from);
    return true;
  }
  // Confirmed by the next ticks' samples, each within `steady_share` of the first high
  // one: a link whose RTT grew gives the same figure again, a pong that waited behind a
  // burst on the pair (probes' 128 KiB replies on a narrow link) a varying one.
  auto& st = strikes_[from];
  if (st.count > 0 && std::abs(static_cast<double>((rtt - st.first).count()))
                        <= steady_share * static_cast<double>(st.first.count())) {
    ++st.count;
  } else {
    st = {1, rtt};
  }
  if (st.count < confirmations)
    return true;
  strikes_.erase(from);
  s_.drift.rtt_drifted(now, from, rtt, out);
  return true;
}

void rtt_watch::forget(proc_id p) {
  strikes_.erase(p);
  for (auto i = pending_.begin(); i != pending_.end();)
    i = i->second.to == p ? pending_.erase(i) : std::next(i);
}

void rtt_watch::reset() {
  ++gen_;
  armed_ = false;
  pending_.clear();
  strikes_.clear();
}

} // namespace banyan::sup
