#include "banyan/core/allreduce.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace banyan {

namespace {

reduce_config reduce_part(const allreduce_config& c) {
  auto r = c.reduce;
  r.kind = c.kind;
  r.first_op = c.first_op;
  return r;
}

constexpr std::size_t header_bytes = 8;

broadcast_config release_part(const allreduce_config& c) {
  auto b = c.bcast;
  b.kind = c.kind;
  b.message_kind = collective_kind::none;
  // The release of a result small enough for the reduction's star goes the star's way
  // back: from the root's owner straight to its LAN (broadcast_config::shallow_bytes).
  b.shallow_bytes = c.reduce.star_bytes == 0 ? 0 : c.reduce.star_bytes + header_bytes;
  b.shallow_max_procs = c.reduce.star_max_procs;
  return b;
}

} // namespace

allreduce_collective::allreduce_collective(tree_view& view, const reduce_op_table& ops,
                                           allreduce_config cfg, vnode_set settled)
  : kind_(cfg.kind), red_(view, ops, reduce_part(cfg), std::move(settled)),
    bcast_(view, release_part(cfg)) {}

shared_bytes allreduce_collective::release_payload(std::uint64_t op, const shared_bytes& value) {
  std::vector<std::uint8_t> b(header_bytes + value.size());
  for (std::size_t i = 0; i < header_bytes; ++i)
    b[i] = static_cast<std::uint8_t>(op >> (8 * i));
  if (value.size() != 0)
    std::memcpy(b.data() + header_bytes, value.data(), value.size());
  return shared_bytes(std::move(b));
}

std::optional<std::pair<std::uint64_t, shared_bytes>> allreduce_collective::parse_release(
  const shared_bytes& payload) {
  if (payload.size() < header_bytes)
    return std::nullopt;
  std::uint64_t op = 0;
  for (std::size_t i = 0; i < header_bytes; ++i)
    op |= std::uint64_t{payload.data()[i]} << (8 * i);
  return std::make_pair(op, payload.slice(header_bytes, payload.size() - header_bytes));
}

std::optional<error> allreduce_collective::start(timestamp now, const allreduce_spec& spec,
                                                 contribution_fn values) {
  if (!values) {
    if (spec.count != 0)
      return make_error(errc::invalid_argument, std::string(to_string(kind_)) + " " +
                                                  std::to_string(spec.op) + ": no values function");
    values = [](vnode_id) { return std::vector<std::uint8_t>{}; };
  }
  reduce_spec rs{spec.op, spec.root, spec.fn, spec.count, spec.whole_bytes, spec.after};
  auto err = red_.start(now, rs, std::move(values), ro_);
  harvest(now); // hands out what was kept for this allreduce (now below next_op)
  return err;
}

reduce_abandoned allreduce_collective::abandon(timestamp now, std::uint64_t op) {
  auto r = red_.abandon(now, op, ro_);
  harvest(now);
  return r;
}

bool allreduce_collective::on_message(timestamp now, proc_id from, const wire::message& m) {
  bool taken = false;
  if (reduce_engine::handles(m))
    taken = red_.on_message(now, from, m, ro_);
  else if (broadcast_engine::handles(m))
    taken = bcast_.on_message(now, from, m, bo_);
  harvest(now);
  return taken;
}

void allreduce_collective::on_timer(timestamp now, std::uint64_t token) {
  if (token % 2 == 1)
    red_.on_timer(now, token / 2, ro_);
  else
    bcast_.on_timer(now, token / 2, bo_);
  harvest(now);
}

void allreduce_collective::on_undeliverable(timestamp now, proc_id to, const wire::message& m) {
  if (reduce_engine::handles(m))
    red_.on_undeliverable(now, to, m, ro_);
  else if (broadcast_engine::handles(m))
    bcast_.on_undeliverable(now, to, m, bo_);
  harvest(now);
}

void allreduce_collective::on_view_change(timestamp now, const view_change& change) {
  bcast_.on_view_change(now, bo_);
  red_.on_view_change(now, ro_);
  if (!change.adopted.empty())
    red_.adopt(now, change.adopted, ro_);
  harvest(now);
}

bool allreduce_collective::drained(timestamp now, const send_fates& fates) const {
  // The fates count every frame this engine sent (`frames_sent`, both inner engines').
  return !holding() && fates.none_can_return(frames_sent(), last_send(), now);
}

void allreduce_collective::harvest(timestamp now) {
  for (auto& e : ro_.sends)
    out_.sends.push_back(std::move(e));
  for (auto& t : ro_.timers)
    out_.timers.push_back({t.after, t.token * 2 + 1});
  for (auto& p : ro_.problems)
    out_.problems.push_back(std::move(p));
  // A complete reduction is released from here: its result broadcast to every vnode.
  for (auto& r : ro_.results) {
    auto id = bcast_.broadcast(now, release_payload(r.op, r.value), bo_);
    if (!id)
      out_.problems.push_back({reduce_problem::kind::bad_data, r.op, r.vnodes,
                               "the release could not start: " + id.err().to_string()});
    out_.reduced.push_back(std::move(r));
  }
  ro_.clear();
  for (auto& e : bo_.sends)
    out_.sends.push_back(std::move(e));
  for (auto& t : bo_.timers)
    out_.timers.push_back({t.after, t.token * 2});
  for (auto& d : bo_.deliveries) {
    auto rel = parse_release(d.payload);
    if (!rel) {
      out_.problems.push_back({reduce_problem::kind::bad_data, 0, d.vnodes,
                               "a release of " + std::to_string(d.payload.size()) +
                                 " bytes has no header"});
      continue;
    }
    allreduce_delivery ad{rel->first, std::move(d.vnodes), std::move(rel->second)};
    early_[ad.op].push_back(std::move(ad));
  }
  bo_.clear();
  // Deliveries are handed out once this processor has started their allreduce, or will
  // not start it (it is below `next_op`: a vnode that reached a joiner with its history
  // counted in it); the others wait for their start here.
  const auto next = red_.next_op();
  for (auto i = early_.begin(); i != early_.end() && i->first < next; i = early_.erase(i))
    for (auto& d : i->second)
      out_.deliveries.push_back(std::move(d));
}

std::string allreduce_collective::describe() const {
  std::string r = std::string(to_string(kind_)) + ": reduction\n" + red_.describe() +
                  "release\n" + bcast_.describe();
  for (auto& [op, ds] : early_) {
    vnode_set vs;
    for (auto& d : ds)
      vs |= d.vnodes;
    r += "kept for " + std::to_string(op) + " (not started here): " + vs.to_string() + "\n";
  }
  return r;
}

} // namespace banyan
