// The codec's shared pieces: tree keys and kinds, collective kinds, vnode sets, tree
// info, subtree and route entries, members, verdicts, reduction records
// (codec_internal.hpp).

#include <cmath>

#include "codec_internal.hpp"

namespace banyan::schema::codec_internal {

cs::TreeKind to_capnp(tree_kind k) {
  return k == tree_kind::latency ? cs::TreeKind::LATENCY : cs::TreeKind::BANDWIDTH;
}

void write(const wire::tree_info& t, cs::TreeInfo::Builder b) {
  write_tree(t.tree, b.getTree());
  b.setConnected(t.connected);
  b.setDist(t.dist.count());
  b.setEst(t.est);
  b.setChildren(t.children);
  b.setReattaching(t.reattaching);
  if (!t.path.empty()) {
    auto path = b.initPath(list_size(t.path.size()));
    for (unsigned i = 0; i < path.size(); ++i)
      path.set(i, t.path[i]);
  }
}

void write(const wire::subtree_entry& s, cs::SubtreeEntry::Builder b) {
  write_tree(s.tree, b.getTree());
  write_vnodes(s.vnodes, [&](unsigned n) { return b.initVnodes(n); });
}

void write(const wire::summary_entry& s, cs::SummaryEntry::Builder b) {
  write_tree(s.tree, b.getTree());
  b.setHalfRtt(s.summary.half_rtt.count());
  b.setPerByte(s.summary.per_byte);
  b.setBottleneck(s.summary.bottleneck);
  b.setDepth(s.summary.depth);
  b.setComplete(s.summary.complete);
}

void write(const wire::open_root& o, cs::OpenRoot::Builder b) {
  b.setRoot(o.root);
  b.setIncarnation(o.incarnation);
  b.setSeq(o.seq);
  b.setOpen(o.open);
}

wire::open_root read(cs::OpenRoot::Reader r) {
  return wire::open_root{r.getRoot(), r.getIncarnation(), r.getSeq(), r.getOpen()};
}

void write(const wire::route_entry& r, cs::RouteEntry::Builder b) {
  write_vnodes(r.vnodes, [&](unsigned n) { return b.initVnodes(n); });
  b.setOwner(r.owner);
  b.setEpoch(r.epoch);
}

void write(const wire::member& m, cs::Member::Builder b) {
  b.setId(m.id);
  b.setIncarnation(m.incarnation);
  if (!m.address.empty())
    b.setAddress(capnp::Text::Reader(m.address.data(), m.address.size()));
}

void write(const wire::adopt_verdict& v, cs::AdoptVerdict::Builder b) {
  write_tree(v.tree, b.getTree());
  b.setAccepted(v.accepted);
  write(v.info, b.initInfo());
  b.setRedirect(v.redirect);
}

void write(tree_key k, cs::TreeKey::Builder b) { write_tree(k, b); }

void write(const wire::reduce_record& r, cs::ReduceRecord::Builder b) {
  write_vnodes(r.vnodes, [&](unsigned n) { return b.initVnodes(n); });
  b.setDone(r.done);
}

void write(const wire::reduce_done& d, cs::ReduceDone::Builder b) {
  b.setOp(d.op);
  b.setRoot(d.root);
  write_vnodes(d.tentative, [&](unsigned n) { return b.initTentative(n); });
}

cs::Collective to_capnp(collective_kind k) {
  return static_cast<cs::Collective>(static_cast<std::uint16_t>(k));
}

collective_kind from_capnp(cs::Collective k) {
  const auto v = static_cast<std::uint16_t>(k);
  if (v >= collective_kind_count)
    reject("unknown collective kind " + std::to_string(v));
  return static_cast<collective_kind>(v);
}

tree_kind from_capnp(cs::TreeKind k) {
  switch (k) {
    case cs::TreeKind::LATENCY:
      return tree_kind::latency;
    case cs::TreeKind::BANDWIDTH:
      return tree_kind::bandwidth;
  }
  reject("unknown tree kind " + std::to_string(static_cast<unsigned>(k)));
}

// Only the canonical form is accepted, so that a set has one encoding (and one size).
vnode_set read_vnodes(capnp::List<cs::Interval>::Reader xs) {
  std::vector<vnode_set::interval> runs;
  runs.reserve(xs.size());
  for (auto x : xs) {
    const vnode_set::interval run{x.getLo(), x.getHi()};
    if (run.lo >= run.hi)
      reject("empty or inverted vnode interval [" + std::to_string(run.lo) + ", " +
             std::to_string(run.hi) + ")");
    if (!runs.empty() && run.lo <= runs.back().hi)
      reject("vnode intervals not sorted, disjoint and non-adjacent");
    runs.push_back(run);
  }
  return vnode_set::from_intervals(std::move(runs));
}

wire::tree_info read(cs::TreeInfo::Reader r) {
  wire::tree_info t;
  t.tree = read_tree(r.getTree());
  t.connected = r.getConnected();
  t.dist = duration(r.getDist());
  t.est = r.getEst();
  t.children = r.getChildren();
  t.reattaching = r.getReattaching();
  auto path = r.getPath();
  t.path.reserve(path.size());
  for (proc_id id : path)
    t.path.push_back(id);
  return t;
}

wire::subtree_entry read(cs::SubtreeEntry::Reader r) {
  return wire::subtree_entry{read_tree(r.getTree()), read_vnodes(r.getVnodes())};
}

wire::summary_entry read(cs::SummaryEntry::Reader r) {
  wire::summary_entry e;
  e.tree = read_tree(r.getTree());
  e.summary.half_rtt = duration(r.getHalfRtt());
  e.summary.per_byte = r.getPerByte();
  e.summary.bottleneck = r.getBottleneck();
  e.summary.depth = r.getDepth();
  e.summary.complete = r.getComplete();
  // Figures the prediction sums and divides by: a time per byte finite and not negative,
  // a rate above 0 (infinite allowed: no hop with figures), a distance not negative, at
  // least one hop (the sender's own). NaN fails every comparison.
  const auto& s = e.summary;
  if (s.depth == 0 || s.half_rtt.count() < 0 || !(s.per_byte >= 0) || std::isinf(s.per_byte)
      || !(s.bottleneck > 0))
    reject("tree summary with a depth of 0, a negative distance, a time per byte that is "
           "negative or not finite, or a rate that is not above 0");
  return e;
}

wire::route_entry read(cs::RouteEntry::Reader r) {
  return wire::route_entry{read_vnodes(r.getVnodes()), r.getOwner(), r.getEpoch()};
}

wire::member read(cs::Member::Reader r) {
  auto address = r.getAddress();
  return wire::member{r.getId(), std::string(address.begin(), address.size()),
                      r.getIncarnation()};
}

wire::adopt_verdict read(cs::AdoptVerdict::Reader r) {
  return wire::adopt_verdict{read_tree(r.getTree()), r.getAccepted(), read(r.getInfo()),
                             r.getRedirect()};
}

tree_key read(cs::TreeKey::Reader r) { return read_tree(r); }

wire::reduce_record read(cs::ReduceRecord::Reader r) {
  return wire::reduce_record{read_vnodes(r.getVnodes()), r.getDone()};
}

wire::reduce_done read(cs::ReduceDone::Reader r) {
  return wire::reduce_done{r.getOp(), r.getRoot(), read_vnodes(r.getTentative())};
}

} // namespace banyan::schema::codec_internal
