// node_metrics as Prometheus families (node_exposition.hpp; docs/observability.md).

#include "banyan/actors/node_exposition.hpp"

#include <banyan/version.hpp>

#include <chrono>
#include <utility>

namespace banyan {

namespace {

using family = net::metric_family;
using labels = std::vector<std::pair<std::string, std::string>>;

family counter(std::string name, std::string help) {
  return {std::move(name), std::move(help), family::type::counter, {}};
}

family gauge(std::string name, std::string help) {
  return {std::move(name), std::move(help), family::type::gauge, {}};
}

double num(std::uint64_t x) {
  return static_cast<double>(x);
}

labels tree_labels(tree_key k) {
  return {{"tree", to_string(k.kind)}, {"root", std::to_string(k.root)}};
}

const char* delivery_kind(std::size_t i) {
  return i == 0 ? "broadcast" : i == 1 ? "message" : "scatter";
}

} // namespace

std::vector<net::metric_family> metric_families(const node_metrics& m) {
  std::vector<family> out;

  // --- who and where ---
  auto info = gauge("banyan_node_info", "This node: its processor id, incarnation and banyan version (value 1).");
  info.samples.push_back({{{"id", std::to_string(m.id)},
                           {"incarnation", std::to_string(m.incarnation)},
                           {"version", version_string}},
                          1});
  out.push_back(std::move(info));
  auto state = gauge("banyan_state", "The node's state: 1 for the current one, 0 for the others.");
  for (auto s : {supervisor::status::idle, supervisor::status::joining, supervisor::status::member,
                 supervisor::status::leaving, supervisor::status::left})
    state.samples.push_back({{{"state", to_string(s)}}, s == m.state ? 1.0 : 0.0});
  out.push_back(std::move(state));
  auto members = gauge("banyan_members", "Members of the computation as this node knows them, itself included.");
  members.samples.push_back({{}, num(m.members)});
  out.push_back(std::move(members));
  auto vnodes = gauge("banyan_own_vnodes", "Vnodes this node owns.");
  vnodes.samples.push_back({{}, num(m.own_vnodes)});
  out.push_back(std::move(vnodes));
  auto parented = gauge("banyan_all_parented", "1 when every tree rooted elsewhere has a parent here.");
  parented.samples.push_back({{}, m.all_parented ? 1.0 : 0.0});
  out.push_back(std::move(parented));

  // --- deliveries and collectives ---
  auto dev = counter("banyan_deliveries_total", "Delivery events to this node's vnodes (one may cover several vnodes).");
  auto dvn = counter("banyan_vnode_deliveries_total", "Vnode deliveries: each delivery event counts the vnodes it covers.");
  auto dby = counter("banyan_delivered_bytes_total", "Payload bytes of the delivery events (one payload per event).");
  for (std::size_t k = 0; k < m.deliveries.size(); ++k) {
    const labels l{{"kind", delivery_kind(k)}};
    dev.samples.push_back({l, num(m.deliveries[k].events)});
    dvn.samples.push_back({l, num(m.deliveries[k].vnodes)});
    dby.samples.push_back({l, num(m.deliveries[k].bytes)});
  }
  out.push_back(std::move(dev));
  out.push_back(std::move(dvn));
  out.push_back(std::move(dby));
  auto coll = counter("banyan_collectives_total",
                      "Operations asked of this node by kind: started (calls), completed and failed (their outcomes).");
  for (std::size_t k = 1; k < m.collectives.size(); ++k) {
    const char* kind = to_string(static_cast<collective_kind>(k));
    const auto& c = m.collectives[k];
    coll.samples.push_back({{{"kind", kind}, {"outcome", "started"}}, num(c.started)});
    coll.samples.push_back({{{"kind", kind}, {"outcome", "completed"}}, num(c.completed)});
    coll.samples.push_back({{{"kind", kind}, {"outcome", "failed"}}, num(c.failed)});
  }
  out.push_back(std::move(coll));

  // --- transport ---
  const auto& t = m.transport;
  auto sb = counter("banyan_sent_bytes_total", "Bytes written to TCP connections (handshakes and record overhead included).");
  sb.samples.push_back({{}, num(t.bytes_sent)});
  out.push_back(std::move(sb));
  auto rb = counter("banyan_received_bytes_total", "Bytes read from TCP connections (handshakes and record overhead included).");
  rb.samples.push_back({{}, num(t.bytes_received)});
  out.push_back(std::move(rb));
  auto sf = counter("banyan_sent_frames_total", "Frames whose last byte was written to a TCP connection.");
  sf.samples.push_back({{}, num(t.frames_sent)});
  out.push_back(std::move(sf));
  auto rf = counter("banyan_received_frames_total", "Frames read from TCP connections.");
  rf.samples.push_back({{}, num(t.frames_received)});
  out.push_back(std::move(rf));
  auto conns = counter("banyan_connections_total", "Connections that completed their handshake, by side.");
  conns.samples.push_back({{{"side", "outbound"}}, num(t.connections_opened)});
  conns.samples.push_back({{{"side", "inbound"}}, num(t.connections_accepted)});
  out.push_back(std::move(conns));
  auto fails = counter("banyan_connection_failures_total",
                       "Connections that failed or were refused, by side and reason (docs/observability.md).");
  for (const char* side : {"inbound", "outbound"}) {
    const auto& by = side[0] == 'i' ? t.inbound_failures : t.outbound_failures;
    for (std::size_t r = 1; r < net::connection_failure_count; ++r)
      fails.samples.push_back({{{"side", side}, {"reason", net::to_string(static_cast<net::connection_failure>(r))}},
                               num(by[r])});
  }
  out.push_back(std::move(fails));

  // --- trees ---
  auto changes = counter("banyan_parent_changes_total", "Parent changes in each tree, by tree kind and root.");
  for (auto& [k, n] : m.parent_changes)
    changes.samples.push_back({tree_labels(k), num(n)});
  out.push_back(std::move(changes));
  auto rtt = gauge("banyan_parent_rtt_seconds",
                   "RTT measured to this node's parent in each tree (0: placed without measuring it).");
  auto bw = gauge("banyan_parent_bandwidth_bytes_per_second",
                  "Path bandwidth measured to this node's parent in each tree (0: not measured).");
  for (auto& e : m.parents) {
    auto l = tree_labels(e.tree);
    l.emplace_back("parent", std::to_string(e.parent));
    rtt.samples.push_back({l, std::chrono::duration<double>(e.rtt).count()});
    bw.samples.push_back({l, e.bandwidth});
  }
  out.push_back(std::move(rtt));
  out.push_back(std::move(bw));
  auto probes = counter("banyan_probes_total", "Measurements of candidate parents, by outcome.");
  probes.samples.push_back({{{"outcome", "completed"}}, num(m.probes_completed)});
  probes.samples.push_back({{{"outcome", "abandoned"}}, num(m.probes_abandoned)});
  out.push_back(std::move(probes));

  // --- membership and crashes ---
  auto mc = counter("banyan_membership_changes_total", "Members that joined or left, as this node saw it.");
  mc.samples.push_back({{{"change", "joined"}}, num(m.members_joined)});
  mc.samples.push_back({{{"change", "left"}}, num(m.members_left)});
  out.push_back(std::move(mc));
  auto crashes = counter("banyan_crashes_detected_total", "Members this node took for crashed (and told the others).");
  crashes.samples.push_back({{}, num(m.crashes_detected)});
  out.push_back(std::move(crashes));
  auto adopted = counter("banyan_vnodes_adopted_total", "Vnodes this node adopted from crashed members.");
  adopted.samples.push_back({{}, num(m.vnodes_adopted)});
  out.push_back(std::move(adopted));
  auto disowned = counter("banyan_vnodes_disowned_total",
                          "Vnodes this node gave up because it was taken for crashed.");
  disowned.samples.push_back({{}, num(m.vnodes_disowned)});
  out.push_back(std::move(disowned));
  auto buried = counter("banyan_frames_from_buried_total",
                        "Engine frames dropped because their sender was taken for crashed.");
  buried.samples.push_back({{}, num(m.frames_from_buried)});
  out.push_back(std::move(buried));
  auto suspicions = counter("banyan_suspicions_total",
                            "Members this node suspected of having crashed.");
  suspicions.samples.push_back({{}, num(m.suspicions)});
  out.push_back(std::move(suspicions));
  auto cleared = counter("banyan_suspicions_cleared_total",
                         "Suspicions that ended with an answer from the suspect.");
  cleared.samples.push_back({{}, num(m.suspicions_cleared)});
  out.push_back(std::move(cleared));
  return out;
}

std::string prometheus_text(const node_metrics& m) {
  return net::render_prometheus(metric_families(m));
}

} // namespace banyan
