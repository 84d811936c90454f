#include "repair.hpp"

#include <algorithm>
#include <tuple>

#include "supervisor_parts.hpp"

namespace banyan::sup {

bool repair::hint(tree_state& t, std::vector<proc_id> candidates, duration rtt, rate bw,
                  int hops, bool measured) {
  if (t.connected() || t.is_root())
    return false;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    auto to = candidates[i];
    if (to == no_proc || to == s_.self || !s_.members.is_member(to))
      continue;
    steps_[t.key()] =
      step_hint{to, rtt, bw, measured, hops, 0,
                std::vector<proc_id>(candidates.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                     candidates.end())};
    return true;
  }
  steps_.erase(t.key());
  return false;
}

void repair::next_step(tree_key k) {
  auto s = steps_.find(k);
  auto t = s_.trees.find(k);
  if (s == steps_.end())
    return;
  if (!t) {
    steps_.erase(s);
    return;
  }
  auto h = s->second;
  hint(*t, h.next, h.rtt, h.bw, h.hops, h.measured); // erases the hint when nobody is left
}

proc_id repair::step_parent(tree_key k) const {
  auto i = steps_.find(k);
  return i == steps_.end() ? no_proc : i->second.to;
}

bool repair::awaiting(const tree_state& t) const {
  return !t.connected() && (steps_.count(t.key()) || s_.seeding.waiting(t.key().root));
}

bool repair::asked(std::uint64_t seq, proc_id from) const {
  auto a = asks_.find(seq);
  return a != asks_.end() && a->second.cand == from;
}

proc_id repair::effective_parent(const tree_state& t) const {
  if (t.parent() != no_proc)
    return t.parent();
  return step_parent(t.key());
}

std::vector<proc_id> repair::heirs(const tree_state& t) const {
  // The child that replaces us under our parent: a LAN child first (the WAN edge we
  // had to our parent is then replaced by one WAN edge from the same LAN), then the
  // best measured (bandwidth trees: widest; latency trees: nearest), then the largest
  // subtree, then the smallest id.
  auto key = [&](proc_id c, const vnode_set& vs) {
    auto bw = s_.paths.measured_bw(c).value_or(0);
    auto rtt = s_.paths.measured_rtt(c).value_or(duration::max());
    double fig = t.key().kind == tree_kind::bandwidth ? bw : -static_cast<double>(rtt.count());
    bool measured = t.key().kind == tree_kind::bandwidth ? bw > 0 : rtt != duration::max();
    return std::make_tuple(s_.paths.is_local(c), measured, fig, vs.size());
  };
  std::vector<proc_id> ranked;
  for (auto& [c, vs] : t.children())
    ranked.push_back(c);
  std::stable_sort(ranked.begin(), ranked.end(), [&](proc_id a, proc_id b) {
    return key(a, t.children().at(a)) > key(b, t.children().at(b));
  });
  return ranked;
}

void repair::hand_over_trees(outbox& out) {
  // Every child of every tree is told where to go (orphan with a step-parent): the heir
  // to our parent, the other children to the heir. The heir's subtree holds none of its
  // siblings and our parent is not below the heir, so no cycle is made; concurrent
  // changes are caught by the usual checks (adopt_request, tree_update paths).
  farewell_trees_.clear();
  std::map<proc_id, wire::orphan> orphans;
  for (auto& t : s_.trees.all()) {
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
      std::vector<proc_id> steps(
        ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(r, 2)));
      steps.insert(steps.end(), ancestors.begin(), ancestors.end());
      auto& o = orphans[c];
      o.trees.push_back(t->key());
      o.steps.push_back(std::move(steps));
    }
  }
  for (auto& [c, o] : orphans)
    s_.send(out, c, std::move(o));
}

void repair::refuse_adoption(proc_id from, const wire::adopt_request& m, outbox& out) {
  // A leaving or left processor never adopts: it points the asker to where it would
  // send a child of its own (its parent or step-parent in that tree).
  wire::adopt_reply no{m.seq, {}};
  for (auto& e : m.trees) {
    proc_id to = no_proc;
    if (s_.status == supervisor::status::left) {
      if (auto i = farewell_trees_.find(e.tree); i != farewell_trees_.end())
        to = i->second;
    } else if (auto t = s_.trees.find(e.tree)) {
      to = effective_parent(*t);
    }
    no.verdicts.push_back({e.tree, false, {}, to == from ? no_proc : to});
  }
  s_.send(out, from, std::move(no));
}

void repair::defer(proc_id from, std::uint64_t seq, std::vector<wire::subtree_entry> trees) {
  deferred_.push_back({from, seq, std::move(trees)});
}

void repair::supersede(proc_id from, std::uint64_t seq,
                       const std::vector<wire::subtree_entry>& trees, outbox& out) {
  // An asker's requests for one tree must not both be accepted: it acts on one verdict
  // (the request it still waits for), and undoes the other with a release, which may
  // reach us after we accepted both and then removes the child it has just become. (A
  // probe ends with the first adopt_reply, so the rest of its held request comes after
  // it ended; the asker meanwhile lost its parent and asked us as step-parent: it took
  // us as parent by the second verdict, and the release of the first left it under a
  // parent that did not count it as a child.) So only the newest request is answered
  // for a tree; an earlier one still held is refused for it, and the asker undoes
  // nothing.
  for (auto& h : deferred_) {
    if (h.from != from || h.seq == seq)
      continue;
    wire::adopt_reply no{h.seq, {}};
    auto named = [&](const wire::subtree_entry& e) {
      return std::any_of(trees.begin(), trees.end(), [&](auto& n) { return n.tree == e.tree; });
    };
    for (auto& e : h.trees)
      if (named(e))
        no.verdicts.push_back({e.tree, false, {}, no_proc});
    h.trees.erase(std::remove_if(h.trees.begin(), h.trees.end(), named), h.trees.end());
    if (!no.verdicts.empty())
      s_.send(out, from, std::move(no));
  }
  deferred_.erase(std::remove_if(deferred_.begin(), deferred_.end(),
                                 [](auto& h) { return h.trees.empty(); }),
                  deferred_.end());
}

void repair::answer_deferred(outbox& out) {
  auto held = std::move(deferred_);
  deferred_.clear();
  for (auto& h : held) {
    wire::adopt_reply reply{h.seq, {}};
    held_request still{h.from, h.seq, {}};
    for (auto& e : h.trees) {
      if (s_.status != supervisor::status::member) {
        proc_id to = no_proc;
        if (auto i = farewell_trees_.find(e.tree); i != farewell_trees_.end())
          to = i->second;
        else if (auto t = s_.trees.find(e.tree))
          to = effective_parent(*t);
        reply.verdicts.push_back({e.tree, false, {}, to == h.from ? no_proc : to});
      } else if (auto t = s_.trees.find(e.tree); t && awaiting(*t)) {
        still.trees.push_back(e); // ours is still pending
      } else {
        reply.verdicts.push_back(s_.parents.judge(h.from, e));
      }
    }
    if (!reply.verdicts.empty())
      s_.send(out, h.from, std::move(reply));
    if (!still.trees.empty())
      deferred_.push_back(std::move(still));
  }
}

void repair::ask_step_parents(outbox& out) {
  if (s_.status != supervisor::status::member)
    return;
  std::map<proc_id, std::vector<wire::subtree_entry>> wanted;
  std::map<proc_id, std::uint64_t> seqs;
  for (auto i = steps_.begin(); i != steps_.end();) {
    auto t = s_.trees.find(i->first);
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
          seq = s_.next_seq++;
        h.asked = seq;
        wanted[h.to].push_back({i->first, t->subtree(s_.owners.reported_own())});
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
    s_.send(out, cand, wire::adopt_request{seq, std::move(entries)});
    s_.start_timer(out, s_.cfg.probe_timeout, timer_token::reply_due(seq));
  }
}

void repair::on_step_reply(timestamp now, const wire::adopt_reply& m, outbox& out) {
  step_reply(now, m.seq, &m, out);
}

void repair::on_reply_timer(timestamp now, std::uint64_t seq, outbox& out) {
  step_reply(now, seq, nullptr, out);
  s_.updates.flush(out);
}

void repair::step_reply(timestamp now, std::uint64_t seq, const wire::adopt_reply* m,
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
    auto t = s_.trees.find(k);
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
      s_.parents.note_reattaching(now, *t, was);
      t->set_reported(a->second.offered[k]); // what the parent now holds for us
      s_.updates.mark_info(*t);
      s_.updates.mark_subtree(*t);
      s_.event(out, tree_event::kind::parent_changed, now, k, no_proc, cand);
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
    s_.send(out, p, std::move(r));
  if (any) {
    s_.probes.progress();
    s_.probes.remeasure(cand); // adopted without a measurement: measure it next
    repaired_ = true;
  }
  answer_deferred(out);
  ask_step_parents(out);
  after_steps(now, out);
}

void repair::after_steps(timestamp now, outbox& out) {
  // A tree left without parent or step-parent calls for measuring at once; once every
  // step-parent has answered, measuring improves what the repair made (the new parents
  // are measured first: prober::remeasure).
  auto& trees = s_.trees.all();
  bool lost = std::any_of(trees.begin(), trees.end(), [&](auto& t) {
    return t && !t->connected() && !steps_.count(t->key()) && !s_.seeding.waiting(t->key().root);
  });
  if (lost || (steps_.empty() && repaired_)) {
    repaired_ = false;
    s_.probes.trigger(now, out);
  } else {
    s_.probes.maybe_probe(now, out);
  }
}

void repair::on(timestamp now, proc_id from, const wire::orphan& m, outbox& out) {
  bool unhinted = false, hinted = false;
  for (std::size_t i = 0; i < m.trees.size(); ++i) {
    auto t = s_.trees.find(m.trees[i]);
    if (!t || t->parent() != from)
      continue;
    // Until the step-parent is measured, assume the edge is like the one lost
    // (the heir and its siblings share a LAN).
    auto steps = i < m.steps.size() ? m.steps[i] : std::vector<proc_id>{};
    auto first = steps.empty() ? no_proc : steps.front();
    auto rtt = s_.paths.measured_rtt(first).value_or(t->rtt_parent());
    auto bw = s_.paths.measured_bw(first).value_or(t->bw_parent());
    s_.parents.lose_parent(now, *t, out);
    if (hint(*t, std::move(steps), rtt, bw))
      hinted = true;
    else
      unhinted = true;
  }
  // Measuring starts at once too (probes leave the trees a step-parent is asked in
  // alone), else once the step-parents answered (step_reply), unless some tree has none
  // to ask.
  if (hinted) {
    ask_step_parents(out);
    s_.probes.repair_round(); // placed by the repair: improve it within the LAN
  }
  if (unhinted || (hinted && s_.hooks.measure_during_repair))
    s_.probes.trigger(now, out);
}

void repair::on_after_leaving(proc_id from, const wire::orphan& m) {
  for (std::size_t i = 0; i < m.trees.size() && i < m.steps.size(); ++i)
    if (auto f = farewell_trees_.find(m.trees[i]);
        f != farewell_trees_.end() && f->second == from && !m.steps[i].empty()
        && m.steps[i].front() != s_.self)
      f->second = m.steps[i].front();
}

bool repair::forget_steps(proc_id p) {
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
  return dropped_hint || !failed.empty();
}

void repair::forget_requests(proc_id p) {
  deferred_.erase(std::remove_if(deferred_.begin(), deferred_.end(),
                                 [&](auto& d) { return d.from == p; }),
                  deferred_.end());
  for (auto i = asks_.begin(); i != asks_.end();)
    i = i->second.cand == p ? asks_.erase(i) : std::next(i);
}

void repair::end_life() {
  steps_.clear();
  asks_.clear();
}

void repair::reset() {
  steps_.clear();
  deferred_.clear();
  asks_.clear();
  farewell_trees_.clear();
}

} // namespace banyan::sup
