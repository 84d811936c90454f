#include "banyan/core/supervisor.hpp"

#include "supervisor_parts.hpp"

namespace banyan {

using sup::parts;
using sup::timer_token;

namespace {

// --- one handler per message ---------------------------------------------------

void handle(parts& s, timestamp now, proc_id from, const wire::ping& m, outbox& out) {
  if (sup::delivery_lease::is_lease_seq(m.seq))
    s.lease.on_ping(now, from, m, out);
  else
    s.probes.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::pong& m, outbox& out) {
  if (sup::delivery_lease::is_lease_seq(m.seq))
    s.lease.on_pong(now, from, m);
  else if (!s.suspects.on(now, from, m, out) // an answer to a suspicion's or a helper's ping
      && !s.rtts.on(now, from, m, out)) // or to the RTT watch's
    s.probes.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::ping_req& m, outbox& out) {
  s.suspects.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::ping_ack& m, outbox& out) {
  s.suspects.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::merge_offer& m, outbox& out) {
  s.merges.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::bw_request& m, outbox& out) {
  s.probes.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::bw_reply& m, outbox& out) {
  s.probes.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::adopt_request& m, outbox& out) {
  s.parents.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::adopt_reply& m, outbox& out) {
  if (s.repairs.asked(m.seq, from))
    s.repairs.on_step_reply(now, m, out); // to a step-parent
  else
    s.probes.on_adopt_reply(now, from, m, out); // to a probe's candidate
}
void handle(parts& s, timestamp now, proc_id from, const wire::release& m, outbox& out) {
  s.parents.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::orphan& m, outbox& out) {
  s.repairs.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::tree_update& m, outbox& out) {
  s.parents.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::subtree_update& m, outbox& out) {
  s.parents.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::tree_summary& m, outbox& out) {
  s.parents.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::join_request& m, outbox& out) {
  s.life.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::join_accept& m, outbox& out) {
  s.life.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::member_joined& m, outbox& out) {
  s.members.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::member_left& m, outbox& out) {
  s.members.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::handover_request& m,
            outbox& out) {
  s.owners.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::vnode_handover& m, outbox& out) {
  s.life.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::vnode_handover_ack& m,
            outbox& out) {
  s.owners.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::routing_update& m, outbox& out) {
  s.owners.on(now, from, m, out);
}
void handle(parts& s, timestamp now, proc_id from, const wire::trees_open& m, outbox& out) {
  s.roots.on(now, from, m, out);
}
/// The collective engines' messages are not the supervisor's.
template <class Other>
void handle(parts&, timestamp, proc_id, const Other&, outbox&) {}

/// After leaving: a step-parent hint may still name us, so point the asker on.
void handle_after_leaving(parts& s, proc_id from, const wire::message& m, outbox& out) {
  if (auto* a = std::get_if<wire::adopt_request>(&m))
    s.repairs.refuse_adoption(from, *a, out);
  else if (auto* h = std::get_if<wire::vnode_handover>(&m))
    s.send(out, from, wire::vnode_handover_ack{h->route.epoch, false}); // cannot take them
  else if (auto* o = std::get_if<wire::orphan>(&m))
    s.repairs.on_after_leaving(from, *o);
}

/// While leaving: nobody should pick us as parent. Returns whether `m` was answered so.
bool refuse_while_leaving(parts& s, proc_id from, const wire::message& m, outbox& out) {
  if (auto* a = std::get_if<wire::adopt_request>(&m)) {
    s.repairs.refuse_adoption(from, *a, out);
    return true;
  }
  if (auto* b = std::get_if<wire::bw_request>(&m)) {
    wire::bw_reply empty;
    empty.seq = b->seq;
    empty.padding = static_cast<std::uint32_t>(wire::bw_probe_bytes - wire::wire_size(empty));
    s.send(out, from, std::move(empty));
    return true;
  }
  return false;
}

void dispatch(parts& s, timestamp now, proc_id from, const wire::message& m, outbox& out) {
  s.now = now;
  s.watch.heard_from(now, from); // anything at all shows the watched successor alive
  switch (s.status) {
    case supervisor::status::left: handle_after_leaving(s, from, m, out); return;
    case supervisor::status::idle: return;
    case supervisor::status::leaving:
      if (refuse_while_leaving(s, from, m, out)) {
        s.updates.flush(out);
        return;
      }
      break;
    default: break;
  }
  if (s.merges.from_old_side(from, m))
    return; // the side we yielded from: its news is not ours
  if (s.merges.from_buried(from, m)) {
    // The other side of a partition: the merge decides. Its own notice of a graceful
    // leave, after a crash notice about it, still tells that it was not a crash.
    if (auto* l = std::get_if<wire::member_left>(&m); l && l->who == from && !l->crashed)
      s.members.left_gracefully(from, l->incarnation);
    return;
  }
  std::visit([&](const auto& msg) { handle(s, now, from, msg, out); }, m);
  s.updates.flush(out);
}

void fire(parts& s, timestamp now, timer_token t, outbox& out) {
  using kind = timer_token::kind;
  switch (t.what) {
    case kind::join_attempt: s.life.on_join_timer(now, t.seq, out); return;
    case kind::giver_wait: s.life.on_giver_timer(now, out); return;
    case kind::flush: s.updates.on_timer(out); return;
    case kind::summary: s.updates.on_summary_timer(out); return;
    case kind::watch: s.watch.on_timer(now, t.seq, out); return;
    case kind::suspect:
      s.suspects.on_timer(now, t.seq, out);
      s.updates.flush(out);
      return;
    case kind::adopt: return; // the orphans are looked at after every event
    case kind::lend: s.owners.on_lend_timer(t.seq, out); return;
    case kind::seed: s.seeding.on_seed_timer(now, static_cast<proc_id>(t.seq), out); return;
    case kind::offer_due: s.owners.on_offer_timer(now, t.seq, out); return;
    case kind::reply_due:
      if (s.repairs.asked(t.seq))
        s.repairs.on_reply_timer(now, t.seq, out); // a step-parent did not answer
      else
        s.probes.on_reply_timer(now, t.seq, out);
      return;
    case kind::probe_start: s.probes.on_start_timer(now, t.seq, out); return;
    case kind::background:
      s.background.on_timer(now, t.seq, out);
      s.updates.flush(out);
      return;
    case kind::rtt_watch:
      s.rtts.on_timer(now, t.seq, out);
      s.updates.flush(out);
      return;
    case kind::retire:
      s.roots.on_retire_timer(now, t.seq, out);
      s.updates.flush(out);
      return;
    case kind::lease: s.lease.on_timer(now, t.seq, out); return;
  }
}

} // namespace

supervisor::supervisor(proc_id self, supervisor_config cfg, std::uint64_t seed,
                       supervisor_test_hooks hooks)
  : p_(std::make_unique<parts>(self, cfg, hooks, seed)) {}

supervisor::~supervisor() = default;
supervisor::supervisor(supervisor&&) noexcept = default;
supervisor& supervisor::operator=(supervisor&&) noexcept = default;

void supervisor::set_address(std::string address) { p_->members.me().address = std::move(address); }

// --- API: every entry point ends by looking at the orphans and reporting busy/idle --

namespace {
void after_event(parts& s, timestamp now, outbox& out) {
  s.watch.adopt_orphans(now, out);
  s.lease.arm(now, out);
  s.background.arm(out);
  s.rtts.arm(out);
  if (s.busy() == s.reported_busy)
    return;
  s.reported_busy = !s.reported_busy;
  s.event(out, s.reported_busy ? tree_event::kind::busy : tree_event::kind::idle, now);
}
} // namespace

void supervisor::found(timestamp now, const std::vector<wire::member>& members,
                       const routing_table& routes, outbox& out) {
  p_->life.found(now, members, routes, out);
  after_event(*p_, now, out);
}

void supervisor::join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out) {
  p_->life.join(now, contact, wanted, out);
  after_event(*p_, now, out);
}

void supervisor::abandon_join(timestamp now, outbox& out) {
  p_->life.abandon_join();
  after_event(*p_, now, out);
}

std::optional<error> supervisor::leave(timestamp now, proc_id recipient, outbox& out) {
  auto result = p_->life.leave(now, recipient, out);
  after_event(*p_, now, out);
  return result;
}

void supervisor::recall_paths(const supervisor& earlier) {
  if (earlier.self() == self())
    p_->paths.recall(earlier.p_->paths);
}

void supervisor::on_message(timestamp now, proc_id from, const wire::message& m, outbox& out) {
  dispatch(*p_, now, from, m, out);
  after_event(*p_, now, out);
}

void supervisor::on_timer(timestamp now, std::uint64_t token, outbox& out) {
  if (auto t = timer_token::decode(token))
    fire(*p_, now, *t, out);
  after_event(*p_, now, out);
}

void supervisor::on_unreachable(timestamp now, proc_id p, outbox& out) {
  auto& s = *p_;
  // A helper's ping that failed is the asker's evidence, not ours; a suspect's is counted.
  if ((s.status == status::member || s.status == status::leaving) && s.members.is_member(p)
      && !s.suspects.unreachable(now, p, out)) {
    s.suspects.suspect(now, p, out);
    s.updates.flush(out);
  }
  after_event(s, now, out);
}

void supervisor::prepare(timestamp now, outbox& out) {
  p_->now = now;
  p_->roots.prepare(now, out);
  p_->updates.flush(out);
  after_event(*p_, now, out);
}

proc_id supervisor::adopter_of(proc_id dead) const { return p_->members.adopter_of(dead); }
void supervisor::heard_from(timestamp now, proc_id p) { p_->watch.heard_from(now, p); }

bool supervisor::may_deliver(timestamp now) const { return p_->lease.may_deliver(now); }
timestamp supervisor::lease_until() const { return p_->lease.valid_until(); }
std::uint64_t supervisor::lease_pings() const noexcept { return p_->lease.pings(); }
int supervisor::local_health() const noexcept { return p_->health.score(); }

void supervisor::stream_sample(timestamp now, proc_id p, tree_key k, std::size_t bytes,
                               outbox& out) {
  auto& s = *p_;
  if (s.cfg.background_period.count() <= 0 || s.status != status::member)
    return;
  s.now = now;
  s.drift.on_stream(now, p, k, bytes, out);
  s.updates.flush(out);
  after_event(s, now, out);
}

// --- inspection ------------------------------------------------------------------

proc_id supervisor::self() const noexcept { return p_->self; }
supervisor::status supervisor::state() const noexcept { return p_->status; }
const tree_state* supervisor::tree(tree_key k) const { return p_->trees.find(k); }
proc_id supervisor::parent(tree_key k) const {
  auto t = tree(k);
  return t ? t->parent() : no_proc;
}
bool supervisor::all_parented() const { return p_->trees.all_parented(); }
std::vector<proc_id> supervisor::open_roots() const { return p_->roots.open_roots(); }
bool supervisor::measuring() const noexcept { return p_->probes.measuring(); }
bool supervisor::busy() const noexcept { return p_->busy(); }
const vnode_set& supervisor::own_vnodes() const noexcept { return p_->owners.own(); }
bool supervisor::awaiting_vnodes() const noexcept {
  return p_->status == status::member && p_->life.awaiting_givers();
}
const routing_table& supervisor::routes() const noexcept { return p_->owners.routes(); }
const std::vector<wire::route_entry>& supervisor::farewell_routes() const noexcept {
  return p_->owners.farewell();
}
const std::vector<proc_id>& supervisor::members() const noexcept { return p_->members.list(); }
std::uint64_t supervisor::members_version() const noexcept { return p_->members.version(); }
bool supervisor::is_member(proc_id p) const { return p_->members.is_member(p); }
bool supervisor::buried(proc_id p) const { return p_->members.buried(p); }
std::optional<wire::member> supervisor::member_info(proc_id p) const { return p_->members.info(p); }
std::uint64_t supervisor::probes_completed() const noexcept { return p_->probes.completed(); }
std::uint64_t supervisor::probes_abandoned() const noexcept { return p_->probes.abandoned(); }
std::uint64_t supervisor::hinted_adoptions() const noexcept {
  return p_->repairs.hinted_adoptions();
}
std::uint64_t supervisor::held_moves() const noexcept { return p_->parents.held_moves(); }
std::uint64_t supervisor::background_probes() const noexcept { return p_->background.probes(); }
std::uint64_t supervisor::drifts() const noexcept { return p_->drift.drifts(); }
proc_id supervisor::step_parent(tree_key k) const { return p_->repairs.step_parent(k); }
std::optional<duration> supervisor::measured_rtt(proc_id p) const {
  return p_->paths.measured_rtt(p);
}
std::optional<rate> supervisor::measured_bw(proc_id p) const { return p_->paths.measured_bw(p); }
bool supervisor::is_local(proc_id p) const { return p_->paths.is_local(p); }
std::optional<duration> supervisor::smallest_remote_rtt() const {
  return p_->paths.smallest_remote_rtt();
}

std::string supervisor::describe() const {
  static const char* statuses[] = {"idle", "joining", "member", "leaving", "left"};
  auto& s = *p_;
  std::string r = "proc " + std::to_string(s.self) + " " + statuses[static_cast<int>(s.status)] +
                  ", " + std::to_string(s.members.size()) + " members";
  r += s.probes.describe();
  if (!all_parented())
    r += ", some tree without parent";
  if (s.updates.pending())
    r += ", updates pending";
  return r;
}

} // namespace banyan
