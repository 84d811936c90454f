#include "banyan/core/group_entries.hpp"

namespace banyan {

namespace {

bool inside(const topology::group& g, proc_id p) {
  return p >= g.first_proc && p < g.first_proc + g.proc_count;
}

} // namespace

group_entries count_group_entries(const tree& t, const topology& topo,
                                  const std::vector<bool>& live) {
  group_entries r;
  r.per_group.assign(topo.groups.size(), 0);
  const auto n = std::min<std::size_t>(t.size(), live.size());
  for (std::size_t i = 0; i < topo.groups.size(); ++i) {
    const auto& g = topo.groups[i];
    bool has_live = false;
    for (proc_id p = g.first_proc; p < g.first_proc + g.proc_count && p < n; ++p) {
      if (!live[p])
        continue;
      has_live = true;
      auto q = t.parent(p);
      if (q != no_proc && !inside(g, q))
        ++r.per_group[i];
    }
    const std::uint32_t least =
      has_live && !(t.root() < n && inside(g, t.root())) ? 1 : 0;
    if (r.per_group[i] > least) {
      r.excess += r.per_group[i] - least;
      ++r.groups_over;
    }
  }
  return r;
}

} // namespace banyan
