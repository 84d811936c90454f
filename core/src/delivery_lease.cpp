#include "delivery_lease.hpp"

#include "supervisor_parts.hpp"

namespace banyan::sup {

bool delivery_lease::on() const { return s_.cfg.lease.count() > 0; }

proc_id delivery_lease::successor() const { return s_.members.adopter_of(s_.self); }

namespace {
// A leaver owns its vnodes until its handover lands: it keeps its lease meanwhile.
bool owning(supervisor::status s) {
  return s == supervisor::status::member || s == supervisor::status::leaving;
}
} // namespace

void delivery_lease::arm(timestamp now, outbox& out) {
  if (!on() || !owning(s_.status))
    return;
  if (!ticking_) {
    ticking_ = true;
    s_.start_timer(out, s_.cfg.lease / 4, timer_token::lease(++gen_));
    renew(now, out);
  } else if (successor() != asking_) {
    renew(now, out); // a new successor: its grant is the one that counts from now on
  }
}

void delivery_lease::on_timer(timestamp now, std::uint64_t gen, outbox& out) {
  if (gen != gen_)
    return;
  ticking_ = false;
  arm(now, out);
}

void delivery_lease::renew(timestamp now, outbox& out) {
  const auto succ = successor();
  asking_ = succ;
  if (succ == s_.self || succ == no_proc)
    return;
  // Asked more than a lease ago: an answer could not extend the lease past now.
  while (!asked_.empty() && now - asked_.begin()->second.second > s_.cfg.lease)
    asked_.erase(asked_.begin());
  const auto seq = ++next_;
  asked_[seq] = {succ, now};
  ++pings_;
  s_.send(out, succ, wire::ping{lease_bit | seq});
}

void delivery_lease::on_ping(timestamp now, proc_id from, const wire::ping& m, outbox& out) {
  // A processor we hold for departed (or never knew) gets no lease: we may claim its
  // vnodes. Our own claims wait for the leases we granted.
  if (!owning(s_.status) || from == s_.self || !s_.members.is_member(from))
    return;
  granted_[from] = now;
  s_.send(out, from, wire::pong{m.seq});
}

void delivery_lease::on_pong(timestamp now, proc_id from, const wire::pong& m) {
  const auto seq = m.seq & ~lease_bit;
  auto i = asked_.find(seq);
  if (i == asked_.end() || i->second.first != from)
    return;
  const auto sent = i->second.second;
  asked_.erase(asked_.begin(), std::next(i));
  s_.health.answered(now); // we are heard (local_health.hpp)
  if (from != successor())
    return; // granted by a member that is no longer the one that would adopt our vnodes
  const auto until = sent + s_.cfg.lease - s_.cfg.lease / 8;
  if (grantor_ != from) {
    grantor_ = from;
    until_ = until;
  } else {
    until_ = std::max(until_, until);
  }
}

bool delivery_lease::may_deliver(timestamp now) const {
  if (!on() || !owning(s_.status))
    return true;
  const auto succ = successor();
  if (succ == s_.self || succ == no_proc)
    return true; // alone: nobody to adopt our vnodes
  return grantor_ == succ && now < until_;
}

timestamp delivery_lease::valid_until() const {
  return grantor_ == successor() ? until_ : timestamp::min();
}

timestamp delivery_lease::claim_after(proc_id p) const {
  auto i = granted_.find(p);
  return i == granted_.end() ? timestamp::min() : i->second + s_.cfg.lease;
}

void delivery_lease::end_life() {
  asked_.clear();
  asking_ = no_proc;
  grantor_ = no_proc;
  until_ = timestamp::min();
  ++gen_;
  ticking_ = false;
}

} // namespace banyan::sup
