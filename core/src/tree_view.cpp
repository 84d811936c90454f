#include "banyan/core/tree_view.hpp"

namespace banyan {

std::map<proc_id, vnode_set> route_to_owners(const tree_view& view, const vnode_set& vs,
                                             const std::function<bool(proc_id)>& unusable) {
  std::map<proc_id, vnode_set> result;
  if (vs.empty())
    return result;
  const proc_id self = view.self();
  vnode_set stray;
  for (auto& [owner, part] : view.owners(vs)) {
    if (owner == no_proc || owner == self || unusable(owner))
      stray |= part;
    else
      result[owner] |= part;
  }
  if (stray.empty())
    return result;
  proc_id fallback = self;
  for (auto p : view.peers())
    if (p != self && p != no_proc && !unusable(p)) {
      fallback = p;
      break;
    }
  result[fallback] |= stray;
  return result;
}

} // namespace banyan
