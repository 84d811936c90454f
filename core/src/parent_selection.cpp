#include "parent_selection.hpp"

#include <algorithm>
#include <map>

#include "banyan/core/bandwidth_rule.hpp"
#include "banyan/core/latency_rule.hpp"
#include "supervisor_parts.hpp"

namespace banyan::sup {

std::vector<wire::subtree_entry>
parent_selection::judge_candidate(timestamp now, proc_id from, duration rtt, rate bw,
                                  const std::vector<wire::tree_info>& trees,
                                  const judge_scope& scope) {
  auto ctx = s_.paths.context();
  if (scope.bw_margin > ctx.bw_margin) {
    // Hysteresis: a move must gain the wider margin, and the locality tie-break still
    // accepts only the rules' own loss (rule_context::tie_margin).
    ctx.tie_margin = ctx.bw_margin;
    ctx.bw_margin = scope.bw_margin;
  }
  const bool limited = scope.only && !scope.only->empty();
  std::vector<wire::subtree_entry> wanted;
  for (auto& info : trees) {
    if (limited && !scope.only->count(info.tree))
      continue; // re-examining other trees
    auto t = s_.trees.find(info.tree);
    if (!t || t->is_root() || s_.repairs.has_step(info.tree) || s_.seeding.waiting(info.tree.root))
      continue; // (a step-parent is being asked in that tree, or a seed awaited)
    auto v = info.tree.kind == tree_kind::latency
               ? latency_rule(*t, s_.self, from, rtt, info, ctx)
               : bandwidth_rule(*t, s_.self, from, bw, rtt, info, ctx);
    if (v == verdict::refresh) {
      auto before = t->info();
      t->refresh_measurement(rtt, bw);
      // A probe reply's path is cut to the loop check (prober.cpp): our parent's path
      // stays the one its tree_update or adoption told us.
      auto told = info;
      told.path = t->parent_info().path;
      t->set_parent_info(std::move(told));
      note_reattaching(now, *t, before.reattaching);
      if (!(t->info() == before))
        s_.updates.mark_info(*t);
      s_.updates.mark_summary(*t); // the hop's rate may have changed
    } else if (v == verdict::adopt) {
      // A background probe (hysteresis): the rule's condition (I), a shorter RTT than
      // the parent's, must hold by the margin, and so must the gain in distance. Repeated
      // probes of equal LAN RTTs lower their minima at random, and would otherwise move
      // trees by that noise alone.
      const auto keep = 1 - scope.dist_margin;
      if (scope.dist_margin > 0 && info.tree.kind == tree_kind::latency && t->connected()
          && (static_cast<double>(rtt.count()) > keep * static_cast<double>(t->rtt_parent().count())
              || static_cast<double>((info.dist + rtt).count())
                   > keep * static_cast<double>(t->dist().count())))
        continue;
      if (hold_move(now, *t, rtt, ctx)) {
        ++held_moves_; // judged against a lost path's est: wait for the parent's new one
        continue;
      }
      wanted.push_back({info.tree, t->subtree(s_.owners.reported_own())});
    }
  }
  return wanted;
}

wire::adopt_verdict parent_selection::judge(proc_id from, const wire::subtree_entry& e) {
  wire::adopt_verdict v;
  v.tree = e.tree;
  auto t = s_.trees.find(e.tree);
  // Refuse trees where the asker is our ancestor (a cycle) or where we are not
  // connected ourselves; also trees where our own adoption is in flight, so that
  // two processors asking each other at once cannot both say yes.
  const auto& probe = s_.probes.current();
  bool pending_here = probe && probe->at == prober::probe::phase::adopt
                      && std::any_of(probe->requested.begin(), probe->requested.end(),
                                     [&](auto& r) { return r.tree == e.tree; });
  if (t && s_.members.is_member(from) && from != s_.self && t->connected()
      && !t->has_ancestor(from) && !pending_here) {
    if (auto ahead = s_.seeding.chain_ahead(from, e.tree); ahead != no_proc) {
      v.info = t->info();
      v.redirect = ahead; // ask the last joiner placed here instead
      return v;
    }
    if (auto below = relief_child(*t, from); below != no_proc) {
      v.info = t->info();
      v.redirect = below; // our fan-out would bind: hang the joiner one LAN hop lower
      return v;
    }
    const bool fresh = !t->has_child(from);
    t->set_child(from, e.vnodes);
    s_.updates.mark_subtree(*t);
    if (fresh)
      fan_out_changed(*t);
    v.accepted = true;
    v.info = t->info();
  } else if (t) {
    v.info = t->info();
  }
  return v;
}

proc_id parent_selection::relief_child(const tree_state& t, proc_id from) const {
  // A joiner we gave vnodes to asks for its first place below us in a bandwidth tree.
  // Assumes what the bandwidth estimate assumes (bandwidth_rule.hpp): what a parent can
  // send (the widest rate it measured) is split evenly among its children. When one
  // more child would bring that share below our own estimate, we would become the
  // narrowest hop of every child's path, and the whole subtree below us would slow down
  // for the joiner's sake (a giver that feeds a cluster's entry, say, splitting its NIC
  // one way more). No move of the joiner's can undo that later: every candidate below
  // us is held by the same split, the joiner's own share included. So the joiner is sent
  // instead to a child of ours in our LAN (one LAN hop further down, the same wide-area
  // path), the one with the smallest subtree, likely a leaf whose share is whole;
  // assumes the joiner is near us, as a giver's joiner is (it asked for the vnodes we
  // held, as its nearest member), and that LAN hops are not the narrowest. Latency trees
  // keep the joiner here: one hop each.
  if (t.key().kind != tree_kind::bandwidth || !s_.decision.sender_capacity
      || t.has_child(from) || !s_.seeding.placing(from))
    return no_proc;
  const auto cap = s_.paths.widest();
  const auto n = t.children().size();
  if (!(cap > 0) || n == 0 || !(cap / static_cast<double>(n + 1) < t.est()))
    return no_proc;
  proc_id best = no_proc;
  std::size_t best_size = 0;
  rate best_bw = 0;
  for (auto& [c, vs] : t.children()) {
    if (c == from || !s_.members.is_member(c) || !s_.paths.is_local(c))
      continue;
    const auto bw = s_.paths.measured_bw(c).value_or(0);
    if (best == no_proc || vs.size() < best_size || (vs.size() == best_size && bw > best_bw)) {
      best = c;
      best_size = vs.size();
      best_bw = bw;
    }
  }
  return best;
}

void parent_selection::on(timestamp, proc_id from, const wire::adopt_request& m, outbox& out) {
  // Trees in which our own step-parent has not answered yet (we are the heir a sibling
  // was sent to, or lost our parent too) are answered once it has (repair::answer_deferred),
  // in a further adopt_reply with the same seq; the others at once.
  s_.repairs.supersede(from, m.seq, m.trees, out); // its earlier requests for these trees
  wire::adopt_reply reply{m.seq, {}};
  std::vector<wire::subtree_entry> held;
  for (auto& e : m.trees) {
    if (auto t = s_.trees.find(e.tree); t && s_.repairs.awaiting(*t))
      held.push_back(e);
    else
      reply.verdicts.push_back(judge(from, e));
  }
  if (!held.empty())
    s_.repairs.defer(from, m.seq, std::move(held));
  if (!reply.verdicts.empty() || m.trees.empty())
    s_.send(out, from, std::move(reply));
}

void parent_selection::on(timestamp now, proc_id from, const wire::tree_update& m, outbox& out) {
  std::map<proc_id, wire::release> releases;
  bool broke = false;
  for (auto& info : m.trees) {
    auto t = s_.trees.find(info.tree);
    if (!t || t->parent() != from)
      continue; // stale: we moved on
    if (std::find(info.path.begin(), info.path.end(), s_.self) != info.path.end()) {
      // Our own path runs through us: concurrent changes closed a cycle. Break it.
      releases[from].trees.push_back(info.tree);
      lose_parent(now, *t, out);
      s_.event(out, tree_event::kind::cycle_broken, now, info.tree, from, no_proc);
      broke = true;
      continue;
    }
    auto before = t->info();
    if (info.tree.kind == tree_kind::bandwidth && !info.connected) {
      // Our parent lost its parent: keep the figures of the path it had, marked as
      // such, rather than its est 0 (every candidate would win).
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
      s_.updates.mark_info(*t);
    s_.updates.mark_summary(*t); // the parent's number of children shares out our hop
  }
  for (auto& [p, r] : releases)
    s_.send(out, p, std::move(r));
  if (broke)
    s_.probes.trigger(now, out);
}

void parent_selection::on(timestamp, proc_id from, const wire::release& m, outbox&) {
  for (auto k : m.trees)
    if (auto t = s_.trees.find(k); t && t->remove_child(from)) {
      s_.updates.mark_subtree(*t);
      fan_out_changed(*t);
    }
}

void parent_selection::fan_out_changed(const tree_state& t) {
  // Assumes what the bandwidth estimate assumes (bandwidth_rule.hpp): a parent's sending
  // capacity is split evenly among its children, so each child's est depends on how many
  // there are. The children hear the new count (tree_update), as they hear any other
  // change of our place: with the count they were adopted at, a child keeps an est that
  // later siblings have shared out, and judges candidates against a figure it no longer
  // gets. (Latency trees: dist does not depend on the count.)
  if (t.key().kind == tree_kind::bandwidth && s_.decision.fan_out_updates)
    s_.updates.mark_info(t);
}

void parent_selection::on(timestamp, proc_id from, const wire::subtree_update& m, outbox&) {
  for (auto& e : m.trees)
    if (auto t = s_.trees.find(e.tree); t && t->has_child(from)) {
      t->set_child(from, e.vnodes);
      s_.updates.mark_subtree(*t);
    }
}

void parent_selection::on(timestamp, proc_id from, const wire::tree_summary& m, outbox&) {
  for (auto& e : m.trees)
    if (auto t = s_.trees.find(e.tree); t && t->set_child_summary(from, e.summary))
      s_.updates.mark_summary(*t); // ours, which folds it in, may change in turn
}

void parent_selection::lose_parent(timestamp now, tree_state& t, outbox& out) {
  auto old = t.parent();
  t.clear_parent();
  s_.event(out, tree_event::kind::parent_changed, now, t.key(), old, no_proc);
  if (t.key().kind == tree_kind::bandwidth)
    s_.updates.mark_info(t); // the children hear `connected` false: their figures are of a lost path
}

void parent_selection::note_reattaching(timestamp now, tree_state& t, bool was) const {
  if (t.reattaching() && !was)
    t.set_reattaching_since(now);
}

bool parent_selection::hold_move(timestamp now, const tree_state& t, duration rtt,
                                 const rule_context& ctx) const {
  return t.key().kind == tree_kind::bandwidth && t.reattaching()
         && now - t.reattaching_since() < s_.cfg.reattach_hold && !ctx.local(rtt);
}

void parent_selection::leave_all_trees(timestamp now, outbox& out) {
  std::map<proc_id, wire::release> releases;
  std::map<proc_id, wire::orphan> orphans;
  for (auto& t : s_.trees.all()) {
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
    s_.updates.mark_subtree(*t);
  }
  for (auto& [p, r] : releases)
    s_.send(out, p, std::move(r));
  for (auto& [c, o] : orphans)
    s_.send(out, c, std::move(o));
}

} // namespace banyan::sup
