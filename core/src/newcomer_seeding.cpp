#include "newcomer_seeding.hpp"

#include <algorithm>

#include "supervisor_parts.hpp"

namespace banyan::sup {

void newcomer_seeding::expect_seed(timestamp now, proc_id j, outbox& out) {
  if (auto g = giver_of_.find(j); g != giver_of_.end()) {
    auto giver = g->second;
    seed(now, j, giver, out); // the routing update came first
    return;
  }
  unseeded_.insert(j);
  s_.start_timer(out, s_.cfg.seed_wait, timer_token::seed(j));
}

void newcomer_seeding::note_givers(timestamp now, const std::vector<wire::route_entry>& routes,
                                   outbox& out) {
  const auto& table = s_.owners.routes();
  for (auto& r : routes) {
    const auto j = r.owner;
    if (j == no_proc || j == s_.self || (s_.members.is_member(j) && !unseeded_.count(j)))
      continue; // not a newcomer waiting for its seed
    proc_id g = no_proc;
    for (auto& [owner, vs] : table.partition(r.vnodes))
      if (owner != no_proc && owner != j && r.epoch > table.epoch(vs.front())) {
        g = owner;
        break;
      }
    if (g == no_proc)
      continue;
    if (s_.members.is_member(j))
      seed(now, j, g, out);
    else
      giver_of_[j] = g; // the notice of the newcomer is still on its way
  }
}

void newcomer_seeding::gave_to(proc_id j, timestamp now, bool share) {
  given_to_[j] = now;
  if (share)
    shared_to_.insert(j);
}

void newcomer_seeding::after_giving(timestamp now, proc_id j, outbox& out) {
  if (unseeded_.count(j))
    seed(now, j, s_.self, out); // we gave a newcomer vnodes: we go under it in its trees
  else if (!s_.members.is_member(j))
    giver_of_[j] = s_.self;
}

void newcomer_seeding::seed(timestamp now, proc_id j, proc_id g, outbox& out) {
  unseeded_.erase(j);
  giver_of_.erase(j);
  const bool shared = shared_to_.erase(j) > 0;
  if (s_.status != supervisor::status::member || j == s_.self || !s_.members.is_member(j)
      || !s_.members.is_member(g)) {
    s_.repairs.answer_deferred(out);
    return;
  }
  bool any = false;
  for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
    auto tj = s_.trees.find({j, k});
    if (!tj || tj->connected() || s_.repairs.has_step(tj->key()))
      continue;
    proc_id to = no_proc;
    duration rtt{0};
    rate bw = 0;
    bool measured = true;
    if (g == s_.self) {
      // Our edge to j is new; until measured, take it for a LAN edge (j asked us for
      // vnodes: we held them while it was away, as its nearest member). Without a figure
      // of j that is a guess, with ground only for a rejoiner that asked for its vnodes
      // back: a first join comes from anywhere (the contact gives a share, or the vnodes
      // it asks for), and a founder without figures would stand at distance 0 from every
      // newcomer's root. Otherwise j is measured next.
      to = j;
      auto lan = duration::max();
      for (auto& [p, f] : s_.paths.figures())
        lan = std::min(lan, f.rtt);
      const auto known = s_.paths.measured_rtt(j);
      rtt = known.value_or(lan == duration::max() ? duration{0} : lan);
      bw = s_.paths.measured_bw(j).value_or(s_.paths.widest());
      const bool rejoins = s_.members.has_left_before(j); // a member before, now back
      measured = known.has_value() || (rejoins && !shared && lan != duration::max());
    } else if (auto tg = s_.trees.find({g, k}); tg && tg->parent() != no_proc) {
      to = tg->parent();
      rtt = tg->rtt_parent();
      bw = tg->bw_parent();
    }
    any = s_.repairs.hint(*tj, {to}, rtt, bw, 0, measured) || any;
  }
  if (any)
    s_.repairs.ask_step_parents(out);
  s_.repairs.answer_deferred(out);
  s_.repairs.after_steps(now, out); // measures for a tree still without parent or seed
}

void newcomer_seeding::on_seed_timer(timestamp now, proc_id j, outbox& out) {
  // No seed for this newcomer's trees in time: answer what we held for them (refused
  // where we have no parent), and measure for trees still without one.
  if (unseeded_.erase(j) && s_.status == supervisor::status::member) {
    s_.repairs.answer_deferred(out);
    s_.repairs.after_steps(now, out);
    s_.updates.flush(out);
  }
}

proc_id newcomer_seeding::chain_ahead(proc_id from, tree_key k) {
  auto given = given_to_.find(from);
  if (k.kind != tree_kind::bandwidth || given == given_to_.end()
      || s_.now - given->second > s_.cfg.sponsor_window)
    return no_proc;
  auto& chain = chain_tail_.try_emplace(k, no_proc, std::set<proc_id>{}).first->second;
  const auto ahead = chain.first;
  const bool first_time = chain.second.insert(from).second; // (not a later probe's)
  if (first_time)
    chain.first = from;
  return first_time && ahead != no_proc && s_.members.is_member(ahead) ? ahead : no_proc;
}

bool newcomer_seeding::placing(proc_id j) const {
  auto given = given_to_.find(j);
  return given != given_to_.end() && s_.now - given->second <= s_.cfg.sponsor_window;
}

void newcomer_seeding::forget(proc_id p) {
  unseeded_.erase(p);
  giver_of_.erase(p);
  shared_to_.erase(p);
  given_to_.erase(p);
  for (auto i = chain_tail_.begin(); i != chain_tail_.end();)
    i = i->second.first == p || i->first.root == p ? chain_tail_.erase(i) : std::next(i);
}

void newcomer_seeding::reset() {
  unseeded_.clear();
  giver_of_.clear();
  shared_to_.clear();
  given_to_.clear();
  chain_tail_.clear();
}

} // namespace banyan::sup
