#include "banyan/core/scatter.hpp"

#include <string>

namespace banyan {

expected<shared_bytes> scatter_payload(const tree_view& view, vnode_id root,
                                       const std::map<vnode_id, shared_bytes>& blocks) {
  const auto all = view.all_vnodes();
  if (!all.contains(root))
    return make_error(errc::invalid_argument, "scatter: root vnode " + std::to_string(root) +
                                                " does not exist (vnodes are " +
                                                all.to_string() + ")");
  if (!view.participating() || !view.own_vnodes().contains(root))
    return make_error(errc::invalid_argument,
                      "scatter: root vnode " + std::to_string(root) +
                        " is not owned by processor " + std::to_string(view.self()) +
                        " (its owner is " + std::to_string(view.owner(root)) + ")");
  vnode_set keys;
  for (auto& [v, b] : blocks) {
    if (v > vnode_set::max_member)
      return make_error(errc::invalid_argument,
                        "scatter: unknown vnode " + std::to_string(v));
    keys.append(v, v + 1);
  }
  if (keys != all) {
    std::string why = "scatter: one block per vnode of " + all.to_string() + " is needed";
    if (auto missing = all - keys; !missing.empty())
      why += "; none for " + missing.to_string();
    if (auto extra = keys - all; !extra.empty())
      why += "; unknown vnodes " + extra.to_string();
    return make_error(errc::invalid_argument, why);
  }
  return join_blocks(blocks, "scatter");
}

} // namespace banyan
