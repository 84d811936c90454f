// The codec of measurement (ping, pong, bw_request, bw_reply) and tree maintenance
// messages (adoption, release, orphan, updates, entry notices) (codec_internal.hpp).

#include "codec_internal.hpp"

namespace banyan::schema::codec_internal {

void write(const wire::ping& m, body_builder b) { b.initPing().setSeq(m.seq); }
void write(const wire::pong& m, body_builder b) { b.initPong().setSeq(m.seq); }
void write(const wire::ping_req& m, body_builder b) {
  auto r = b.initPingReq();
  r.setSeq(m.seq);
  r.setTarget(m.target);
}
void write(const wire::ping_ack& m, body_builder b) {
  auto r = b.initPingAck();
  r.setSeq(m.seq);
  r.setTarget(m.target);
  r.setReached(m.reached);
}
void write(const wire::bw_request& m, body_builder b) {
  auto r = b.initBwRequest();
  r.setSeq(m.seq);
  r.setViewDigest(m.view);
  if (!m.buckets.empty()) {
    auto digests = r.initViewBuckets(list_size(m.buckets.size()));
    for (unsigned i = 0; i < digests.size(); ++i)
      digests.set(i, m.buckets[i]);
  }
  r.setBucketsFrom(m.buckets_from);
}

void write(const wire::bw_reply& m, body_builder b) {
  auto r = b.initBwReply();
  r.setSeq(m.seq);
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
  if (m.padding > 0)
    r.initPadding(m.padding); // zeroed by the allocator; no copy
  write_list(m.members, [&](unsigned n) { return r.initMembers(n); });
  write_list(m.departed, [&](unsigned n) { return r.initDeparted(n); });
  write_list(m.routes, [&](unsigned n) { return r.initRoutes(n); });
  r.setViewOmitted(m.view_omitted);
  write_list(m.open_roots, [&](unsigned n) { return r.initOpenRoots(n); });
  if (!m.view_buckets.empty()) {
    auto named = r.initViewBuckets(list_size(m.view_buckets.size()));
    for (unsigned i = 0; i < named.size(); ++i)
      named.set(i, m.view_buckets[i]);
  }
  r.setViewBucketsLeft(m.view_buckets_left);
}

void write(const wire::adopt_request& m, body_builder b) {
  auto r = b.initAdoptRequest();
  r.setSeq(m.seq);
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
}

void write(const wire::adopt_reply& m, body_builder b) {
  auto r = b.initAdoptReply();
  r.setSeq(m.seq);
  write_list(m.verdicts, [&](unsigned n) { return r.initVerdicts(n); });
}

void write(const wire::release& m, body_builder b) {
  auto r = b.initRelease();
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
}

void write(const wire::orphan& m, body_builder b) {
  auto r = b.initOrphan();
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
  if (!m.steps.empty()) {
    auto steps = r.initSteps(list_size(m.steps.size()));
    for (unsigned i = 0; i < steps.size(); ++i) {
      if (m.steps[i].empty())
        continue; // null
      auto s = steps.init(i, list_size(m.steps[i].size()));
      for (unsigned j = 0; j < s.size(); ++j)
        s.set(j, m.steps[i][j]);
    }
  }
}

void write(const wire::tree_update& m, body_builder b) {
  auto r = b.initTreeUpdate();
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
}

void write(const wire::tree_summary& m, body_builder b) {
  auto r = b.initTreeSummary();
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
}

void write(const wire::subtree_update& m, body_builder b) {
  auto r = b.initSubtreeUpdate();
  write_list(m.trees, [&](unsigned n) { return r.initTrees(n); });
}

wire::ping read(cs::Ping::Reader r) { return wire::ping{r.getSeq()}; }
wire::pong read(cs::Pong::Reader r) { return wire::pong{r.getSeq()}; }
wire::ping_req read(cs::PingReq::Reader r) { return wire::ping_req{r.getSeq(), r.getTarget()}; }
wire::ping_ack read(cs::PingAck::Reader r) {
  return wire::ping_ack{r.getSeq(), r.getTarget(), r.getReached()};
}
wire::bw_request read(cs::BwRequest::Reader r) {
  wire::bw_request m{r.getSeq(), r.getViewDigest()};
  auto b = r.getViewBuckets();
  m.buckets.reserve(b.size());
  for (auto x : b)
    m.buckets.push_back(x);
  m.buckets_from = r.getBucketsFrom();
  return m;
}

wire::bw_reply read(cs::BwReply::Reader r) {
  wire::bw_reply m;
  m.seq = r.getSeq();
  m.trees = read_list(r.getTrees());
  const std::size_t padding = r.getPadding().size(); // bounds-checked; content ignored
  if (padding > std::numeric_limits<std::uint32_t>::max())
    reject("bw_reply padding too large");
  m.padding = static_cast<std::uint32_t>(padding);
  m.members = read_list(r.getMembers());
  m.departed = read_list(r.getDeparted());
  m.routes = read_list(r.getRoutes());
  m.view_omitted = r.getViewOmitted();
  m.open_roots = read_list(r.getOpenRoots());
  if (m.view_omitted && (!m.members.empty() || !m.departed.empty() || !m.routes.empty()))
    reject("bw_reply omits its view but carries members, departures or routes");
  auto b = r.getViewBuckets();
  m.view_buckets.reserve(b.size());
  for (auto x : b)
    m.view_buckets.push_back(x);
  if (m.view_omitted && !m.view_buckets.empty())
    reject("bw_reply omits its view but names buckets of it");
  m.view_buckets_left = r.getViewBucketsLeft();
  if (m.view_buckets_left > 0 && m.view_buckets.empty())
    reject("bw_reply leaves buckets out but carries none");
  for (std::size_t i = 1; i < m.view_buckets.size(); ++i)
    if (m.view_buckets[i] <= m.view_buckets[i - 1])
      reject("bw_reply's view buckets are not in increasing order");
  return m;
}

wire::adopt_request read(cs::AdoptRequest::Reader r) {
  return wire::adopt_request{r.getSeq(), read_list(r.getTrees())};
}

wire::adopt_reply read(cs::AdoptReply::Reader r) {
  return wire::adopt_reply{r.getSeq(), read_list(r.getVerdicts())};
}

wire::release read(cs::Release::Reader r) { return wire::release{read_list(r.getTrees())}; }
wire::orphan read(cs::Orphan::Reader r) {
  wire::orphan m{read_list(r.getTrees()), {}};
  for (auto s : r.getSteps()) {
    m.steps.emplace_back();
    for (proc_id p : s)
      m.steps.back().push_back(p);
  }
  return m;
}

wire::tree_update read(cs::TreeUpdate::Reader r) {
  return wire::tree_update{read_list(r.getTrees())};
}

wire::tree_summary read(cs::TreeSummary::Reader r) {
  return wire::tree_summary{read_list(r.getTrees())};
}

wire::subtree_update read(cs::SubtreeUpdate::Reader r) {
  return wire::subtree_update{read_list(r.getTrees())};
}

} // namespace banyan::schema::codec_internal
