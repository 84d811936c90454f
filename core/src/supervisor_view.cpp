#include "banyan/core/supervisor_view.hpp"

#include <algorithm>

namespace banyan {

namespace {

std::vector<proc_id> rank_peers(const supervisor& s) {
  std::vector<std::pair<duration, proc_id>> ranked;
  for (auto m : s.members())
    if (m != s.self())
      ranked.emplace_back(s.measured_rtt(m).value_or(duration::max()), m);
  std::sort(ranked.begin(), ranked.end());
  std::vector<proc_id> result;
  result.reserve(ranked.size());
  for (auto& r : ranked)
    result.push_back(r.second);
  return result;
}

} // namespace

supervisor_view::supervisor_view(const supervisor& s) : sup_(s) { refresh(); }

bool supervisor_view::participating() const {
  return sup_.state() == supervisor::status::member || sup_.state() == supervisor::status::leaving;
}

const routing_table& supervisor_view::routes() const {
  return participating() ? sup_.routes() : routes_;
}

vnode_set supervisor_view::own_vnodes() const {
  return participating() ? sup_.own_vnodes() : vnode_set{};
}

vnode_set supervisor_view::all_vnodes() const { return routes().all(); }

proc_id supervisor_view::successor() const {
  if (sup_.state() != supervisor::status::left || sup_.farewell_routes().empty())
    return no_proc;
  return sup_.farewell_routes().front().owner;
}

proc_id supervisor_view::owner(vnode_id v) const {
  auto s = successor();
  return s != no_proc && routes().owner(v) != no_proc ? s : routes().owner(v);
}

std::map<proc_id, vnode_set> supervisor_view::owners(const vnode_set& vs) const {
  if (auto s = successor(); s != no_proc) {
    std::map<proc_id, vnode_set> result;
    auto known = vs & routes().all();
    if (!known.empty())
      result[s] = known;
    if (auto unknown = vs - known; !unknown.empty())
      result[no_proc] = unknown;
    return result;
  }
  return routes().partition(vs);
}

std::vector<tree_child> supervisor_view::children(tree_key k) const {
  std::vector<tree_child> result;
  if (!participating())
    return result;
  if (auto t = sup_.tree(k))
    for (auto& [c, vs] : t->children())
      result.push_back({c, vs, vs.size()});
  return result;
}

proc_id supervisor_view::parent(tree_key k) const {
  return participating() ? sup_.parent(k) : no_proc;
}

duration supervisor_view::max_root_distance() const {
  duration d{0};
  if (!participating())
    return d;
  for (auto r : sup_.members())
    if (auto t = sup_.tree({r, tree_kind::latency}); t && t->connected())
      d = std::max(d, t->dist());
  return d;
}

rate supervisor_view::min_root_rate() const {
  rate r = infinite_rate;
  if (!participating())
    return r;
  for (auto root : sup_.members())
    if (auto t = sup_.tree({root, tree_kind::bandwidth}); t && t->parent() != no_proc && t->est() > 0)
      r = std::min(r, t->est());
  return r;
}

std::vector<tree_position> supervisor_view::positions(tree_kind k) const {
  std::vector<tree_position> result;
  if (!participating())
    return result;
  result.reserve(sup_.members().size());
  for (auto root : sup_.members())
    if (auto t = sup_.tree({root, k})) {
      // Latency trees keep no sender capacity; the bandwidth trees' (this processor's
      // widest measured rate) stands for a parent's.
      auto b = sup_.tree({root, tree_kind::bandwidth});
      if (auto p = position_of(*t, b ? b->sender_capacity() : 0))
        result.push_back(*p);
    }
  return result;
}

std::optional<subtree_summary> supervisor_view::own_summary(tree_kind k) const {
  if (!participating())
    return std::nullopt;
  auto t = sup_.tree({sup_.self(), k});
  if (!t || t->children().empty())
    return std::nullopt;
  return fold_children(*t);
}

std::vector<proc_id> supervisor_view::peers() const {
  if (participating())
    return rank_peers(sup_);
  auto s = successor();
  if (s == no_proc)
    return peers_;
  std::vector<proc_id> result{s};
  for (auto p : peers_)
    if (p != s)
      result.push_back(p);
  return result;
}

std::optional<duration> supervisor_view::tree_distance(proc_id root) const {
  auto* t = sup_.tree({root, tree_kind::latency});
  if (!t || !t->connected())
    return std::nullopt;
  return t->dist();
}

void supervisor_view::refresh() {
  if (!participating()) {
    // The handover the supervisor made on its way out is the last route change it
    // saw; the snapshot, taken just before, still names this processor.
    if (sup_.state() == supervisor::status::left)
      for (auto& e : sup_.farewell_routes())
        routes_.apply(e);
    return;
  }
  if (routes_.version() != sup_.routes().version()) // O(1): a copy keeps the version
    routes_ = sup_.routes();
  // O(1) while the member list is unchanged; else the lists themselves are compared.
  if (members_version_ != sup_.members_version()) {
    members_version_ = sup_.members_version();
    if (members_ != sup_.members()) {
      members_ = sup_.members();
      peers_ = rank_peers(sup_);
    }
  }
}

} // namespace banyan
