#include "banyan/core/gather_then_broadcast.hpp"

namespace banyan {

reduce_abandoned gather_then_broadcast::abandon(timestamp now, std::uint64_t op) {
  auto r = up_.abandon(now, op, ro_);
  absorb(now);
  return r;
}

bool gather_then_broadcast::on_message(timestamp now, proc_id from, const wire::message& m) {
  bool taken = false;
  if (reduce_engine::handles(m))
    taken = up_.on_message(now, from, m, ro_);
  else if (broadcast_engine::handles(m))
    taken = down_.on_message(now, from, m, bo_);
  absorb(now);
  return taken;
}

void gather_then_broadcast::on_timer(timestamp now, std::uint64_t token) {
  if (token % 2 == 0)
    up_.on_timer(now, token / 2, ro_);
  else
    down_.on_timer(now, token / 2, bo_);
  absorb(now);
}

void gather_then_broadcast::on_undeliverable(timestamp now, proc_id to, const wire::message& m) {
  if (reduce_engine::handles(m))
    up_.on_undeliverable(now, to, m, ro_);
  else if (broadcast_engine::handles(m))
    down_.on_undeliverable(now, to, m, bo_);
  absorb(now);
}

void gather_then_broadcast::on_view_change(timestamp now, const view_change& change) {
  up_.on_view_change(now, ro_);
  if (!change.adopted.empty())
    up_.adopt(now, change.adopted, ro_);
  down_.on_view_change(now, bo_);
  absorb(now);
}

bool gather_then_broadcast::drained(timestamp now, const send_fates& fates) const {
  // The fates count every frame this engine sent, both halves together.
  return !holding() && fates.none_can_return(frames_sent(), last_send(), now);
}

} // namespace banyan
