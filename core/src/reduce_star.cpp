// Small reductions gather in a star within the root's LAN (reduce_config::star_bytes):
// which partials go straight to the root vnode's owner, and which children a processor
// then still waits for. Members of reduce_engine; the rest of the engine is in
// reduce.cpp.
//
// Processors judge on their own (what each measured: `tree_view::local`, the size of
// its LAN), so a child and its parent may judge apart. Nothing waits on the other's
// judgement: a processor in the star waits for no child (partials that come from its
// children later go on to the root's owner as they arrive, as late partials do), and
// one whose tree parent is not the root's owner tells that parent "nothing here" (an
// empty partial), so that a parent outside the star does not wait for it either.

#include "banyan/core/reduce.hpp"

namespace banyan {

bool reduce_engine::star_rule(const reduce_spec& spec, tree_kind kind) const {
  if (cfg_.star_bytes == 0 || kind != tree_kind::latency || spec.whole_bytes != 0)
    return false;
  const auto own = view_.participating() ? view_.own_vnodes().size() : 0;
  const auto bytes = cfg_.blocks ? spec.count * own : spec.count * element_size(spec.fn.type);
  if (bytes > cfg_.star_bytes)
    return false;
  std::size_t lan = 1;
  for (auto p : view_.peers())
    if (view_.local(p) && ++lan > cfg_.star_max_procs)
      return false;
  return true;
}

bool reduce_engine::in_star(const op_state& st, proc_id owner) const {
  // Only with a place in the owner's tree: without one, partials go flat (point-to-point,
  // `direct`) as before.
  return st.star && owner != no_proc && owner != view_.self() && view_.local(owner)
         && view_.parent({owner, st.kind}) != no_proc;
}

std::vector<tree_child> reduce_engine::children_of(const op_state& st, proc_id owner) const {
  if (in_star(st, owner))
    return {};
  return view_.children({owner, st.kind});
}

proc_id reduce_engine::parent_of(const op_state& st, proc_id owner) const {
  if (in_star(st, owner))
    return owner;
  return view_.parent({owner, st.kind});
}

void reduce_engine::tell_tree_parent(timestamp now, const op_state& st, reduce_outbox& out) {
  const auto owner = view_.owner(st.spec.root);
  const auto parent = view_.parent({owner, st.kind});
  if (parent == no_proc || parent == owner || parent == view_.self() || unusable(now, parent))
    return;
  ++stats_.star_notices;
  send(now, parent, partial_of(st), out); // empty: nothing of ours comes this way
}

} // namespace banyan
