#include "banyan/core/supervisor.hpp"

#include <algorithm>
#include <tuple>

#include "banyan/core/bandwidth_rule.hpp"
#include "banyan/core/latency_rule.hpp"

namespace banyan {

namespace {

// Timer tokens: sequence number times 16 plus what the timer is for.
constexpr std::uint64_t token_timeout = 0;
constexpr std::uint64_t token_start = 1;
constexpr std::uint64_t token_offer = 2;
constexpr std::uint64_t token_flush = 3; // also joins: seq 1 is a flush, the join seq >= 2
constexpr std::uint64_t token_watch = 4; // seq: the watch generation
constexpr std::uint64_t token_adopt = 5; // orphans may be due for adoption
constexpr std::uint64_t token_seed = 6;  // seq: a newcomer whose trees were not seeded in time
constexpr std::uint64_t token_lend = 7;  // seq: vnodes handed to a newcomer, no longer reported
constexpr std::uint64_t token_kinds = 16;
constexpr int giver_wait_attempt = 9;    // a joiner waiting for its givers (seq 10)

std::uint64_t token_for(std::uint64_t seq, std::uint64_t what) { return seq * token_kinds + what; }

// The ping a member sends the successor it watches (probes are numbered from 1).
constexpr std::uint64_t watch_seq = 0;

constexpr tree_kind kinds[] = {tree_kind::latency, tree_kind::bandwidth};

// Vnode epochs: counter << 20 | issuing processor (processor ids stay below 2^20).
constexpr unsigned epoch_id_bits = 20;
constexpr std::uint64_t epoch_id_mask = (std::uint64_t{1} << epoch_id_bits) - 1;

} // namespace

supervisor::supervisor(proc_id self, supervisor_config cfg, std::uint64_t seed,
                       supervisor_test_hooks hooks)
  : self_(self), cfg_(cfg), hooks_(hooks), decision_(decide(cfg.rules, cfg.local_bias)),
    rng_(seed), schedule_(cfg.extra_measurements) {
}

// --- bookkeeping -------------------------------------------------------------

tree_state* supervisor::find_tree(tree_key k) {
  auto i = index_of(k);
  if (i >= trees_.size() || !trees_[i])
    return nullptr;
  return &*trees_[i];
}

const tree_state* supervisor::tree(tree_key k) const {
  auto i = index_of(k);
  if (i >= trees_.size() || !trees_[i])
    return nullptr;
  return &*trees_[i];
}

proc_id supervisor::parent(tree_key k) const {
  auto t = tree(k);
  return t ? t->parent() : no_proc;
}

bool supervisor::all_parented() const {
  for (auto& t : trees_)
    if (t && !t->connected())
      return false;
  return true;
}

std::string supervisor::describe() const {
  static const char* statuses[] = {"idle", "joining", "member", "leaving", "left"};
  static const char* phases[] = {"pause", "ping", "download", "adopt"};
  std::string r = "proc " + std::to_string(self_) + " " + statuses[static_cast<int>(status_)] +
                  ", " + std::to_string(members_.size()) + " members";
  if (schedule_.active())
    r += ", measuring (" + std::to_string(schedule_.extra_left()) + " extra left)";
  if (probe_)
    r += ", probe " + std::to_string(probe_->seq) + " of " + std::to_string(probe_->cand) +
         " in " + phases[static_cast<int>(probe_->at)];
  if (!all_parented())
    r += ", some tree without parent";
  if (flush_pending_)
    r += ", updates pending";
  return r;
}

const wire::member* supervisor::member_info(proc_id p) const {
  auto i = member_info_.find(p);
  return i == member_info_.end() || !is_member(p) ? nullptr : &i->second;
}

std::optional<duration> supervisor::measured_rtt(proc_id p) const {
  auto i = figures_.find(p);
  if (i == figures_.end() || i->second.rtt == duration::max())
    return std::nullopt;
  return i->second.rtt;
}

bool supervisor::is_local(proc_id p) const {
  auto rtt = measured_rtt(p);
  return rtt && context().local(*rtt);
}

std::optional<duration> supervisor::smallest_remote_rtt() const {
  auto ctx = context();
  std::optional<duration> best;
  for (auto& [p, f] : figures_)
    if (f.rtt != duration::max() && is_member(p) && !ctx.local(f.rtt) && (!best || f.rtt < *best))
      best = f.rtt;
  return best;
}

std::optional<rate> supervisor::measured_bw(proc_id p) const {
  auto i = figures_.find(p);
  if (i == figures_.end() || i->second.bw <= 0)
    return std::nullopt;
  return i->second.bw;
}

bool supervisor::admit(timestamp now, const wire::member& m, outbox& out, bool hearsay) {
  if (m.id == self_ || m.id == no_proc)
    return false;
  if (auto t = tombstones_.find(m.id); t != tombstones_.end() && t->second.count(m.incarnation))
    return false; // a late notice about an incarnation that has left
  if (is_member(m.id)) {
    auto known = member_info_[m.id].incarnation;
    if (known == m.incarnation)
      return false;
    // A new incarnation: the old one left without our hearing of it.
    // Incarnations are random, so which of two is the later one only a notice of the
    // join can tell; a member list (a view, a join_accept) may be older than what we
    // know, and taking its incarnation would bury the live one (which then refutes, and
    // gives its vnodes up). Departures reach us as tombstones.
    if (hearsay)
      return false;
    depart(now, m.id, known, out);
  }
  add_member(m);
  return true;
}

void supervisor::remember_path(proc_id p, const std::string& address,
                               const peer_figures& f) {
  if (p == self_)
    return;
  if (remembered_from_ != me_.address) {
    remembered_.clear(); // measured from another place: none of it holds here
    remembered_from_ = me_.address;
  }
  remembered_[p] = {address, f};
}

void supervisor::recall_paths(const supervisor& earlier) {
  if (earlier.self_ != self_)
    return;
  remembered_ = earlier.remembered_;
  remembered_from_ = earlier.remembered_from_;
  widest_ = std::max(widest_, earlier.widest_);
}

bool supervisor::depart(timestamp now, proc_id who, std::uint64_t inc, outbox& out) {
  if (who == self_)
    return false;
  bool news = tombstones_[who].insert(inc).second;
  if (is_member(who) && member_info_[who].incarnation == inc) {
    // Whatever routes still name it now were not handed over (a leaver's handover is
    // applied before its departure): orphans, unless news of a move arrives first.
    bool any = false;
    for (auto& r : routes_.runs())
      if (r.owner == who) {
        orphans_.push_back({{vnode_set::range(r.lo, r.hi), who, r.epoch}, now});
        any = true;
      }
    if (any)
      out.timers.push_back({cfg_.adopt_delay, token_for(0, token_adopt)});
    remove_member(now, who, out);
  }
  return news;
}

void supervisor::add_member(const wire::member& m) {
  auto p = m.id;
  if (p >= is_member_.size())
    is_member_.resize(p + 1, false);
  member_info_[p] = m;
  if (is_member_[p])
    return;
  is_member_[p] = true;
  if (auto r = remembered_.find(p); r != remembered_.end()) {
    if (p != self_ && r->second.address == m.address && remembered_from_ == me_.address)
      figures_.try_emplace(p, r->second.figures);
    remembered_.erase(r);
  }
  members_.insert(std::upper_bound(members_.begin(), members_.end(), p), p);
  auto needed = (static_cast<std::size_t>(p) + 1) * tree_kind_count;
  if (trees_.size() < needed) {
    trees_.resize(needed);
    is_dirty_info_.resize(needed, false);
    is_dirty_subtree_.resize(needed, false);
  }
  for (auto k : kinds)
    trees_[index_of({p, k})].emplace(tree_key{p, k}, self_);
  if (decision_.sender_capacity)
    trees_[index_of({p, tree_kind::bandwidth})]->set_sender_capacity(widest_);
}

void supervisor::remove_member(timestamp now, proc_id p, outbox& out) {
  if (!is_member(p) || p == self_)
    return;
  is_member_[p] = false;
  members_.erase(std::lower_bound(members_.begin(), members_.end(), p));
  if (auto f = figures_.find(p); f != figures_.end()) {
    remember_path(p, member_info_[p].address, f->second);
    figures_.erase(f);
  }
  member_info_.erase(p);
  strikes_.erase(p);
  for (auto k : kinds)
    trees_[index_of({p, k})].reset();
  bool orphaned = false;
  for (auto& t : trees_) {
    if (!t)
      continue;
    if (t->remove_child(p))
      mark_subtree(*t);
    if (t->parent() == p) {
      lose_parent(now, *t, out);
      orphaned = true;
    }
  }
  bool dropped_hint = false;
  std::vector<tree_key> failed;
  for (auto i = steps_.begin(); i != steps_.end();) {
    if (i->first.root == p) {
      i = steps_.erase(i);
      dropped_hint = true;
      continue;
    }
    if (i->second.to == p)
      failed.push_back(i->first);
    ++i;
  }
  for (auto k : failed)
    next_step(k); // gone: ask the next step-parent
  dropped_hint = dropped_hint || !failed.empty();
  remeasure_.erase(std::remove(remeasure_.begin(), remeasure_.end(), p), remeasure_.end());
  unseeded_.erase(p);
  giver_of_.erase(p);
  shared_to_.erase(p);
  given_to_.erase(p);
  for (auto i = chain_tail_.begin(); i != chain_tail_.end();)
    i = i->second.first == p || i->first.root == p ? chain_tail_.erase(i) : std::next(i);
  deferred_.erase(std::remove_if(deferred_.begin(), deferred_.end(),
                                 [&](auto& d) { return d.from == p; }),
                  deferred_.end());
  for (auto i = asks_.begin(); i != asks_.end();)
    i = i->second.cand == p ? asks_.erase(i) : std::next(i);
  if (probe_ && probe_->cand == p)
    finish_probe(now, false, out);
  if (dropped_hint) {
    answer_deferred(out);
    ask_step_parents(out);
    after_steps(now, out);
  }
  if (orphaned)
    trigger(now, out);
}

void supervisor::set_own(vnode_set own) {
  if (own == own_)
    return;
  own_ = std::move(own);
  mark_all_subtrees();
}

void supervisor::report_disowned(timestamp now, proc_id by, vnode_set lost, outbox& out) {
  if (lost.empty())
    return;
  tree_event e;
  e.what = tree_event::kind::disowned;
  e.at = now;
  e.peer = by;
  e.vnodes = std::move(lost);
  out.events.push_back(std::move(e));
}

bool supervisor::apply_told_routes(timestamp now, proc_id by,
                                   const std::vector<wire::route_entry>& routes, outbox& out) {
  const auto before = own_;
  const bool changed = apply_routes(routes);
  if (status_ != status::member || own_ == before)
    return changed;
  auto lost = before - own_;
  for (auto& [seq, o] : offers_)
    lost -= o.vnodes; // given away by us: the receiver's route may come round first
  report_disowned(now, by, std::move(lost), out);
  return changed;
}

bool supervisor::apply_routes(const std::vector<wire::route_entry>& routes) {
  bool touched_own = false, changed_any = false;
  for (auto& r : routes) {
    auto changed = routes_.apply(r);
    changed_any = changed_any || !changed.empty();
    if (!changed.empty() && (r.owner == self_ || changed.intersects(own_)))
      touched_own = true;
  }
  if (touched_own)
    set_own(routes_.owned_by(self_));
  return changed_any;
}

std::vector<proc_id> supervisor::sponsored(timestamp now) {
  sponsored_.erase(std::remove_if(sponsored_.begin(), sponsored_.end(),
                                  [&](auto& s) { return now - s.second > cfg_.sponsor_window; }),
                   sponsored_.end());
  std::vector<proc_id> result;
  for (auto& s : sponsored_)
    result.push_back(s.first);
  return result;
}

void supervisor::hand_over(const vnode_set& vnodes, proc_id to, outbox& out, bool share) {
  auto give = vnodes;
  for (auto& [seq, o] : offers_)
    give -= o.vnodes; // already on offer to someone
  if (!give.empty())
    offer(give, to, false, out, share);
}

vnode_set supervisor::share_of_own() const {
  // The upper half of our own vnodes not already on offer to someone (none when fewer
  // than two are left): joiners that ask at the same moment each get a share.
  auto unoffered = own_;
  for (auto& [seq, o] : offers_)
    unoffered -= o.vnodes;
  vnode_set give;
  if (unoffered.size() < 2)
    return give;
  auto keep = unoffered.size() / 2 + unoffered.size() % 2;
  std::size_t seen = 0;
  unoffered.for_each([&](vnode_id v) {
    if (seen++ >= keep)
      give.insert(v);
  });
  return give;
}

std::uint64_t supervisor::next_epoch(const vnode_set& vnodes) {
  std::uint64_t epoch = 0;
  for (auto& r : routes_.runs())
    if (vnodes.intersects(vnode_set::range(r.lo, r.hi)))
      epoch = std::max(epoch, r.epoch);
  // Every move gets a higher epoch than any before it (should an earlier recipient
  // take vnodes after we gave up on it, the later move still wins), and an epoch
  // nobody else can issue: a counter above, our id in the low bits. So two
  // processors that both believe they own a vnode can never announce the same
  // epoch, and "the higher epoch wins" leaves every member with one owner.
  auto base = std::max(epoch, last_offer_epoch_);
  last_offer_epoch_ = (((base >> epoch_id_bits) + 1) << epoch_id_bits)
                      | (static_cast<std::uint64_t>(self_) & epoch_id_mask);
  return last_offer_epoch_;
}

void supervisor::offer(const vnode_set& vnodes, proc_id to, bool leaving, outbox& out,
                       bool share) {
  next_epoch(vnodes);
  auto seq = ++offer_seq_;
  offers_[seq] = vnode_offer{vnodes, to, last_offer_epoch_, leaving, share};
  send(out, to, wire::vnode_handover{{vnodes, to, last_offer_epoch_}});
  out.timers.push_back({cfg_.probe_timeout, token_for(seq, token_offer)});
}

void supervisor::offer_resolved(timestamp now, std::uint64_t seq, bool accepted, outbox& out) {
  auto i = offers_.find(seq);
  if (i == offers_.end())
    return;
  auto o = std::move(i->second);
  offers_.erase(i);
  if (accepted) {
    wire::route_entry entry{o.vnodes, o.to, o.epoch};
    if (o.leaving) {
      finish_leave(now, {entry}, out);
      return;
    }
    apply_routes({entry});
    for (auto m : members_)
      if (m != self_ && m != o.to)
        send(out, m, wire::routing_update{{entry}});
    given_to_[o.to] = now;
    if (cfg_.lend_time.count() > 0) {
      // Still reported below us until the newcomer's own placement has climbed the trees.
      lent_[++lend_seq_] = o.vnodes;
      out.timers.push_back({cfg_.lend_time, token_for(lend_seq_, token_lend)});
    }
    if (o.share)
      shared_to_.insert(o.to);
    if (unseeded_.count(o.to))
      seed(now, o.to, self_, out); // we gave a newcomer vnodes: we go under it in its trees
    else if (!is_member(o.to))
      giver_of_[o.to] = self_;
  } else if (o.leaving && status_ == status::leaving) {
    refused_.push_back(o.to);
    offer_vnodes(now, out);
    return;
  }
  // A refused join handover: the newcomer is gone; the vnodes stay ours. Either
  // way, a leave that waited for this answer may go on now.
  if (!o.leaving && status_ == status::leaving
      && std::none_of(offers_.begin(), offers_.end(), [](auto& x) { return x.second.leaving; }))
    offer_vnodes(now, out);
}

// --- structure-preserving repair ------------------------------------------------

bool supervisor::hint(tree_state& t, std::vector<proc_id> candidates, duration rtt, rate bw,
                      int hops, bool measured) {
  if (t.connected() || t.is_root())
    return false;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    auto to = candidates[i];
    if (to == no_proc || to == self_ || !is_member(to))
      continue;
    steps_[t.key()] = step_hint{to, rtt, bw, measured, hops, 0,
                                std::vector<proc_id>(candidates.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                                     candidates.end())};
    return true;
  }
  steps_.erase(t.key());
  return false;
}

void supervisor::next_step(tree_key k) {
  auto s = steps_.find(k);
  auto t = find_tree(k);
  if (s == steps_.end())
    return;
  if (!t) {
    steps_.erase(s);
    return;
  }
  auto h = s->second;
  hint(*t, h.next, h.rtt, h.bw, h.hops, h.measured); // erases the hint when nobody is left
}

vnode_set supervisor::reported_own() const {
  if (lent_.empty())
    return own_;
  auto r = own_;
  for (auto& [seq, vs] : lent_)
    r |= vs;
  return r;
}

bool supervisor::awaiting(const tree_state& t) const {
  return !t.connected() && (steps_.count(t.key()) || unseeded_.count(t.key().root));
}

// --- seeding a newcomer's trees ------------------------------------------------
//
// Newcomer j takes vnodes from member g (a rejoiner its own back, from the member that
// held them while it was away). j's trees are then g's with the edge g-j turned round:
//
//     g's tree:  g -> a -> {b, c},  g -> j       (parent -> children)
//     j's tree:  j -> g -> a -> {b, c}
//
// Every member asks, in j's tree, its parent in g's tree (g asks j); a parent not yet
// placed itself holds the request until it is (as a step-parent does), so the tree
// grows from j down. Nobody probes: the edges are those of g's tree, with their figures.

void supervisor::expect_seed(timestamp now, proc_id j, outbox& out) {
  if (auto g = giver_of_.find(j); g != giver_of_.end()) {
    auto giver = g->second;
    seed(now, j, giver, out); // the routing update came first
    return;
  }
  unseeded_.insert(j);
  out.timers.push_back({cfg_.seed_wait, token_for(j, token_seed)});
}

void supervisor::note_givers(timestamp now, const std::vector<wire::route_entry>& routes,
                             outbox& out) {
  for (auto& r : routes) {
    const auto j = r.owner;
    if (j == no_proc || j == self_ || (is_member(j) && !unseeded_.count(j)))
      continue; // not a newcomer waiting for its seed
    proc_id g = no_proc;
    for (auto& [owner, vs] : routes_.partition(r.vnodes))
      if (owner != no_proc && owner != j && r.epoch > routes_.epoch(vs.front())) {
        g = owner;
        break;
      }
    if (g == no_proc)
      continue;
    if (is_member(j))
      seed(now, j, g, out);
    else
      giver_of_[j] = g; // the notice of the newcomer is still on its way
  }
}

void supervisor::seed(timestamp now, proc_id j, proc_id g, outbox& out) {
  unseeded_.erase(j);
  giver_of_.erase(j);
  const bool shared = shared_to_.erase(j) > 0;
  if (status_ != status::member || j == self_ || !is_member(j) || !is_member(g)) {
    answer_deferred(out);
    return;
  }
  bool any = false;
  for (auto k : kinds) {
    auto tj = find_tree({j, k});
    if (!tj || tj->connected() || steps_.count(tj->key()))
      continue;
    proc_id to = no_proc;
    duration rtt{0};
    rate bw = 0;
    bool measured = true;
    if (g == self_) {
      // Our edge to j is new; until measured, take it for a LAN edge (j asked us for
      // vnodes: we held them while it was away, as its nearest member). Without a figure
      // of j that is a guess, with ground only for a rejoiner that asked for its vnodes
      // back: a first join comes from anywhere (the contact gives a share, or the vnodes
      // it asks for), and a founder without figures would stand at distance 0 from every
      // newcomer's root. Otherwise j is measured next.
      to = j;
      auto lan = duration::max();
      for (auto& [p, f] : figures_)
        lan = std::min(lan, f.rtt);
      const auto known = measured_rtt(j);
      rtt = known.value_or(lan == duration::max() ? duration{0} : lan);
      bw = measured_bw(j).value_or(widest_);
      const bool rejoins = tombstones_.count(j) > 0; // a member before, now back
      measured = known.has_value() || (rejoins && !shared && lan != duration::max());
    } else if (auto tg = find_tree({g, k}); tg && tg->parent() != no_proc) {
      to = tg->parent();
      rtt = tg->rtt_parent();
      bw = tg->bw_parent();
    }
    any = hint(*tj, {to}, rtt, bw, 0, measured) || any;
  }
  if (any)
    ask_step_parents(out);
  answer_deferred(out);
  after_steps(now, out); // measures for a tree still without parent or seed
}

proc_id supervisor::effective_parent(const tree_state& t) const {
  if (t.parent() != no_proc)
    return t.parent();
  auto i = steps_.find(t.key());
  return i == steps_.end() ? no_proc : i->second.to;
}

std::vector<proc_id> supervisor::heirs(const tree_state& t) const {
  // The child that replaces us under our parent: a LAN child first (the WAN edge we
  // had to our parent is then replaced by one WAN edge from the same LAN), then the
  // best measured (bandwidth trees: widest; latency trees: nearest), then the largest
  // subtree, then the smallest id.
  auto key = [&](proc_id c, const vnode_set& vs) {
    auto bw = measured_bw(c).value_or(0);
    auto rtt = measured_rtt(c).value_or(duration::max());
    double fig = t.key().kind == tree_kind::bandwidth ? bw : -static_cast<double>(rtt.count());
    bool measured = t.key().kind == tree_kind::bandwidth ? bw > 0 : rtt != duration::max();
    return std::make_tuple(is_local(c), measured, fig, vs.size());
  };
  std::vector<proc_id> ranked;
  for (auto& [c, vs] : t.children())
    ranked.push_back(c);
  std::stable_sort(ranked.begin(), ranked.end(), [&](proc_id a, proc_id b) {
    return key(a, t.children().at(a)) > key(b, t.children().at(b));
  });
  return ranked;
}

void supervisor::hand_over_trees(outbox& out) {
  // Every child of every tree is told where to go (orphan with a step-parent): the heir
  // to our parent, the other children to the heir. The heir's subtree holds none of its
  // siblings and our parent is not below the heir, so no cycle is made; concurrent
  // changes are caught by the usual checks (adopt_request, tree_update paths).
  farewell_trees_.clear();
  std::map<proc_id, wire::orphan> orphans;
  for (auto& t : trees_) {
    if (!t || t->is_root())
      continue; // trees rooted here vanish with us
    auto up = effective_parent(*t);
    farewell_trees_[t->key()] = up;
    if (t->children().empty())
      continue;
    if (up == no_proc) {
      for (auto& [c, vs] : t->children()) {
        orphans[c].trees.push_back(t->key());
        orphans[c].steps.emplace_back();
      }
      continue;
    }
    // Ancestors to fall back on: our parent (or step-parent), then its own, up the path
    // (when many leave at once, whole stretches of it may be gone).
    constexpr std::size_t max_ancestors = 8;
    std::vector<proc_id> ancestors{up};
    if (t->parent() != no_proc) {
      auto path = t->path();
      for (std::size_t i = 1; i < path.size() && ancestors.size() < max_ancestors; ++i)
        ancestors.push_back(path[i]);
    } else if (auto s = steps_.find(t->key()); s != steps_.end()) {
      for (auto a : s->second.next)
        if (ancestors.size() < max_ancestors)
          ancestors.push_back(a);
    }
    auto ranked = heirs(*t);
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      auto c = ranked[r];
      std::vector<proc_id> steps(ranked.begin(),
                                 ranked.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(r, 2)));
      steps.insert(steps.end(), ancestors.begin(), ancestors.end());
      auto& o = orphans[c];
      o.trees.push_back(t->key());
      o.steps.push_back(std::move(steps));
    }
  }
  for (auto& [c, o] : orphans)
    send(out, c, std::move(o));
}

void supervisor::refuse_adoption(proc_id from, const wire::adopt_request& m, outbox& out) {
  // A leaving or left processor never adopts: it points the asker to where it would
  // send a child of its own (its parent or step-parent in that tree).
  wire::adopt_reply no{m.seq, {}};
  for (auto& e : m.trees) {
    proc_id to = no_proc;
    if (status_ == status::left) {
      if (auto i = farewell_trees_.find(e.tree); i != farewell_trees_.end())
        to = i->second;
    } else if (auto t = find_tree(e.tree)) {
      to = effective_parent(*t);
    }
    no.verdicts.push_back({e.tree, false, {}, to == from ? no_proc : to});
  }
  send(out, from, std::move(no));
}

void supervisor::answer_deferred(outbox& out) {
  auto held = std::move(deferred_);
  deferred_.clear();
  for (auto& h : held) {
    wire::adopt_reply reply{h.seq, {}};
    held_request still{h.from, h.seq, {}};
    for (auto& e : h.trees) {
      if (status_ != status::member) {
        proc_id to = no_proc;
        if (auto i = farewell_trees_.find(e.tree); i != farewell_trees_.end())
          to = i->second;
        else if (auto t = find_tree(e.tree))
          to = effective_parent(*t);
        reply.verdicts.push_back({e.tree, false, {}, to == h.from ? no_proc : to});
      } else if (auto t = find_tree(e.tree); t && awaiting(*t)) {
        still.trees.push_back(e); // ours is still pending
      } else {
        reply.verdicts.push_back(judge(h.from, e));
      }
    }
    if (!reply.verdicts.empty())
      send(out, h.from, std::move(reply));
    if (!still.trees.empty())
      deferred_.push_back(std::move(still));
  }
}

void supervisor::ask_step_parents(outbox& out) {
  if (status_ != status::member)
    return;
  std::map<proc_id, std::vector<wire::subtree_entry>> wanted;
  std::map<proc_id, std::uint64_t> seqs;
  for (auto i = steps_.begin(); i != steps_.end();) {
    auto t = find_tree(i->first);
    if (!t || t->connected()) {
      i = steps_.erase(i);
      continue;
    }
    auto& h = i->second;
    if (h.asked == 0) {
      // One request per candidate in flight: a candidate already asked for other trees
      // is asked again for these once it has answered.
      bool busy_cand = std::any_of(asks_.begin(), asks_.end(),
                                   [&](auto& a) { return a.second.cand == h.to; });
      if (!busy_cand || seqs.count(h.to)) {
        auto& seq = seqs[h.to];
        if (seq == 0)
          seq = next_seq_++;
        h.asked = seq;
        wanted[h.to].push_back({i->first, t->subtree(reported_own())});
      }
    }
    ++i;
  }
  for (auto& [cand, entries] : wanted) {
    auto seq = seqs[cand];
    step_ask a{cand, {}, {}};
    for (auto& e : entries) {
      a.trees.push_back(e.tree);
      a.offered[e.tree] = e.vnodes;
    }
    asks_[seq] = std::move(a);
    ++hinted_adoptions_;
    send(out, cand, wire::adopt_request{seq, std::move(entries)});
    out.timers.push_back({cfg_.probe_timeout, token_for(seq, token_timeout)});
  }
}

void supervisor::on_step_reply(timestamp now, std::uint64_t seq, const wire::adopt_reply* m,
                               outbox& out) {
  auto a = asks_.find(seq);
  if (a == asks_.end())
    return;
  auto cand = a->second.cand;
  std::vector<tree_key> answered;
  bool any = false;
  std::map<proc_id, wire::release> releases;
  auto verdict_for = [&](tree_key k) -> const wire::adopt_verdict* {
    if (!m)
      return nullptr;
    for (auto& v : m->verdicts)
      if (v.tree == k)
        return &v;
    return nullptr;
  };
  for (auto k : a->second.trees) {
    auto v = verdict_for(k);
    if (m && !v)
      continue; // answered later (the candidate waits for its own step-parent)
    answered.push_back(k);
    auto s = steps_.find(k);
    auto t = find_tree(k);
    bool ours = s != steps_.end() && s->second.asked == seq;
    if (v && v->accepted) {
      if (!ours || !t || t->connected()) {
        // Found a parent meanwhile (undo this adoption), unless it is this very one (an
        // earlier answer to a repeated request).
        if (!t || t->parent() != cand)
          releases[cand].trees.push_back(k);
        if (ours)
          steps_.erase(s);
        continue;
      }
      const bool was = t->reattaching();
      t->set_parent(cand, s->second.rtt, s->second.bw, v->info);
      note_reattaching(now, *t, was);
      t->set_reported(a->second.offered[k]); // what the parent now holds for us
      mark_info(*t);
      mark_subtree(*t);
      event(out, tree_event::kind::parent_changed, now, k, no_proc, cand);
      // A seed's figures are the edge's own (copied from the giver's tree): nothing to
      // measure; a step-parent's are the lost edge's, a guess to be measured.
      if (!s->second.measured)
        any = true;
      steps_.erase(s);
      continue;
    }
    if (!ours)
      continue;
    constexpr int max_redirects = 4;
    auto& h = s->second;
    if (v && t && v->redirect != cand && h.hops < max_redirects) {
      auto then = h.next;
      then.insert(then.begin(), v->redirect);
      if (hint(*t, std::move(then), h.rtt, h.bw, h.hops + 1))
        continue; // ask where the refusal pointed
    }
    next_step(k); // the next step-parent; with none left, measure as usual
  }
  auto& left = a->second.trees;
  left.erase(std::remove_if(left.begin(), left.end(),
                            [&](tree_key k) {
                              return std::find(answered.begin(), answered.end(), k)
                                     != answered.end();
                            }),
             left.end());
  if (left.empty())
    asks_.erase(a);
  for (auto& [p, r] : releases)
    send(out, p, std::move(r));
  if (any) {
    schedule_.progress(decision_.extra_from_last_change && !settling_);
    if (std::find(remeasure_.begin(), remeasure_.end(), cand) == remeasure_.end())
      remeasure_.push_back(cand); // adopted without a measurement: measure it next
  }
  if (any)
    repaired_ = true;
  answer_deferred(out);
  ask_step_parents(out);
  after_steps(now, out);
}

void supervisor::after_steps(timestamp now, outbox& out) {
  // A tree left without parent or step-parent calls for measuring at once; once every
  // step-parent has answered, measuring improves what the repair made (the new parents
  // are measured first: remeasure_).
  bool lost = std::any_of(trees_.begin(), trees_.end(), [&](auto& t) {
    return t && !t->connected() && !steps_.count(t->key()) && !unseeded_.count(t->key().root);
  });
  if (lost || (steps_.empty() && repaired_)) {
    repaired_ = false;
    trigger(now, out);
  } else {
    maybe_probe(now, out);
  }
}

void supervisor::leave_all_trees(timestamp now, outbox& out) {
  std::map<proc_id, wire::release> releases;
  std::map<proc_id, wire::orphan> orphans;
  for (auto& t : trees_) {
    if (!t)
      continue;
    if (t->parent() != no_proc) {
      releases[t->parent()].trees.push_back(t->key());
      lose_parent(now, *t, out);
    }
    std::vector<proc_id> kids;
    for (auto& [c, vs] : t->children())
      kids.push_back(c);
    for (auto c : kids) {
      orphans[c].trees.push_back(t->key());
      t->remove_child(c);
    }
    mark_subtree(*t);
  }
  for (auto& [p, r] : releases)
    send(out, p, std::move(r));
  for (auto& [c, o] : orphans)
    send(out, c, std::move(o));
}

void supervisor::lose_parent(timestamp now, tree_state& t, outbox& out) {
  auto old = t.parent();
  t.clear_parent();
  event(out, tree_event::kind::parent_changed, now, t.key(), old, no_proc);
  if (t.key().kind == tree_kind::bandwidth)
    mark_info(t); // the children hear `connected` false: their figures are of a lost path
}

void supervisor::note_reattaching(timestamp now, tree_state& t, bool was) {
  if (t.reattaching() && !was)
    t.set_reattaching_since(now);
}

bool supervisor::hold_move(timestamp now, const tree_state& t, duration rtt,
                           const rule_context& ctx) const {
  return t.key().kind == tree_kind::bandwidth && t.reattaching()
         && now - t.reattaching_since() < cfg_.reattach_hold && !ctx.local(rtt);
}

bool supervisor::busy() const noexcept {
  return schedule_.active() || probe_.has_value() || flush_pending_ || !unseeded_.empty()
         || !lent_.empty() || status_ == status::leaving || status_ == status::joining;
}

void supervisor::report_busy(timestamp now, outbox& out) {
  if (busy() == reported_busy_)
    return;
  reported_busy_ = !reported_busy_;
  event(out, reported_busy_ ? tree_event::kind::busy : tree_event::kind::idle, now);
}

void supervisor::trigger(timestamp now, outbox& out) {
  if (status_ != status::member)
    return;
  if (!schedule_.active())
    round_probed_.clear(); // a new round
  schedule_.trigger();
  maybe_probe(now, out);
}

void supervisor::mark_info(const tree_state& t) {
  auto i = index_of(t.key());
  if (!is_dirty_info_[i]) {
    is_dirty_info_[i] = true;
    dirty_info_.push_back(i);
  }
}

void supervisor::mark_subtree(const tree_state& t) {
  auto i = index_of(t.key());
  if (!is_dirty_subtree_[i]) {
    is_dirty_subtree_[i] = true;
    dirty_subtree_.push_back(i);
  }
}

void supervisor::mark_all_subtrees() {
  for (auto& t : trees_)
    if (t)
      mark_subtree(*t);
}

void supervisor::flush(outbox& out) {
  if (dirty_info_.empty() && dirty_subtree_.empty())
    return;
  if (cfg_.update_delay.count() == 0 || status_ != status::member) {
    flush_now(out);
    return;
  }
  if (!flush_pending_) {
    flush_pending_ = true;
    out.timers.push_back({cfg_.update_delay, token_for(0, token_flush)});
  }
}

void supervisor::flush_now(outbox& out) {
  std::map<proc_id, wire::tree_update> updates;
  for (auto i : dirty_info_) {
    is_dirty_info_[i] = false;
    if (!trees_[i] || trees_[i]->children().empty())
      continue;
    auto info = trees_[i]->info();
    for (auto& [c, vs] : trees_[i]->children())
      updates[c].trees.push_back(info);
  }
  dirty_info_.clear();
  std::map<proc_id, wire::subtree_update> subtrees;
  for (auto i : dirty_subtree_) {
    is_dirty_subtree_[i] = false;
    auto& t = trees_[i];
    if (!t || t->parent() == no_proc)
      continue;
    auto s = t->subtree(reported_own());
    if (s == t->reported())
      continue;
    t->set_reported(s);
    subtrees[t->parent()].trees.push_back({t->key(), std::move(s)});
  }
  dirty_subtree_.clear();
  for (auto& [c, m] : updates)
    send(out, c, std::move(m));
  for (auto& [p, m] : subtrees)
    send(out, p, std::move(m));
}

void supervisor::send(outbox& out, proc_id to, wire::message m) {
  out.sends.push_back(wire::envelope{self_, to, std::move(m)});
}

void supervisor::event(outbox& out, tree_event::kind what, timestamp now, tree_key k,
                       proc_id old_parent, proc_id new_parent) {
  tree_event e;
  e.what = what;
  e.tree = k;
  e.old_parent = old_parent;
  e.new_parent = new_parent;
  e.at = now;
  out.events.push_back(std::move(e));
}

// --- API: every entry point ends by reporting busy/idle -------------------------

void supervisor::found(timestamp now, const std::vector<wire::member>& members,
                       const routing_table& routes, outbox& out) {
  do_found(now, members, routes, out);
  adopt_orphans(now, out);
  report_busy(now, out);
}

void supervisor::join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out) {
  do_join(now, contact, wanted, out);
  adopt_orphans(now, out);
  report_busy(now, out);
}

std::optional<error> supervisor::leave(timestamp now, proc_id recipient, outbox& out) {
  auto result = do_leave(now, recipient, out);
  adopt_orphans(now, out);
  report_busy(now, out);
  return result;
}

void supervisor::on_message(timestamp now, proc_id from, const wire::message& m, outbox& out) {
  do_message(now, from, m, out);
  adopt_orphans(now, out);
  report_busy(now, out);
}

void supervisor::on_timer(timestamp now, std::uint64_t token, outbox& out) {
  do_timer(now, token, out);
  adopt_orphans(now, out);
  report_busy(now, out);
}

void supervisor::on_unreachable(timestamp now, proc_id p, outbox& out) {
  if ((status_ == status::member || status_ == status::leaving) && is_member(p)) {
    declare_crashed(now, p, out);
    flush(out);
  }
  adopt_orphans(now, out);
  report_busy(now, out);
}

proc_id supervisor::adopter_of(proc_id dead) const {
  auto i = std::upper_bound(members_.begin(), members_.end(), dead);
  for (std::size_t n = 0; n < members_.size(); ++n, ++i) {
    if (i == members_.end())
      i = members_.begin();
    if (*i != dead)
      return *i;
  }
  return no_proc;
}

void supervisor::declare_crashed(timestamp now, proc_id p, outbox& out) {
  if (p == self_ || !is_member(p))
    return;
  auto inc = member_info_[p].incarnation;
  tree_event e;
  e.what = tree_event::kind::crash_detected;
  e.at = now;
  e.peer = p;
  out.events.push_back(std::move(e));
  // Everybody hears it from us (a member_left sent by a third party, without routes):
  // the adopter among them claims p's vnodes; and p, should it be alive after all, learns
  // that it lost them.
  for (auto m : members_)
    if (m != self_ && m != p)
      send(out, m, wire::member_left{p, {}, inc});
  send(out, p, wire::member_left{p, {}, inc});
  depart(now, p, inc, out);
  // A leave waiting on an offer to p goes on at once.
  for (auto& [seq, o] : offers_)
    if (o.to == p) {
      offer_resolved(now, seq, false, out);
      break;
    }
}

void supervisor::refute(timestamp now, proc_id by, outbox& out) {
  // Come back as a new incarnation, which nobody has buried.
  me_.incarnation = (rng_() ^ cfg_.incarnation_salt) | 1;
  add_member(me_);
  for (auto p : members_)
    if (p != self_)
      send(out, p, wire::member_joined{me_});
  // Our vnodes are the adopter's now (its claim has a higher epoch than ours): stop
  // taking them for ours at once; the claim itself reaches us as a routing_update.
  auto lost = own_;
  std::vector<routing_table::run> mine;
  for (auto& r : routes_.runs())
    if (r.owner == self_)
      mine.push_back(r);
  for (auto& r : mine)
    routes_.assign(vnode_set::range(r.lo, r.hi), no_proc, r.epoch);
  set_own(routes_.owned_by(self_));
  report_disowned(now, by, std::move(lost), out);
  // Whoever buried us dropped us as parent and child: start over in every tree.
  leave_all_trees(now, out);
  trigger(now, out);
}

void supervisor::adopt_orphans(timestamp now, outbox& out) {
  if (orphans_.empty() || status_ != status::member)
    return;
  std::map<proc_id, vnode_set> due; // ours to claim now, by crashed owner: one claim each
  for (auto i = orphans_.begin(); i != orphans_.end();) {
    auto& o = i->route;
    // The part still named as the crashed owner's at the recorded epoch.
    std::vector<vnode_set::interval> xs;
    for (auto& r : routes_.runs())
      if (r.owner == o.owner && r.epoch == o.epoch)
        xs.push_back({r.lo, r.hi});
    auto still = o.vnodes & vnode_set::from_intervals(std::move(xs));
    if (still.empty()) {
      i = orphans_.erase(i); // moved on: claimed by the adopter, or handed over before
      continue;
    }
    if (now - i->since < cfg_.adopt_delay || adopter_of(o.owner) != self_) {
      i->route.vnodes = std::move(still);
      ++i;
      continue;
    }
    due[o.owner] |= still;
    i = orphans_.erase(i);
  }
  for (auto& [dead, vnodes] : due) {
    wire::route_entry entry{vnodes, self_, next_epoch(vnodes)};
    apply_routes({entry});
    for (auto m : members_)
      if (m != self_)
        send(out, m, wire::routing_update{{entry}});
    if (!is_member(dead))
      send(out, dead, wire::routing_update{{entry}}); // alive after all? it learns
    tree_event e;
    e.what = tree_event::kind::adopted;
    e.at = now;
    e.peer = dead;
    e.vnodes = vnodes;
    out.events.push_back(std::move(e));
  }
  if (!due.empty())
    flush(out);
}

void supervisor::start_watch(outbox& out) {
  if (cfg_.crash_timeout.count() <= 0 || watching_)
    return;
  watching_ = true;
  out.timers.push_back({cfg_.crash_timeout / 4, token_for(++watch_gen_, token_watch)});
}

void supervisor::watch(timestamp now, outbox& out) {
  auto succ = adopter_of(self_); // the next member after us, wrapping around
  if (succ == self_ || succ == no_proc) {
    watched_ = no_proc;
    return;
  }
  // A tick long overdue means that we ourselves did not run (the process was stopped or
  // starved): the silence we saw is ours, not the successor's. Give it a fresh period.
  const bool we_slept = now - last_watch_ > cfg_.crash_timeout / 2;
  last_watch_ = now;
  if (succ != watched_ || we_slept) {
    watched_ = succ;
    heard_ = now;
  } else if (now - heard_ >= cfg_.crash_timeout) {
    watched_ = no_proc;
    declare_crashed(now, succ, out);
    flush(out);
    return;
  }
  send(out, succ, wire::ping{watch_seq});
}


void supervisor::do_found(timestamp now, const std::vector<wire::member>& members,
                       const routing_table& routes, outbox& out) {
  me_.id = self_;
  for (auto& m : members) {
    if (m.id == self_)
      me_ = m;
    add_member(m);
  }
  add_member(me_);
  routes_ = routes;
  status_ = status::member;
  set_own(routes_.owned_by(self_));
  event(out, tree_event::kind::joined, now);
  start_watch(out);
  trigger(now, out);
  flush(out);
}

void supervisor::do_join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out) {
  if (status_ != status::idle && status_ != status::left)
    return;
  status_ = status::joining;
  // Kept after a leave, for the engines (measured_rtt), and into the memory of paths
  // then (finish_leave): members admitted again get theirs back (add_member).
  figures_.clear();
  steps_.clear();
  deferred_.clear();
  asks_.clear();
  remeasure_.clear();
  round_probed_.clear();
  farewell_trees_.clear();
  givers_.clear();
  await_giver_ = false;
  unseeded_.clear();
  giver_of_.clear();
  shared_to_.clear();
  given_to_.clear();
  chain_tail_.clear();
  lent_.clear();
  settling_ = repair_round_ = false;
  me_.id = self_;
  me_.incarnation = (rng_() ^ cfg_.incarnation_salt) | 1; // a new one every join (0: founders)
  add_member(me_);
  contact_ = contact;
  wanted_ = wanted;
  join_attempts_ = 1;
  send(out, contact, wire::join_request{me_, wanted});
  out.timers.push_back({cfg_.probe_timeout, token_for(1 + join_attempts_, token_flush)});
  (void) now;
}

std::optional<error> supervisor::do_leave(timestamp now, proc_id recipient, outbox& out) {
  if (status_ != status::member)
    return make_error(errc::invalid_argument, "processor " + std::to_string(self_) +
                                                  " is not a member and cannot leave");
  if (members_.size() < 2)
    return make_error(errc::invalid_argument, "processor " + std::to_string(self_) +
                                                  " is the last member: nobody can take its vnodes");
  status_ = status::leaving;
  probe_.reset();
  refused_.clear();
  rank_nearest();
  offered_to_ = recipient;
  offer_vnodes(now, out);
  return std::nullopt;
}

void supervisor::rank_nearest() {
  // By the RTT measured, or, for a member not measured, by our distance from it along
  // its latency tree (one way: the RTTs of a LAN are below the wide-area ones, a LAN's
  // tree paths mostly below them too). Half of a LAN leaving at once refuse one another,
  // and a leaver that had measured few of its LAN went on to the nearest member it had
  // measured, across a wide-area link (paper-4c160, seed 2: processor 115's vnodes went
  // to 64, in another cluster, and after its rejoin every broadcast entered its cluster
  // twice, once through 64).
  std::vector<std::pair<duration, proc_id>> ranked;
  for (auto m : members_) {
    if (m == self_)
      continue;
    auto d = measured_rtt(m);
    if (!d)
      if (auto* t = tree({m, tree_kind::latency}); t && t->connected())
        d = t->dist();
    if (d)
      ranked.emplace_back(*d, m);
  }
  std::sort(ranked.begin(), ranked.end());
  nearest_.clear();
  for (auto& r : ranked)
    nearest_.push_back(r.second);
}

void supervisor::offer_vnodes(timestamp now, outbox& out) {
  // Vnodes still on offer to a newcomer must not be offered twice: wait for the
  // answers (offer_resolved calls us again).
  for (auto& [seq, o] : offers_)
    if (!o.leaving)
      return;
  if (own_.empty()) {
    finish_leave(now, {}, out);
    return;
  }
  auto usable = [&](proc_id p) {
    return p != no_proc && p != self_ && is_member(p)
           && std::find(refused_.begin(), refused_.end(), p) == refused_.end();
  };
  auto to = offered_to_;
  if (!usable(to)) {
    // The nearest member (likely in the same cluster, see rank_nearest), else any.
    to = no_proc;
    for (auto m : nearest_)
      if (usable(m)) {
        to = m;
        break;
      }
    if (to == no_proc) {
      std::vector<proc_id> others;
      for (auto m : members_)
        if (usable(m))
          others.push_back(m);
      if (others.empty()) {
        // Everybody else refused (they are all leaving): stay a member.
        status_ = status::member;
        offered_to_ = no_proc;
        trigger(now, out);
        return;
      }
      to = others[std::uniform_int_distribution<std::size_t>(0, others.size() - 1)(rng_)];
    }
  }
  offered_to_ = to;
  offer(own_, to, true, out);
}

void supervisor::on_vnode_handover(timestamp now, proc_id from, const wire::vnode_handover& m,
                                   outbox& out) {
  // Take the vnodes only while staying: a leaving processor would lose them.
  bool take = status_ == status::member && m.route.owner == self_;
  if (take)
    apply_routes({m.route});
  send(out, from, wire::vnode_handover_ack{m.route.epoch, take});
  auto asked = std::find(givers_.begin(), givers_.end(), from);
  if (!take || asked == givers_.end())
    return;
  givers_.erase(asked);
  bool waited = await_giver_;
  await_giver_ = false;
  // A joiner first attaches under the member that gave it vnodes, in every tree still
  // without a parent: a LAN edge (it held our vnodes while we were away, or is our
  // contact), no change to the rest of the tree; the vnodes move down one edge by the
  // usual subtree updates. Measurements improve the place later.
  auto rtt = measured_rtt(from).value_or(duration{0});
  auto bw = measured_bw(from).value_or(0);
  // Placed where our vnodes were: measuring only improves that, with the paper's count
  // of extra probes.
  settling_ = true;
  bool any = false;
  for (auto& t : trees_)
    if (t && !steps_.count(t->key()))
      any = hint(*t, {from}, rtt, bw) || any;
  if (any)
    ask_step_parents(out);
  else if (waited)
    trigger(now, out);
}

void supervisor::on_vnode_handover_ack(timestamp now, proc_id from,
                                       const wire::vnode_handover_ack& m, outbox& out) {
  for (auto& [seq, o] : offers_)
    if (o.to == from && o.epoch == m.epoch) {
      offer_resolved(now, seq, m.accepted, out);
      return;
    }
}

void supervisor::finish_leave(timestamp now, std::vector<wire::route_entry> routes,
                              outbox& out) {
  // Children first (messages between two processors arrive in order): they learn their
  // step-parents before they hear that we left.
  hand_over_trees(out);
  for (auto m : members_)
    if (m != self_)
      send(out, m, wire::member_left{self_, routes, me_.incarnation});
  farewell_ = routes;
  status_ = status::left;
  probe_.reset();
  schedule_ = measurement_schedule(cfg_.extra_measurements);
  flush_pending_ = false;
  // Forget everything but the paths measured: a later join starts afresh.
  for (auto& [p, f] : figures_)
    if (auto i = member_info_.find(p); i != member_info_.end())
      remember_path(p, i->second.address, f);
  routes_ = routing_table{};
  own_.clear();
  trees_.clear();
  dirty_info_.clear();
  dirty_subtree_.clear();
  is_dirty_info_.clear();
  is_dirty_subtree_.clear();
  members_.clear();
  is_member_.clear();
  member_info_.clear();
  strikes_.clear();
  sponsored_.clear();
  refused_.clear();
  nearest_.clear();
  offers_.clear();
  offered_to_ = no_proc;
  orphans_.clear();
  watched_ = no_proc;
  steps_.clear();
  asks_.clear();
  remeasure_.clear();
  givers_.clear();
  unseeded_.clear();
  giver_of_.clear();
  shared_to_.clear();
  given_to_.clear();
  chain_tail_.clear();
  lent_.clear();
  answer_deferred(out); // refusals, pointing on (farewell_trees_)
  event(out, tree_event::kind::left, now);
}

// --- events ------------------------------------------------------------------

void supervisor::do_timer(timestamp now, std::uint64_t token, outbox& out) {
  if (token % token_kinds == token_flush && token / token_kinds >= 2) { // a join attempt timed out
    if (status_ == status::member && await_giver_
        && token / token_kinds == static_cast<std::uint64_t>(1 + giver_wait_attempt)) {
      await_giver_ = false; // no giver placed us: measure
      trigger(now, out);
      return;
    }
    if (status_ != status::joining || token / token_kinds != static_cast<std::uint64_t>(1 + join_attempts_))
      return;
    if (join_attempts_ < 3) {
      ++join_attempts_;
      send(out, contact_, wire::join_request{me_, wanted_});
      out.timers.push_back({cfg_.probe_timeout, token_for(1 + join_attempts_, token_flush)});
    } else {
      status_ = status::idle;
      members_.clear();
      is_member_.clear();
      trees_.clear();
      event(out, tree_event::kind::join_failed, now);
    }
    return;
  }
  if (token % token_kinds == token_flush) {
    flush_pending_ = false;
    if (status_ == status::member || status_ == status::leaving)
      flush_now(out);
    return;
  }
  if (token % token_kinds == token_watch) {
    if (token / token_kinds != watch_gen_)
      return;
    watching_ = false;
    if (status_ == status::member) {
      watch(now, out);
      start_watch(out);
    }
    return;
  }
  if (token % token_kinds == token_adopt)
    return; // adopt_orphans runs after every timer
  if (token % token_kinds == token_lend) {
    if (lent_.erase(token / token_kinds) > 0) {
      mark_all_subtrees();
      flush(out);
    }
    return;
  }
  if (token % token_kinds == token_seed) {
    // No seed for this newcomer's trees in time: answer what we held for them (refused
    // where we have no parent), and measure for trees still without one.
    if (unseeded_.erase(static_cast<proc_id>(token / token_kinds)) && status_ == status::member) {
      answer_deferred(out);
      after_steps(now, out);
      flush(out);
    }
    return;
  }
  if (token % token_kinds == token_offer) {
    // The recipient of an offer did not answer: as good as a refusal.
    offer_resolved(now, token / token_kinds, false, out);
    flush(out);
    return;
  }
  if (token % token_kinds == token_timeout && asks_.count(token / token_kinds)) {
    on_step_reply(now, token / token_kinds, nullptr, out); // a step-parent did not answer
    flush(out);
    return;
  }
  if (!probe_ || token / token_kinds != probe_->seq)
    return; // belongs to a probe that already ended
  if (token % token_kinds == token_start) {
    if (probe_->at == probe::phase::pause)
      start_probe(now, out);
  } else {
    // Unanswered: after `probe_strikes` in a row, the candidate is taken to be gone.
    auto cand = probe_->cand;
    if (cfg_.probe_strikes > 0 && ++strikes_[cand] >= cfg_.probe_strikes && is_member(cand)) {
      strikes_.erase(cand);
      probe_.reset();
      ++probes_abandoned_;
      declare_crashed(now, cand, out); // may finish the probe
      maybe_probe(now, out);
    } else {
      finish_probe(now, false, out);
    }
  }
  flush(out);
}

void supervisor::do_message(timestamp now, proc_id from, const wire::message& m, outbox& out) {
  now_ = now;
  if (from == watched_)
    heard_ = now; // anything at all shows the watched successor alive
  if (status_ == status::left) {
    // Gone, but a step-parent hint may still name us: point the asker on.
    if (auto* a = std::get_if<wire::adopt_request>(&m)) {
      refuse_adoption(from, *a, out);
    } else if (auto* h = std::get_if<wire::vnode_handover>(&m)) {
      send(out, from, wire::vnode_handover_ack{h->route.epoch, false}); // cannot take them
    } else if (auto* o = std::get_if<wire::orphan>(&m)) {
      for (std::size_t i = 0; i < o->trees.size() && i < o->steps.size(); ++i)
        if (auto f = farewell_trees_.find(o->trees[i]);
            f != farewell_trees_.end() && f->second == from && !o->steps[i].empty()
            && o->steps[i].front() != self_)
          f->second = o->steps[i].front();
    }
    return;
  }
  if (status_ == status::idle)
    return;
  if (status_ == status::leaving && (std::holds_alternative<wire::adopt_request>(m)
                                     || std::holds_alternative<wire::bw_request>(m))) {
    // Nobody should pick a leaving processor as parent: refuse, pointing on.
    if (auto* a = std::get_if<wire::adopt_request>(&m)) {
      refuse_adoption(from, *a, out);
    } else {
      wire::bw_reply empty;
      empty.seq = std::get<wire::bw_request>(m).seq;
      empty.padding = static_cast<std::uint32_t>(wire::bw_probe_bytes - wire::wire_size(empty));
      send(out, from, std::move(empty));
    }
    flush(out);
    return;
  }
  std::visit(
    [&](auto& msg) {
      using T = std::decay_t<decltype(msg)>;
      if constexpr (std::is_same_v<T, wire::ping>) {
        send(out, from, wire::pong{msg.seq});
      } else if constexpr (std::is_same_v<T, wire::pong>) {
        on_pong(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::bw_request>) {
        on_bw_request(from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::bw_reply>) {
        on_bw_reply(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::adopt_request>) {
        on_adopt_request(from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::adopt_reply>) {
        on_adopt_reply(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::release>) {
        for (auto k : msg.trees)
          if (auto t = find_tree(k); t && t->remove_child(from))
            mark_subtree(*t);
      } else if constexpr (std::is_same_v<T, wire::orphan>) {
        bool unhinted = false, hinted = false;
        for (std::size_t i = 0; i < msg.trees.size(); ++i) {
          auto t = find_tree(msg.trees[i]);
          if (!t || t->parent() != from)
            continue;
          // Until the step-parent is measured, assume the edge is like the one lost
          // (the heir and its siblings share a LAN).
          auto steps = i < msg.steps.size() ? msg.steps[i] : std::vector<proc_id>{};
          auto first = steps.empty() ? no_proc : steps.front();
          auto rtt = measured_rtt(first).value_or(t->rtt_parent());
          auto bw = measured_bw(first).value_or(t->bw_parent());
          lose_parent(now, *t, out);
          if (hint(*t, std::move(steps), rtt, bw))
            hinted = true;
          else
            unhinted = true;
        }
        // Measuring starts at once too (hooks_.measure_during_repair; probes leave the
        // trees a step-parent is asked in alone), else once the step-parents answered
        // (on_step_reply), unless some tree has none to ask.
        if (hinted) {
          ask_step_parents(out);
          repair_round_ = true; // placed by the repair: improve it within the LAN
        }
        if (unhinted || (hinted && hooks_.measure_during_repair))
          trigger(now, out);
      } else if constexpr (std::is_same_v<T, wire::tree_update>) {
        on_tree_update(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::subtree_update>) {
        for (auto& e : msg.trees)
          if (auto t = find_tree(e.tree); t && t->has_child(from)) {
            t->set_child(from, e.vnodes);
            mark_subtree(*t);
          }
      } else if constexpr (std::is_same_v<T, wire::join_request>) {
        on_join_request(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::join_accept>) {
        on_join_accept(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::member_joined>) {
        on_member_joined(now, from, msg.who, out);
      } else if constexpr (std::is_same_v<T, wire::member_left>) {
        if (msg.who == self_) {
          // Somebody took us for crashed: refute it (a notice about an earlier
          // incarnation of ours is stale and changes nothing).
          if (from != self_ && msg.incarnation == me_.incarnation && status_ == status::member)
            refute(now, from, out);
          return;
        }
        apply_told_routes(now, from, msg.routes, out);
        if (depart(now, msg.who, msg.incarnation, out))
          for (auto s : sponsored(now))
            if (s != msg.who && s != from)
              send(out, s, msg);
      } else if constexpr (std::is_same_v<T, wire::handover_request>) {
        // A leaving processor keeps its vnodes for the recipient it chose.
        if (status_ == status::member && is_member(msg.to))
          hand_over(msg.vnodes.empty() ? share_of_own() : msg.vnodes & own_, msg.to, out,
                    msg.vnodes.empty());
      } else if constexpr (std::is_same_v<T, wire::vnode_handover>) {
        on_vnode_handover(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::vnode_handover_ack>) {
        on_vnode_handover_ack(now, from, msg, out);
      } else if constexpr (std::is_same_v<T, wire::routing_update>) {
        note_givers(now, msg.routes, out);
        if (apply_told_routes(now, from, msg.routes, out))
          for (auto s : sponsored(now))
            if (s != from)
              send(out, s, msg);
      }
    },
    m);
  flush(out);
}

// --- probing -----------------------------------------------------------------

void supervisor::maybe_probe(timestamp now, outbox& out) {
  if (probe_ || status_ != status::member)
    return;

  // Trees waiting for their seed do not keep the schedule going (they get a parent
  // without probing, or measuring starts for them after `seed_wait`).
  const bool parented = std::all_of(trees_.begin(), trees_.end(), [&](auto& t) {
    return !t || t->connected() || unseeded_.count(t->key().root);
  });
  const bool was_active = schedule_.active();
  if (!(members_.size() >= 2 && schedule_.next(parented))) {
    if (was_active)
      settling_ = repair_round_ = false;
    if (members_.size() < 2)
      schedule_ = measurement_schedule(cfg_.extra_measurements);
    return;
  }
  probe p;
  p.seq = next_seq_++;
  p.cand = no_proc;
  while (!remeasure_.empty() && p.cand == no_proc) {
    auto r = remeasure_.front();
    remeasure_.erase(remeasure_.begin());
    if (is_member(r) && r != self_)
      p.cand = r; // adopted without a measurement: measure it now
  }
  if (p.cand == no_proc)
    p.cand = pick_candidate(parented && (repair_round_ || settling_));
  round_probed_.push_back(p.cand);
  probe_ = std::move(p);
  auto pause = cfg_.probe_jitter.count() > 0
                 ? duration{std::uniform_int_distribution<duration::rep>(
                     0, cfg_.probe_jitter.count())(rng_)}
                 : duration{0};
  if (pause.count() == 0) {
    start_probe(now, out);
  } else {
    out.timers.push_back({pause, token_for(probe_->seq, token_start)});
  }
}

rule_context supervisor::context() const {
  rule_context ctx;
  ctx.variant = decision_.rules;
  ctx.local_factor = cfg_.local_factor;
  ctx.bw_margin = cfg_.bw_margin;
  ctx.per_child = cfg_.forward_overhead;
  ctx.lan_margin = cfg_.lan_margin;
  if (decision_.sender_capacity)
    ctx.sender_capacity = widest_;
  // The smallest RTT is the LAN's only once we have evidence of two classes of
  // peers (a spread of at least 4x); before that it may be a WAN RTT, and calling
  // WAN peers local would let WAN hops chain (and condition (I) would forbid
  // undoing it later).
  auto lo = duration::max(), hi = duration{0};
  std::size_t measured = 0;
  for (auto& [peer, fig] : figures_) {
    if (fig.rtt == duration::max() || !is_member(peer))
      continue;
    ++measured;
    lo = std::min(lo, fig.rtt);
    hi = std::max(hi, fig.rtt);
  }
  if (lo != duration::max() && hi >= lo * 4) {
    ctx.min_rtt = lo;
  } else if (measured > 0 && hi < cfg_.one_lan_rtt
             && measured >= std::min(cfg_.one_lan_peers, members_.size() - 1)) {
    // Enough members measured, all alike and LAN-fast: one LAN (processes on one host,
    // or one cluster). All are local, or (I) would freeze the first, random
    // attachments (on loopback: chains, 3 hops for 4 processes). The margin scales down
    // with the LAN's RTT, which may be far below the wide-area grids' it was set for.
    ctx.min_rtt = std::max(lo, std::chrono::duration_cast<duration>(hi / ctx.local_factor));
    ctx.lan_margin = std::min(ctx.lan_margin, lo / 2);
  }
  return ctx;
}

proc_id supervisor::pick_candidate(bool local_only) {
  if (local_only
      || (decision_.local_bias > 0
          && std::bernoulli_distribution(decision_.local_bias)(rng_))) {
    auto ctx = context();
    std::vector<proc_id> local;
    for (auto& [peer, fig] : figures_)
      if (peer != self_ && is_member(peer) && ctx.local(fig.rtt))
        local.push_back(peer);
    if (local_only && settling_) {
      // A joiner's round, kept to its LAN: each known LAN peer once before any again.
      // It sits under its giver, and learns most from the LAN peers it has not measured
      // since it joined. Repair rounds draw at random.
      std::vector<proc_id> fresh;
      for (auto q : local)
        if (std::find(round_probed_.begin(), round_probed_.end(), q) == round_probed_.end())
          fresh.push_back(q);
      if (!fresh.empty())
        local = std::move(fresh);
    }
    if (!local.empty())
      return local[std::uniform_int_distribution<std::size_t>(0, local.size() - 1)(rng_)];
  }
  // members_ is sorted and holds self_: draw among the others by skipping it.
  auto pick = std::uniform_int_distribution<std::size_t>(0, members_.size() - 2)(rng_);
  auto self_pos = static_cast<std::size_t>(
    std::lower_bound(members_.begin(), members_.end(), self_) - members_.begin());
  return members_[pick < self_pos ? pick : pick + 1];
}

void supervisor::start_probe(timestamp now, outbox& out) {
  probe_->at = probe::phase::ping;
  probe_->sent = now;
  send(out, probe_->cand, wire::ping{probe_->seq});
  out.timers.push_back({cfg_.probe_timeout, token_for(probe_->seq, token_timeout)});
}

void supervisor::finish_probe(timestamp now, bool completed, outbox& out) {
  probe_.reset();
  if (completed)
    ++probes_completed_;
  else
    ++probes_abandoned_;
  maybe_probe(now, out);
}

void supervisor::on_pong(timestamp now, proc_id from, const wire::pong& m, outbox& out) {
  if (!probe_ || probe_->seq != m.seq || probe_->cand != from)
    return;
  if (probe_->at == probe::phase::download) {
    probe_->mark = now; // the download's first frame: its transfer starts here
    return;
  }
  if (probe_->at != probe::phase::ping)
    return;
  strikes_.erase(from);
  probe_->rtt = now - probe_->sent;
  auto& f = figures_[from];
  f.rtt = std::min(f.rtt, probe_->rtt);
  probe_->at = probe::phase::download;
  probe_->sent = now;
  probe_->mark.reset();
  send(out, from, wire::bw_request{m.seq});
}

void supervisor::on_bw_request(proc_id from, const wire::bw_request& m, outbox& out) {
  wire::bw_reply reply;
  reply.seq = m.seq;
  reply.trees.reserve(members_.size() * tree_kind_count);
  for (auto& t : trees_)
    if (t)
      reply.trees.push_back(t->info());
  reply.members.reserve(member_info_.size());
  for (auto& [p, info] : member_info_)
    reply.members.push_back(info);
  for (auto& [p, incs] : tombstones_)
    for (auto inc : incs)
      reply.departed.push_back({p, {}, inc});
  reply.routes = routes_.snapshot();
  auto bare = wire::wire_size(reply);
  reply.padding = bare < wire::bw_probe_bytes
                    ? static_cast<std::uint32_t>(wire::bw_probe_bytes - bare)
                    : 0u;
  // The mark: a pong right before the reply, on the same path. The prober times the
  // reply from the mark's arrival, so neither the RTT nor the queue both waited in
  // counts as transfer time.
  send(out, from, wire::pong{m.seq});
  send(out, from, std::move(reply));
}

void supervisor::on_bw_reply(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out) {
  if (!probe_ || probe_->seq != m.seq || probe_->cand != from
      || probe_->at != probe::phase::download)
    return;
  // The download took one RTT plus the transfer itself. The RTT subtracted is the
  // smallest measured to this peer; when what is left is implausibly short (under an
  // eighth of the download: the RTT samples were inflated, e.g. a ping queued behind a
  // burst of the candidate's sends), the whole download time is taken, a rate that can
  // only be too low. Subtracting an inflated RTT left transfers of ~0 and rates of
  // 10^11 B/s, which the best-figure rule then kept for good: on paper-4c137 the
  // bandwidth trees fed a cluster through a 100 Mbit link for that reason.
  //
  // With the mark (a pong the candidate sent right before the reply, on the same path),
  // the transfer is the time from the mark's arrival to the reply's: the reply's own
  // bytes, at the rate the path gives it now. The RTT samples do not enter: every one
  // can be inflated by queues while broadcasts run (tiny-2c8: a best RTT of 36 ms on a
  // 2 ms link made a 100 Mbit link measure 191 Mbit, and the best-figure rule kept it,
  // so no local parent ever looked good enough again).
  auto elapsed = now - probe_->sent;
  duration transfer{0};
  if (probe_->mark) {
    transfer = now - *probe_->mark;
  } else {
    auto base_rtt = std::min(probe_->rtt, figures_[from].rtt);
    transfer = elapsed - base_rtt;
    if (transfer < elapsed / 8)
      transfer = elapsed;
  }
  transfer = std::max(transfer, duration{1000});
  auto bytes = static_cast<double>(wire::wire_size(wire::message{m}));
  probe_->bw = bytes * 1e9 / static_cast<double>(transfer.count());
  auto& f = figures_[from];
  f.bw = std::max(f.bw, probe_->bw);
  if (decision_.sender_capacity && probe_->bw > widest_) {
    // A wider sender capacity changes every bandwidth estimate (bandwidth_rule.hpp).
    widest_ = probe_->bw;
    for (auto& t : trees_) {
      if (!t || t->key().kind != tree_kind::bandwidth)
        continue;
      auto before = t->info();
      t->set_sender_capacity(widest_);
      if (!(t->info() == before))
        mark_info(*t);
    }
  }
  // Judged by the best figures measured so far (minimum RTT, maximum bandwidth):
  // contention only ever makes a measurement look worse.
  auto rtt = f.rtt;
  auto bw = f.bw;
  probe_->rtt = rtt;
  probe_->bw = bw;

  merge_view(now, from, m, out);
  // The view may have ended this probe: it can name a new incarnation of the
  // candidate itself, which buries the one we were probing.
  if (!probe_ || probe_->seq != m.seq)
    return;
  auto ctx = context();
  std::vector<wire::subtree_entry> wanted;
  for (auto& info : m.trees) {
    auto t = find_tree(info.tree);
    if (!t || t->is_root() || steps_.count(info.tree) || unseeded_.count(info.tree.root))
      continue; // (a step-parent is being asked in that tree, or a seed awaited)
    auto v = info.tree.kind == tree_kind::latency
               ? latency_rule(*t, self_, from, rtt, info, ctx)
               : bandwidth_rule(*t, self_, from, bw, rtt, info, ctx);
    if (v == verdict::refresh) {
      auto before = t->info();
      t->refresh_measurement(rtt, bw);
      t->set_parent_info(info);
      note_reattaching(now, *t, before.reattaching);
      if (!(t->info() == before))
        mark_info(*t);
    } else if (v == verdict::adopt) {
      if (hold_move(now, *t, rtt, ctx)) {
        ++held_moves_; // judged against a lost path's est: wait for the parent's new one
        continue;
      }
      wanted.push_back({info.tree, t->subtree(reported_own())});
    }
  }
  if (wanted.empty()) {
    finish_probe(now, true, out);
    return;
  }
  probe_->at = probe::phase::adopt;
  probe_->requested = wanted;
  send(out, from, wire::adopt_request{m.seq, std::move(wanted)});
}

void supervisor::merge_view(timestamp now, proc_id from, const wire::bw_reply& m,
                            outbox& out) {
  for (auto& d : m.departed) {
    if (d.id == self_ && d.incarnation == me_.incarnation && status_ == status::member) {
      // Taken for gone (a bounce meant for an earlier incarnation, or a silence).
      refute(now, no_proc, out);
      continue;
    }
    depart(now, d.id, d.incarnation, out);
  }
  bool news = false;
  for (auto& mem : m.members) // (what the candidate says of itself is first-hand)
    news = admit(now, mem, out, mem.id != from) || news;
  apply_told_routes(now, no_proc, foreign_routes(m.routes), out);
  if (news)
    trigger(now, out); // new trees exist
}

std::vector<wire::route_entry> supervisor::foreign_routes(std::vector<wire::route_entry> routes) const {
  // An entry naming us that we did not learn ourselves either comes from our
  // previous incarnation (stale: those vnodes were handed on when it left) or repeats
  // an explicit update that reaches us anyway. Vnodes become ours only through
  // explicit updates, so record them as owner-unknown just below that epoch: the
  // explicit update (same epoch) or any later news wins over it.
  std::vector<wire::route_entry> result;
  result.reserve(routes.size());
  for (auto& r : routes) {
    if (r.owner == self_) {
      if (r.epoch == 0)
        continue;
      r.owner = no_proc;
      --r.epoch;
    }
    result.push_back(std::move(r));
  }
  return result;
}

wire::adopt_verdict supervisor::judge(proc_id from, const wire::subtree_entry& e) {
  wire::adopt_verdict v;
  v.tree = e.tree;
  auto t = find_tree(e.tree);
  // Refuse trees where the asker is our ancestor (a cycle) or where we are not
  // connected ourselves; also trees where our own adoption is in flight, so that
  // two processors asking each other at once cannot both say yes.
  bool pending_here = probe_ && probe_->at == probe::phase::adopt
                      && std::any_of(probe_->requested.begin(), probe_->requested.end(),
                                     [&](auto& r) { return r.tree == e.tree; });
  if (t && is_member(from) && from != self_ && t->connected() && !t->has_ancestor(from)
      && !pending_here) {
    // A joiner we gave vnodes to asks for its first place in a bandwidth tree: the
    // joiners of one giver hang in a chain (giver -> j1 -> j2 ...), each forwarding to
    // one, not all from the giver's NIC.
    auto given = given_to_.find(from);
    if (e.tree.kind == tree_kind::bandwidth && given != given_to_.end()
        && now_ - given->second <= cfg_.sponsor_window) {
      auto& chain =
        chain_tail_.try_emplace(e.tree, no_proc, std::set<proc_id>{}).first->second;
      const auto ahead = chain.first;
      const bool first_time = chain.second.insert(from).second; // (not a later probe's)
      if (first_time)
        chain.first = from;
      if (first_time && ahead != no_proc && is_member(ahead)) {
        v.info = t->info();
        v.redirect = ahead; // ask the last joiner placed here instead
        return v;
      }
    }
    t->set_child(from, e.vnodes);
    mark_subtree(*t);
    v.accepted = true;
    v.info = t->info();
  } else if (t) {
    v.info = t->info();
  }
  return v;
}

void supervisor::on_adopt_request(proc_id from, const wire::adopt_request& m, outbox& out) {
  // Trees in which our own step-parent has not answered yet (we are the heir a sibling
  // was sent to, or lost our parent too) are answered once it has (answer_deferred), in
  // a further adopt_reply with the same seq; the others at once.
  wire::adopt_reply reply{m.seq, {}};
  held_request held{from, m.seq, {}};
  for (auto& e : m.trees) {
    if (auto t = find_tree(e.tree); t && awaiting(*t))
      held.trees.push_back(e);
    else
      reply.verdicts.push_back(judge(from, e));
  }
  if (!held.trees.empty())
    deferred_.push_back(std::move(held));
  if (!reply.verdicts.empty() || m.trees.empty())
    send(out, from, std::move(reply));
}

void supervisor::on_adopt_reply(timestamp now, proc_id from, const wire::adopt_reply& m,
                                outbox& out) {
  if (auto a = asks_.find(m.seq); a != asks_.end() && a->second.cand == from) {
    on_step_reply(now, m.seq, &m, out);
    return;
  }
  if (!probe_ || probe_->seq != m.seq || probe_->cand != from
      || probe_->at != probe::phase::adopt) {
    // We gave up on this probe (timeout, or took the candidate for gone): undo
    // whatever it accepted, or it would count us as a child for ever.
    wire::release undo;
    for (auto& v : m.verdicts)
      if (auto t = find_tree(v.tree); v.accepted && (!t || t->parent() != from))
        undo.trees.push_back(v.tree); // (not when it is our parent there by another request)
    if (!undo.trees.empty())
      send(out, from, std::move(undo));
    return;
  }
  std::map<proc_id, wire::release> releases;
  for (auto& v : m.verdicts) {
    if (!v.accepted)
      continue;
    auto t = find_tree(v.tree);
    if (!t) { // the root left meanwhile
      releases[from].trees.push_back(v.tree);
      continue;
    }
    auto old = t->parent();
    if (old != no_proc && old != from)
      releases[old].trees.push_back(v.tree);
    const bool was = t->reattaching();
    t->set_parent(from, probe_->rtt, probe_->bw, v.info);
    note_reattaching(now, *t, was);
    auto req = std::find_if(probe_->requested.begin(), probe_->requested.end(),
                            [&](auto& r) { return r.tree == v.tree; });
    if (req != probe_->requested.end())
      t->set_reported(req->vnodes);
    mark_info(*t);
    mark_subtree(*t);
    if (old != from)
      event(out, tree_event::kind::parent_changed, now, v.tree, old, from);
  }
  for (auto& [p, r] : releases)
    send(out, p, std::move(r));
  bool any = std::any_of(m.verdicts.begin(), m.verdicts.end(), [](auto& v) { return v.accepted; });
  if (any)
    schedule_.progress(decision_.extra_from_last_change && !settling_);
  finish_probe(now, true, out);
}

void supervisor::on_tree_update(timestamp now, proc_id from, const wire::tree_update& m,
                                outbox& out) {
  std::map<proc_id, wire::release> releases;
  bool broke = false;
  for (auto& info : m.trees) {
    auto t = find_tree(info.tree);
    if (!t || t->parent() != from)
      continue; // stale: we moved on
    if (std::find(info.path.begin(), info.path.end(), self_) != info.path.end()) {
      // Our own path runs through us: concurrent changes closed a cycle. Break it.
      releases[from].trees.push_back(info.tree);
      lose_parent(now, *t, out);
      event(out, tree_event::kind::cycle_broken, now, info.tree, from, no_proc);
      broke = true;
      continue;
    }
    auto before = t->info();
    if (info.tree.kind == tree_kind::bandwidth && !info.connected) {
      // Our parent lost its parent: keep the figures of the path it had, marked as
      // such (see reattach_hold), rather than its est 0 (every candidate would win).
      auto kept = t->parent_info();
      kept.reattaching = true;
      t->set_parent_info(std::move(kept));
    } else {
      t->set_parent_info(info);
    }
    note_reattaching(now, *t, before.reattaching);
    auto after = t->info();
    if (after.dist != before.dist || after.est != before.est || after.path != before.path
        || after.reattaching != before.reattaching)
      mark_info(*t);
  }
  for (auto& [p, r] : releases)
    send(out, p, std::move(r));
  if (broke)
    trigger(now, out);
}

// --- membership ----------------------------------------------------------------

void supervisor::on_join_request(timestamp now, proc_id from, const wire::join_request& m,
                                 outbox& out) {
  if (status_ == status::leaving) {
    // Pass the newcomer on to a member that stays (the one taking our vnodes, if known).
    auto to = offered_to_;
    if (to == no_proc || !is_member(to))
      for (auto p : members_)
        if (p != self_ && p != m.newcomer.id) {
          to = p;
          break;
        }
    if (to != no_proc)
      send(out, to, m);
    return;
  }
  if (status_ != status::member)
    return;
  auto n = m.newcomer.id;
  (void) from;
  bool known = is_member(n) && member_info_[n].incarnation == m.newcomer.incarnation;
  if (!known && !admit(now, m.newcomer, out))
    return; // an incarnation that has already left
  bool fresh = !known;
  sponsored_.erase(std::remove_if(sponsored_.begin(), sponsored_.end(),
                                  [&](auto& s) { return s.first == n; }),
                   sponsored_.end());
  sponsored_.emplace_back(n, now);
  // Tell the members first: an owner asked below to hand vnodes over must already
  // know the newcomer when the request arrives (messages between two processors
  // arrive in order).
  if (fresh)
    for (auto p : members_)
      if (p != self_ && p != n)
        send(out, p, wire::member_joined{m.newcomer});
  // Vnodes move later: the newcomer asks their owners once it is a member, so that
  // nothing is handed to a processor whose join then fails.
  wire::join_accept accept;
  for (auto p : members_)
    accept.members.push_back(member_info_[p]);
  accept.routes = routes_.snapshot();
  send(out, n, std::move(accept));
  if (fresh)
    expect_seed(now, n, out);
}

void supervisor::on_join_accept(timestamp now, proc_id from, const wire::join_accept& m,
                                outbox& out) {
  if (status_ != status::joining)
    return;
  // The list is hearsay, but for the contact's own entry: its incarnation now. A notice
  // about an earlier incarnation of the contact that reached us while we waited (a
  // member_joined relayed to newcomers) would otherwise stand, and a later view that
  // buries it would drop our edges to the live contact without a release.
  for (auto& mem : m.members)
    admit(now, mem, out, mem.id != from);
  for (auto& r : foreign_routes(m.routes))
    routes_.apply(r);
  status_ = status::member;
  set_own(routes_.owned_by(self_));
  // Announce ourselves: the contact told the members it knows, but it may not
  // know every member yet.
  for (auto p : members_)
    if (p != self_ && p != from)
      send(out, p, wire::member_joined{me_});
  // Now ask for vnodes (after the announcements: an owner must know us first, and
  // messages between two processors arrive in order).
  givers_.clear();
  if (wanted_.empty()) {
    send(out, from, wire::handover_request{{}, self_}); // a share of the contact's
    givers_.push_back(from);
  } else {
    for (auto& [owner, vs] : routes_.partition(wanted_))
      if (owner != no_proc && owner != self_) {
        send(out, owner, wire::handover_request{vs, self_});
        givers_.push_back(owner);
      }
  }
  event(out, tree_event::kind::joined, now);
  start_watch(out);
  if (givers_.empty()) {
    trigger(now, out);
  } else {
    // Measuring starts once the givers have placed us (on_vnode_handover), or when
    // none has after `probe_timeout`.
    await_giver_ = true;
    join_attempts_ = giver_wait_attempt;
    out.timers.push_back({cfg_.probe_timeout, token_for(1 + join_attempts_, token_flush)});
  }
}

void supervisor::on_member_joined(timestamp now, proc_id from, const wire::member& who,
                                  outbox& out) {
  if (!admit(now, who, out))
    return;
  // Membership must end up symmetric: the newcomer may not know us yet.
  if (from != who.id && status_ == status::member)
    send(out, who.id, wire::member_joined{me_});
  // Newcomers we let in may have been told about members before this one joined.
  for (auto s : sponsored(now))
    if (s != who.id && s != from)
      send(out, s, wire::member_joined{who});
  // While we are joining ourselves, the member is no newcomer to wait for (it answers
  // our join, or joins alongside us): our place in its tree comes from our givers, as in
  // the trees of the members our contact listed (on_vnode_handover). Waiting for a seed
  // that no handover brings, 80 rejoiners on paper-4c160 each held some 60 trees
  // unplaced for `seed_wait` and then measured for them.
  if (status_ == status::joining)
    return;
  // A new tree exists, rooted at the newcomer: seeded once we know its giver, else measured.
  expect_seed(now, who.id, out);
}

} // namespace banyan
