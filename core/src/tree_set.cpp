#include "tree_set.hpp"

#include "supervisor_parts.hpp"

namespace banyan::sup {

bool tree_set::on_demand() const { return s_.cfg.tree_set == tree_set_mode::on_demand; }

bool tree_set::wanted(proc_id p) const {
  if (!on_demand())
    return true;
  auto i = roots_.find(p);
  if (i == roots_.end() || !i->second.open)
    return false;
  if (p == s_.self)
    return s_.members.me().incarnation == i->second.incarnation;
  auto m = s_.members.info(p);
  return m && m->incarnation == i->second.incarnation;
}

void tree_set::prepare(timestamp now, outbox& out) {
  if (!on_demand() || s_.status != supervisor::status::member)
    return;
  last_used_ = now;
  auto& e = roots_.try_emplace(s_.self, wire::open_root{s_.self, s_.members.me().incarnation, 0,
                                                        false}).first->second;
  if (!e.open) {
    ++e.seq;
    e.open = true;
    sync(now, s_.self, out);
    announce(e, out);
  }
  if (s_.cfg.retire_after.count() > 0 && retire_gen_ == 0) {
    retire_gen_ = ++retire_timers_;
    s_.start_timer(out, s_.cfg.retire_after, timer_token::retire(retire_gen_));
  }
}

void tree_set::on_retire_timer(timestamp now, std::uint64_t gen, outbox& out) {
  if (gen != retire_gen_)
    return; // of an earlier life
  retire_gen_ = 0;
  auto i = roots_.find(s_.self);
  if (s_.status != supervisor::status::member || i == roots_.end() || !i->second.open)
    return;
  const auto idle = now - last_used_;
  if (idle < s_.cfg.retire_after) { // used since: look again when it may be due
    retire_gen_ = ++retire_timers_;
    s_.start_timer(out, s_.cfg.retire_after - idle, timer_token::retire(retire_gen_));
    return;
  }
  ++i->second.seq;
  i->second.open = false;
  sync(now, s_.self, out);
  announce(i->second, out);
}

void tree_set::announce(const wire::open_root& e, outbox& out) const {
  for (auto m : s_.members.list())
    if (m != s_.self)
      s_.send(out, m, wire::trees_open{{e}});
}

void tree_set::on(timestamp now, proc_id, const wire::trees_open& m, outbox& out) {
  merge(now, m.roots, out);
}

void tree_set::merge(timestamp now, const std::vector<wire::open_root>& roots, outbox& out) {
  if (!on_demand())
    return;
  for (auto& e : roots) {
    if (e.root == s_.self || e.root == no_proc)
      continue; // ours we decide
    if (auto m = s_.members.info(e.root); m && m->incarnation != e.incarnation)
      continue; // of another incarnation
    if (auto t = s_.members.tombstones().find(e.root);
        t != s_.members.tombstones().end() && t->second.count(e.incarnation))
      continue; // of an incarnation that left
    auto i = roots_.find(e.root);
    if (i != roots_.end() && i->second.incarnation == e.incarnation && i->second.seq >= e.seq)
      continue; // not later than what we know
    roots_[e.root] = e;
    // (not yet a member: its trees open when it is, membership::add)
    if (s_.members.is_member(e.root))
      sync(now, e.root, out);
  }
}

void tree_set::sync(timestamp now, proc_id p, outbox& out) {
  const bool want = wanted(p) && (p == s_.self || s_.members.is_member(p));
  const bool have = s_.trees.has_root(p);
  if (want && !have) {
    s_.members.open_trees(p);
    if (p != s_.self)
      s_.probes.trigger(now, out); // attach, as to a newcomer's trees without a seed
  } else if (!want && have) {
    s_.trees.drop_root(p); // every member drops them: no edge is left to undo
    s_.probes.drop_root(p);
  }
}

std::vector<wire::open_root> tree_set::snapshot() const {
  std::vector<wire::open_root> r;
  r.reserve(roots_.size());
  for (auto& [p, e] : roots_)
    if (p == s_.self || s_.members.is_member(p))
      r.push_back(e);
  return r;
}

std::vector<proc_id> tree_set::open_roots() const {
  std::vector<proc_id> r;
  for (auto& t : s_.trees.all())
    if (t && t->key().kind == tree_kind::latency)
      r.push_back(t->key().root);
  return r;
}

void tree_set::forget(proc_id p, std::uint64_t inc) {
  if (auto i = roots_.find(p); i != roots_.end() && i->second.incarnation == inc)
    roots_.erase(i);
}

void tree_set::reset() {
  roots_.clear();
  retire_gen_ = 0;
}

} // namespace banyan::sup
