#include "banyan/core/reduce.hpp"

#include "banyan/core/tree_choice.hpp"
#include "banyan/core/vnode_blocks.hpp"

namespace banyan {

namespace {

reduce_problem problem(reduce_problem::kind what, std::uint64_t op, vnode_set vs,
                       std::string detail) {
  return reduce_problem{what, op, std::move(vs), std::move(detail)};
}

} // namespace

reduce_engine::reduce_engine(tree_view& view, const reduce_op_table& ops, reduce_config cfg,
                             vnode_set settled)
  : view_(view), ops_table_(ops), cfg_(cfg) {
  if (!settled.empty())
    done_[cfg_.first_op - 1] = std::move(settled);
}

vnode_set reduce_engine::settled() const {
  vnode_set all;
  for (auto& [d, vs] : done_)
    all |= vs;
  return all;
}

bool reduce_engine::unusable(timestamp now, proc_id p) const {
  auto i = unreachable_.find(p);
  return i != unreachable_.end() && now < i->second;
}

tree_kind reduce_engine::kind_of(const reduce_spec& spec) const {
  const auto bytes = spec.whole_bytes ? spec.whole_bytes : spec.count * element_size(spec.fn.type);
  // The threshold, not the model (core/tree_choice.hpp): every contributor picks the
  // tree on its own when it starts, from what all agree on (the spec), and partials go
  // up at once; processors' figures differ, so the model could split them.
  return threshold_tree(bytes, cfg_.long_threshold);
}

bool reduce_engine::is_root_owner(const op_state& st) const {
  return view_.participating() && view_.own_vnodes().contains(st.spec.root);
}

bool reduce_engine::is_child(const op_state& st, proc_id p) const {
  const auto owner = view_.owner(st.spec.root);
  if (owner == no_proc)
    return false;
  for (auto& c : children_of(st, owner))
    if (c.id == p)
      return true;
  return false;
}

std::uint64_t reduce_engine::timer(reduce_outbox& out, duration after, timer_entry e) {
  const auto token = next_token_++;
  timers_[token] = e;
  out.timers.push_back({after, token});
  return token;
}

void reduce_engine::send(timestamp now, proc_id to, wire::message m, reduce_outbox& out) {
  wire::set_kind(m, cfg_.kind);
  out.sends.push_back({view_.self(), to, std::move(m)});
  ++frames_sent_;
  last_send_ = now;
}

void reduce_engine::hold(wire::message m, reduce_outbox& out) {
  ++stats_.holds;
  held_[timer(out, cfg_.retry_delay, {timer_kind::retry, 0})] = std::move(m);
}

void reduce_engine::linger(op_state& st, reduce_outbox& out) {
  timer(out, cfg_.op_linger, {timer_kind::linger, st.spec.op});
}

// --- the application ------------------------------------------------------------------

std::optional<error> reduce_engine::start(timestamp now, const reduce_spec& spec,
                                          contribution_fn values, reduce_outbox& out) {
  sync(now, out);
  if (!view_.participating())
    return make_error(errc::stopped, "processor " + std::to_string(view_.self()) +
                                       " no longer takes part and cannot reduce");
  if (spec.op <= last_started_)
    return make_error(errc::invalid_argument,
                      "reduction " + std::to_string(spec.op) + " started after reduction " +
                        std::to_string(last_started_) + ": they start in increasing order");
  if (const auto all = view_.all_vnodes(); !all.contains(spec.root))
    return make_error(errc::invalid_argument,
                      "reduction " + std::to_string(spec.op) + ": root vnode " +
                        std::to_string(spec.root) + " does not exist (vnodes are " +
                        all.to_string() + ")");
  if (cfg_.blocks && spec.count == 0)
    return make_error(errc::invalid_argument,
                      "gather " + std::to_string(spec.op) + ": blocks of 0 bytes");
  if (auto e = cfg_.blocks ? std::nullopt
                           : ops_table_.check(spec.fn, spec.count * element_size(spec.fn.type)))
    return e;
  if (auto i = ops_.find(spec.op);
      i != ops_.end() && (i->second.spec.root != spec.root ||
                          (i->second.spec.fn != spec.fn && !i->second.opened_done)))
    return make_error(errc::invalid_argument,
                      "reduction " + std::to_string(spec.op) +
                        " reached this processor with another root or operator");
  // The own vnodes settled here that owe this reduction. They owe nothing before it
  // that this processor started: settling and starting both contribute at once.
  vnode_set owing;
  for (auto d = done_.begin(); d != done_.end() && d->first < spec.op; ++d)
    owing |= d->second;
  // Their contributions, checked before anything changes: a wrong one refuses the start
  // and leaves the engine as it was (the application may start the same number again).
  auto contribution = gather(spec, values, owing);
  if (!contribution)
    return contribution.err();
  // Reductions before this one that reached this processor but were never started here
  // (the application skipped them): what children sent up for them goes on now.
  for (auto i = ops_.begin(); i != ops_.end() && i->first < spec.op;) {
    auto& [k, early] = *i++;
    if (early.started || early.main_sent || early.complete)
      continue;
    if (is_root_owner(early))
      forget_op(k, out); // the root's own vnodes skipped it: it can never complete here
    else
      maybe_send_main(now, early, true, out);
  }
  op_state& st = ops_[spec.op];
  st.spec = spec;
  st.kind = kind_of(spec);
  st.star = star_rule(spec, st.kind);
  st.started = true;
  st.values = std::move(values);
  const auto previous = last_started_;
  last_started_ = spec.op;
  ++stats_.started;
  for (auto d = done_.begin(); d != done_.end() && d->first < spec.op;) {
    if (operation_of(std::max(d->first, previous)) + 1 < operation_of(spec.op))
      out.problems.push_back(problem(reduce_problem::kind::lost_contribution, spec.op - 1,
                                     d->second, "reductions skipped by this processor"));
    d = done_.erase(d);
  }
  if (!owing.empty())
    done_[spec.op] |= owing;
  stats_.contributed += owing.size();
  if (!owing.empty())
    take_in(now, st, owing, shared_bytes(std::move(*contribution)), true, false, 0, out);
  auto expect = view_.max_root_distance();
  const auto slowest = view_.min_root_rate();
  auto bytes = static_cast<double>(spec.count * element_size(spec.fn.type));
  if (cfg_.blocks) // what goes up grows to every vnode's block
    bytes = static_cast<double>(spec.whole_bytes ? spec.whole_bytes
                                                 : spec.count * view_.all_vnodes().size());
  if (slowest > 0 && slowest != infinite_rate)
    expect += duration{static_cast<duration::rep>(bytes / slowest * 1e9)};
  const auto wait = cfg_.min_timeout +
                    std::chrono::duration_cast<duration>(expect * cfg_.timeout_factor);
  st.wait = wait;
  st.timeout_token = timer(out, wait, {timer_kind::timeout, spec.op});
  if (is_root_owner(st) && !st.owners_noted)
    ask_new_owners(now, st, out); // notes who owns what is missing
  maybe_send_main(now, st, false, out);
  return std::nullopt;
}

expected<std::vector<std::uint8_t>> reduce_engine::gather(const reduce_spec& spec,
                                                          const contribution_fn& values,
                                                          const vnode_set& vs) const {
  const std::size_t bytes = spec.count * element_size(spec.fn.type);
  std::vector<std::uint8_t> acc;
  std::optional<error> bad;
  bool first = true;
  vs.for_each([&](vnode_id v) {
    if (bad)
      return;
    auto d = values ? values(v) : std::vector<std::uint8_t>{};
    if (d.size() != bytes)
      bad = make_error(errc::invalid_argument,
                       "reduction " + std::to_string(spec.op) + ": the contribution of vnode " +
                         std::to_string(v) + " is " + std::to_string(d.size()) + " bytes, not " +
                         std::to_string(bytes) + " (" + std::to_string(spec.count) + " " +
                         to_string(spec.fn.type) + " elements)");
    else if (first)
      acc = std::move(d);
    else if (cfg_.blocks)
      acc.insert(acc.end(), d.begin(), d.end()); // in vnode order
    else if (auto e = ops_table_.combine(spec.fn, acc, d.data(), d.size()))
      bad = make_error(e->code, "reduction " + std::to_string(spec.op) + ": vnode " +
                                  std::to_string(v) + ": " + e->message);
    first = false;
  });
  if (bad)
    return *bad;
  return acc;
}

reduce_abandoned reduce_engine::abandon(timestamp now, std::uint64_t op, reduce_outbox& out) {
  sync(now, out);
  reduce_abandoned r;
  r.op = op;
  ++stats_.abandoned;
  auto i = ops_.find(op);
  if (i == ops_.end()) {
    forget_op(op, out);
    return r;
  }
  const auto& st = i->second;
  r.known = true;
  r.root = st.spec.root;
  r.at_root = st.rooted || is_root_owner(st);
  if (r.at_root) {
    r.gathered = st.covered | st.tentative_cover;
    r.missing = view_.all_vnodes() - r.gathered;
  } else if (!(r.part_sent = st.main_sent || st.complete)) {
    const auto owner = view_.owner(st.spec.root);
    if (owner != no_proc)
      for (auto& c : children_of(st, owner))
        if (!st.reported.count(c.id)) {
          r.waiting_for.push_back(c.id);
          r.missing |= c.subtree;
        }
    if (view_.participating())
      r.missing |= view_.own_vnodes() - settled();
    r.gathered = st.has_acc ? st.covered : vnode_set{};
  }
  r.missing_owners = view_.owners(r.missing);
  forget_op(op, out);
  return r;
}

void reduce_engine::forget_op(std::uint64_t op, reduce_outbox& out) {
  ops_.erase(op);
  if (abandoned_.insert(op).second)
    timer(out, cfg_.op_linger, {timer_kind::forget, op});
}

std::optional<vnode_set> reduce_engine::gathered_at_root(std::uint64_t op) const {
  auto i = ops_.find(op);
  if (i == ops_.end() || !(i->second.rooted || is_root_owner(i->second)))
    return std::nullopt;
  return i->second.covered | i->second.tentative_cover;
}

std::uint64_t reduce_engine::next_op() const {
  // The first number of the operation after the one `k` belongs to (stride 1: k + 1).
  auto after = [this](std::uint64_t k) {
    return cfg_.stride <= 1 ? k + 1 : cfg_.first_op + operation_of(k) * cfg_.stride;
  };
  if (last_started_ > 0)
    return after(last_started_);
  if (!done_.empty())
    return after(done_.begin()->first);
  if (!ops_.empty()) {
    const auto k = ops_.begin()->first;
    return cfg_.stride <= 1 || k < cfg_.first_op
             ? k
             : cfg_.first_op + (k - cfg_.first_op) / cfg_.stride * cfg_.stride;
  }
  return cfg_.first_op;
}

std::string describe_owners(const std::map<proc_id, vnode_set>& by_owner) {
  std::string r;
  for (auto& [p, vs] : by_owner) {
    if (vs.empty())
      continue;
    if (!r.empty())
      r += ", ";
    r += vs.to_string() + (p == no_proc ? std::string(" (owner unknown)")
                                        : " (processor " + std::to_string(p) + ")");
  }
  return r;
}

void reduce_engine::contribute(timestamp now, op_state& st, const vnode_set& vs,
                               reduce_outbox& out) {
  if (vs.empty())
    return;
  const std::size_t bytes = st.spec.count * element_size(st.spec.fn.type);
  std::vector<std::uint8_t> acc;
  vnode_set counted;
  vs.for_each([&](vnode_id v) {
    auto d = st.values(v);
    std::optional<error> e;
    if (d.size() != bytes)
      e = make_error(errc::invalid_argument, "contribution of " + std::to_string(d.size()) +
                                                " bytes, " + std::to_string(bytes) + " expected");
    else if (counted.empty())
      acc = std::move(d);
    else if (cfg_.blocks)
      acc.insert(acc.end(), d.begin(), d.end()); // in vnode order
    else
      e = ops_table_.combine(st.spec.fn, acc, d.data(), d.size());
    if (e) {
      out.problems.push_back(problem(reduce_problem::kind::bad_data, st.spec.op, vnode_set{v},
                                     e->to_string()));
      return;
    }
    counted.insert(v);
  });
  stats_.contributed += counted.size();
  if (!counted.empty())
    take_in(now, st, counted, shared_bytes(std::move(acc)), true, false, 0, out);
}

// --- partials -------------------------------------------------------------------------

bool reduce_engine::accumulate(op_state& st, const vnode_set& vs, const shared_bytes& data,
                               reduce_outbox& out) {
  if (vs.empty())
    return true;
  if (st.covered.intersects(vs)) {
    out.problems.push_back(problem(reduce_problem::kind::overlap, st.spec.op,
                                   st.covered & vs, "partials overlap"));
    return false;
  }
  if (!st.has_acc) {
    st.acc = data.to_vector();
    st.has_acc = true;
  } else if (cfg_.blocks) {
    if (st.spec.count == 0) // a state opened by an empty partial
      st.spec.count = block_size_of(vs, data.size());
    const auto block = st.spec.count;
    if (data.size() != vs.size() * block || st.acc.size() != st.covered.size() * block) {
      out.problems.push_back(problem(reduce_problem::kind::bad_data, st.spec.op, vs,
                                     "blocks of another size"));
      return false;
    }
    st.acc = merge_blocks(st.covered, st.acc.data(), vs, data.data(), block);
  } else if (auto e = ops_table_.combine(st.spec.fn, st.acc, data.data(), data.size())) {
    out.problems.push_back(problem(reduce_problem::kind::bad_data, st.spec.op, vs,
                                   e->to_string()));
    return false;
  }
  st.covered |= vs;
  return true;
}

void reduce_engine::check_complete(op_state& st, reduce_outbox& out) {
  if (st.complete || !(st.covered | st.tentative_cover).includes(view_.all_vnodes()))
    return;
  // Complete with the tentative partials: nothing else covers their vnodes, so each
  // vnode is counted once. What covers them and comes later is dropped.
  for (auto& [vs, data] : st.tentative) {
    if (!accumulate(st, vs, data, out))
      return; // reported (bad data): the reduction cannot complete
    st.counted_tentatively |= vs;
    ++stats_.tentative_counted;
  }
  st.tentative.clear();
  st.tentative_cover.clear();
  st.complete = true;
  st.rooted = false;
  st.has_acc = false;
  done_dirty_ = true; // its root vnode may move away before the next event (sync)
  ++stats_.results;
  out.results.push_back({st.spec.op, st.spec.root, std::move(st.covered),
                         shared_bytes(std::move(st.acc))});
  st.covered.clear();
  st.acc.clear();
  linger(st, out);
}

bool reduce_engine::take_in(timestamp now, op_state& st, const vnode_set& vs,
                            const shared_bytes& data, bool combine, bool direct,
                            std::uint32_t hops, reduce_outbox& out, bool tentative) {
  if (vs.empty())
    return false;
  if (st.complete) {
    if (tentative || st.counted_tentatively.intersects(vs)) {
      ++stats_.superseded; // counted already (tentatively, or by what this repeats)
      return false;
    }
    out.problems.push_back(problem(reduce_problem::kind::overlap, st.spec.op, vs,
                                   "a partial after the result"));
    return false;
  }
  if (is_root_owner(st)) {
    st.rooted = true;
    ack_taken(now, st, out); // what waited here for a parent is gathered at the root now
    if (!st.owners_noted)
      ask_new_owners(now, st, out); // notes who owns what is missing
    if (tentative) {
      take_tentative(st, vs, data);
    } else {
      // What this covers of the tentative partials is counted here, with it.
      if (st.tentative_cover.intersects(vs)) {
        for (auto t = st.tentative.begin(); t != st.tentative.end();) {
          if (t->first.intersects(vs)) {
            ++stats_.superseded;
            st.tentative_cover -= t->first;
            t = st.tentative.erase(t);
          } else {
            ++t;
          }
        }
      }
      if (!accumulate(st, vs, data, out))
        return false;
    }
    check_complete(st, out);
    return false;
  }
  if (tentative) {
    ++stats_.passed_on; // never combined: on to the root's owner as it is
    send_partial(now, st, vs, data, true, hops, out, true);
    return false;
  }
  if (combine && !st.main_sent) {
    accumulate(st, vs, data, out);
    return true;
  }
  ++stats_.passed_on; // late, or not from a child: on at once
  send_partial(now, st, vs, data, direct, hops, out);
  return false;
}

void reduce_engine::maybe_send_main(timestamp now, op_state& st, bool force,
                                    reduce_outbox& out) {
  if (st.main_sent || st.complete || is_root_owner(st))
    return;
  if (!force) {
    if (!st.started)
      return;
    const auto owner = view_.owner(st.spec.root);
    if (owner != no_proc)
      for (auto& c : children_of(st, owner))
        if (!st.reported.count(c.id) && !unusable(now, c.id))
          return; // still waiting for this child
  }
  st.main_sent = true;
  if (in_star(st, view_.owner(st.spec.root))) {
    ++stats_.star_partials;
    tell_tree_parent(now, st, out);
  }
  if (st.has_acc && !st.covered.empty())
    send_partial(now, st, st.covered, shared_bytes(std::move(st.acc)), false, 0, out);
  else if (st.started && view_.participating())
    send_partial(now, st, {}, {}, false, 0, out); // "nothing here": the parent need not wait
  st.has_acc = false;
  st.acc.clear();
  st.covered.clear();
  // The children's partials have gone up from here with it.
  ack_taken(now, st, out);
  linger(st, out);
  // The segment after this one (if any) has its timeout from now on.
  if (auto n = ops_.find(st.spec.op + 1); n != ops_.end() && n->second.spec.after == st.spec.op &&
                                          n->second.started && !n->second.main_sent &&
                                          !n->second.complete)
    n->second.timeout_token = timer(out, n->second.wait, {timer_kind::timeout, n->first});
}

wire::reduce_partial reduce_engine::partial_of(const op_state& st) const {
  wire::reduce_partial p;
  p.collective = cfg_.kind;
  p.op = st.spec.op;
  p.root = st.spec.root;
  p.fn = st.spec.fn;
  p.kind = st.kind;
  return p;
}

void reduce_engine::send_partial(timestamp now, op_state& st, const vnode_set& vs,
                                 shared_bytes data, bool direct, std::uint32_t hops,
                                 reduce_outbox& out, bool tentative) {
  auto p = partial_of(st);
  p.vnodes = vs;
  p.direct = direct || tentative;
  p.hops = hops;
  p.data = data;
  p.tentative = tentative;
  const auto up = send_partial(now, std::move(p), out);
  if (up != no_proc && !vs.empty())
    st.unacked.push_back({up, vs, std::move(data)}); // until the parent acknowledges it
}

proc_id reduce_engine::send_partial(timestamp now, wire::reduce_partial p, reduce_outbox& out) {
  const proc_id self = view_.self();
  proc_id to = no_proc;
  if (!p.direct) {
    // Up the tree rooted at the root vnode's owner (as known here).
    const auto owner = view_.owner(p.root);
    if (owner != no_proc) {
      auto st = ops_.find(p.op);
      const auto parent = st != ops_.end() ? parent_of(st->second, owner)
                                           : view_.parent({owner, p.kind});
      if (parent != no_proc && parent != self && !unusable(now, parent))
        to = parent;
    }
  }
  if (to == no_proc) {
    p.direct = true;
    auto parts = route_to_owners(view_, vnode_set{p.root},
                                 [&](proc_id q) { return unusable(now, q); });
    to = parts.empty() ? self : parts.begin()->first;
    if (to == self) {
      hold(std::move(p), out); // nobody to send it to yet
      return no_proc;
    }
  }
  const bool up = !p.direct;
  ++(p.direct ? stats_.direct_partials : stats_.tree_partials);
  send(now, to, std::move(p), out);
  return up ? to : no_proc;
}

void reduce_engine::handle_partial(timestamp now, proc_id from, const wire::reduce_partial& m,
                                   reduce_outbox& out) {
  const bool root_here = view_.participating() && view_.own_vnodes().contains(m.root);
  auto i = ops_.find(m.op);
  if (i == ops_.end()) {
    if (root_here && abandoned_.count(m.op)) {
      // Given up here: gathering it again could never complete it.
      if (!m.vnodes.empty())
        ++stats_.dropped;
      return;
    }
    if (!root_here && m.op <= last_started_) {
      // Closed here: just pass it on.
      if (m.vnodes.empty())
        return;
      auto p = m;
      ++p.hops;
      ++stats_.passed_on;
      if (m.hops >= cfg_.max_hops)
        hold(std::move(p), out);
      else
        send_partial(now, std::move(p), out);
      if (!m.direct && !m.tentative)
        ack(now, from, m.op, m.vnodes, out);
      return;
    }
    i = ops_.try_emplace(m.op).first;
    auto& fresh = i->second;
    fresh.spec.op = m.op;
    fresh.spec.root = m.root;
    fresh.spec.fn = m.fn;
    fresh.spec.count = cfg_.blocks ? block_size_of(m.vnodes, m.data.size())
                                   : m.data.size() / element_size(m.fn.type);
    fresh.kind = m.kind;
  }
  op_state& st = i->second;
  const bool child = !m.direct && !st.main_sent && !st.reported.count(from) && is_child(st, from);
  if (child)
    st.reported.insert(from);
  // Sent up the tree to this processor: its sender keeps it until acknowledged, once
  // what covers it has gone up from here.
  const bool acked = !m.direct && !m.tentative && from != view_.self();
  if (!root_here && m.hops >= cfg_.max_hops && !m.vnodes.empty()) {
    hold(m, out); // gone round too long: wait, then straight to the root's owner
    if (acked)
      ack(now, from, m.op, m.vnodes, out);
  } else if (take_in(now, st, m.vnodes, m.data, child, m.direct, m.hops + 1, out,
                     m.tentative)) {
    if (acked)
      st.to_ack[from] |= m.vnodes;
  } else if (acked) {
    ack(now, from, m.op, m.vnodes, out);
  }
  maybe_send_main(now, st, false, out);
}

// --- histories ------------------------------------------------------------------------

void reduce_engine::sync(timestamp now, reduce_outbox& out) {
  view_.refresh();
  const auto own = view_.participating() ? view_.own_vnodes() : vnode_set{};
  std::vector<wire::reduce_record> gone;
  for (auto d = done_.begin(); d != done_.end();) {
    auto moved = d->second - own;
    if (!moved.empty()) {
      gone.push_back({moved, d->first});
      d->second -= moved;
    }
    d = d->second.empty() ? done_.erase(d) : std::next(d);
  }
  // Reductions complete here whose root vnode moved away: its new owner learns it, and
  // drops their partials that still come (copies sent after a crash) instead of holding
  // them as for a reduction in progress. Once for each move away from here. Looked at
  // only when something changed: what is owned here, or a reduction completed.
  std::vector<wire::reduce_done> done;
  if (done_dirty_ || own != done_own_) {
    done_dirty_ = false;
    done_own_ = own;
    for (auto& [k, st] : ops_) {
      if (!st.complete)
        continue;
      if (own.contains(st.spec.root))
        st.told = false;
      else if (!st.told) {
        st.told = true;
        ++stats_.done_told;
        done.push_back({k, st.spec.root, st.counted_tentatively});
      }
    }
  }
  if (!gone.empty() || !done.empty())
    route_handoff(now, gone, 0, out, done);
}

void reduce_engine::route_handoff(timestamp now, const std::vector<wire::reduce_record>& records,
                                  std::uint32_t hops, reduce_outbox& out,
                                  const std::vector<wire::reduce_done>& done) {
  vnode_set all;
  for (auto& r : records)
    all |= r.vnodes;
  for (auto& d : done)
    all.insert(d.root);
  for (auto& [to, part] : route_to_owners(view_, all, [&](proc_id q) { return unusable(now, q); })) {
    wire::reduce_handoff h;
    h.collective = cfg_.kind;
    h.hops = hops;
    for (auto& r : records)
      if (auto mine = r.vnodes & part; !mine.empty())
        h.records.push_back({std::move(mine), r.done});
    for (auto& d : done)
      if (part.contains(d.root))
        h.completed.push_back(d);
    if (to == view_.self()) {
      h.hops = 0;
      hold(std::move(h), out); // nobody to send it to yet
    } else {
      ++stats_.handoffs;
      send(now, to, std::move(h), out);
    }
  }
}

void reduce_engine::handle_handoff(timestamp now, const wire::reduce_handoff& m,
                                   reduce_outbox& out) {
  const auto own = view_.participating() ? view_.own_vnodes() : vnode_set{};
  const auto here = settled();
  std::vector<wire::reduce_record> rest;
  for (auto& r : m.records) {
    auto mine = r.vnodes & own;
    if (auto back = mine & here & adopted_; !back.empty()) {
      // Adopted from a processor taken for crashed that was alive after all: its history
      // is the true one. Keep the later of the two, so that no reduction it counted them
      // in counts them again here (one this engine has already counted them in stays so).
      adopted_ -= back;
      for (auto d = done_.begin(); d != done_.end();) {
        auto part = d->second & back;
        if (!part.empty() && d->first < r.done) {
          d->second -= part;
          done_[r.done] |= part;
        }
        d = d->second.empty() ? done_.erase(d) : std::next(d);
      }
      mine -= back;
    }
    if (auto dup = mine & here; !dup.empty()) {
      out.problems.push_back(problem(reduce_problem::kind::double_history, r.done, dup,
                                     "a history for vnodes settled here already"));
      mine -= dup;
    }
    settle(now, mine, r.done, out);
    if (auto other = r.vnodes - (r.vnodes & own); !other.empty())
      rest.push_back({std::move(other), r.done});
  }
  std::vector<wire::reduce_done> rest_done;
  for (auto& d : m.completed) {
    if (own.contains(d.root))
      take_done(now, d, out);
    else
      rest_done.push_back(d); // the root vnode moved on: to its owner
  }
  if (rest.empty() && rest_done.empty())
    return;
  if (m.hops >= cfg_.max_hops)
    hold(wire::reduce_handoff{cfg_.kind, std::move(rest), 0, std::move(rest_done)}, out);
  else
    route_handoff(now, rest, m.hops + 1, out, rest_done);
}

void reduce_engine::settle(timestamp now, const vnode_set& vs, std::uint64_t done,
                           reduce_outbox& out) {
  if (vs.empty())
    return;
  // Contribute to every reduction started here that they still owe. Counted in
  // operations (`reduce_config::stride`): the ones still open here, or given up here
  // (failed ones: not owing them loses nothing).
  std::set<std::uint64_t> open;
  for (auto& [k, st] : ops_)
    if (k > done && k <= last_started_ && st.started) {
      open.insert(operation_of(k));
      contribute(now, st, vs, out);
    }
  for (auto k : abandoned_)
    if (k > done && k <= last_started_ && ops_.count(k) == 0)
      open.insert(operation_of(k));
  const auto owed = last_started_ > done ? operation_of(last_started_) - operation_of(done) : 0;
  if (open.size() < owed)
    out.problems.push_back(problem(reduce_problem::kind::lost_contribution, last_started_, vs,
                                   std::to_string(owed - open.size()) +
                                     " reductions owed are closed here"));
  done_[std::max(done, last_started_)] |= vs;
}

void reduce_engine::adopt(timestamp now, const vnode_set& vnodes, reduce_outbox& out) {
  view_.refresh();
  if (!view_.participating())
    return;
  auto orphans = (vnodes & view_.own_vnodes()) - settled();
  settle(now, orphans, last_started_, out);
  adopted_ |= orphans;
  if (orphans.empty() || last_started_ == 0)
    return;
  adopted_at_[last_started_] |= orphans;
  // The root's owner asks for vnodes whose owner changed; this one is its own.
  for (auto& [k, st] : ops_)
    if (k <= last_started_ && is_root_owner(st) && !st.complete)
      give_adopted(now, st, orphans - st.covered - st.tentative_cover, out);
}

// --- events ---------------------------------------------------------------------------

bool reduce_engine::on_message(timestamp now, proc_id from, const wire::message& m,
                               reduce_outbox& out) {
  sync(now, out);
  if (!handles(m))
    return false;
  if (auto* a = std::get_if<wire::reduce_ack>(&m)) {
    // Taken also once this processor no longer takes part: an acknowledgement brings no
    // work, it only lets go of a partial kept for a resend. A leaver's partials are
    // orphaned by its own leave (it has no parent any more), and one whose ack it refused
    // would go again, tentatively, after `resend_grace`: a frame for nothing (a later
    // owner of the root vnode drops it once it knows the result completed, `take_done`).
    // The ack says what covers the partial went up from its parent or was gathered at
    // the root's owner, so forgetting the kept copy loses nothing.
    handle_ack(*a, from);
    return true;
  }
  if (!view_.participating())
    return false; // frozen knowledge takes no new work
  if (auto* p = std::get_if<wire::reduce_partial>(&m))
    handle_partial(now, from, *p, out);
  else if (auto* q = std::get_if<wire::reduce_ask>(&m))
    handle_ask(now, *q, out);
  else
    handle_handoff(now, std::get<wire::reduce_handoff>(m), out);
  return true;
}

void reduce_engine::on_timer(timestamp now, std::uint64_t token, reduce_outbox& out) {
  auto t = timers_.find(token);
  if (t == timers_.end())
    return;
  const auto e = t->second;
  timers_.erase(t);
  sync(now, out);
  switch (e.what) {
    case timer_kind::timeout: {
      auto i = ops_.find(e.op);
      if (i != ops_.end() && !i->second.main_sent && !i->second.complete &&
          !is_root_owner(i->second)) {
        if (token != i->second.timeout_token)
          break; // restarted since (see maybe_send_main)
        // A segment whose predecessor has not gone up from here yet waits on: its timer
        // starts afresh when that one goes.
        if (auto a = i->second.spec.after ? ops_.find(i->second.spec.after) : ops_.end();
            a != ops_.end() && a->second.started && !a->second.main_sent &&
            !a->second.complete && !is_root_owner(a->second))
          break;
        ++stats_.timeouts;
        maybe_send_main(now, i->second, true, out);
      }
      break;
    }
    case timer_kind::linger: {
      auto i = ops_.find(e.op);
      if (i != ops_.end() && (i->second.main_sent || i->second.complete) && !i->second.rooted &&
          !i->second.has_acc)
        ops_.erase(i);
      break;
    }
    case timer_kind::forget:
      abandoned_.erase(e.op);
      break;
    case timer_kind::resend:
      if (auto i = ops_.find(e.op); i != ops_.end())
        resend_orphaned(now, i->second, true, out);
      break;
    case timer_kind::retry: {
      auto h = held_.find(token);
      if (h == held_.end())
        break;
      auto m = std::move(h->second);
      held_.erase(h);
      if (auto* p = std::get_if<wire::reduce_partial>(&m)) {
        // Straight to the root's owner now, the hop count restarted.
        p->direct = true;
        p->hops = 0;
        if (view_.participating())
          handle_partial(now, view_.self(), *p, out);
        else
          send_partial(now, std::move(*p), out);
      } else if (auto* h2 = std::get_if<wire::reduce_handoff>(&m)) {
        h2->hops = 0;
        handle_handoff(now, *h2, out);
      }
      break;
    }
  }
}

void reduce_engine::on_undeliverable(timestamp now, proc_id to, const wire::message& m,
                                     reduce_outbox& out) {
  if (!handles(m))
    return;
  ++stats_.bounces;
  unreachable_[to] = now + cfg_.unreachable_memory;
  if (auto* p = std::get_if<wire::reduce_partial>(&m)) {
    // Never delivered: the held copy goes on instead of the one kept for an ack.
    if (auto i = ops_.find(p->op); i != ops_.end()) {
      auto& un = i->second.unacked;
      for (auto u = un.begin(); u != un.end(); ++u)
        if (u->to == to && u->vnodes == p->vnodes) {
          un.erase(u);
          break;
        }
    }
  } else if (!std::holds_alternative<wire::reduce_handoff>(m)) {
    return; // an acknowledgement or an ask: news that the next view change makes moot
  }
  hold(m, out);
}

void reduce_engine::on_view_change(timestamp now, reduce_outbox& out) {
  sync(now, out);
  for (auto i = unreachable_.begin(); i != unreachable_.end();)
    i = now >= i->second ? unreachable_.erase(i) : std::next(i);
  const bool part = view_.participating();
  for (auto& [k, st] : ops_) {
    if (st.rooted && !is_root_owner(st)) {
      // The root vnode moved away: what was gathered for it goes to its new owner.
      st.rooted = false;
      st.main_sent = true;
      if (st.has_acc && !st.covered.empty())
        send_partial(now, st, st.covered, shared_bytes(std::move(st.acc)), true, 0, out);
      for (auto& [vs, data] : st.tentative)
        send_partial(now, st, vs, data, true, 0, out, true);
      st.tentative.clear();
      st.tentative_cover.clear();
      st.has_acc = false;
      st.acc.clear();
      st.covered.clear();
      linger(st, out);
    } else if (is_root_owner(st) && st.has_acc) {
      st.rooted = true; // the root vnode moved here: what waited here is its now
      ack_taken(now, st, out);
      check_complete(st, out);
    }
    // Children may have gone; one that left takes its part elsewhere.
    maybe_send_main(now, st, !part, out);
    resend_orphaned(now, st, false, out);
    if (part && is_root_owner(st) && !st.complete && (st.started || st.rooted))
      ask_new_owners(now, st, out);
  }
}

bool reduce_engine::holding() const {
  if (!held_.empty())
    return true;
  for (auto& [k, st] : ops_)
    if ((st.has_acc && !st.covered.empty() && (st.rooted || !st.main_sent)) ||
        (st.rooted && !st.tentative.empty()))
      return true;
  return !view_.participating() && !done_.empty();
}

std::string reduce_engine::describe() const {
  std::string r;
  for (auto& [k, st] : ops_) {
    r += "reduction " + std::to_string(k) + " to vnode " + std::to_string(st.spec.root) +
         (st.started ? ", started" : ", not started") + (st.main_sent ? ", sent" : "") +
         (st.rooted ? ", at the root" : "") + (st.complete ? ", complete" : "") +
         ", holds " + st.covered.to_string() +
         (st.tentative.empty() ? "" : ", tentative " + st.tentative_cover.to_string()) +
         (st.unacked.empty() ? "" : ", unacked " + std::to_string(st.unacked.size())) + "\n";
  }
  for (auto& [token, m] : held_)
    r += std::string("held ") + wire::name_of(m) + "\n";
  vnode_set s = settled();
  r += "settled " + s.to_string() + ", last started " + std::to_string(last_started_) + "\n";
  return r;
}

} // namespace banyan
