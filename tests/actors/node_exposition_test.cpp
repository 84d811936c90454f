// node_metrics as Prometheus text: the names, labels and values a scrape gets.

#include <boost/test/unit_test.hpp>

#include <banyan/version.hpp>

#include <string>

#include "banyan/actors/node_exposition.hpp"

using namespace banyan;
using namespace std::chrono_literals;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_metric_appears_with_its_labels_and_values) {
  node_metrics m;
  m.id = 3;
  m.state = supervisor::status::member;
  m.incarnation = 18446744073709551557ull; // above 2^53: kept exact in its label
  m.members = 4;
  m.own_vnodes = 256;
  m.all_parented = true;
  m.deliveries[0] = {5, 1280, 5000};
  m.deliveries[1] = {2, 2, 0};
  m.collectives[static_cast<std::size_t>(collective_kind::broadcast)] = {7, 6, 1};
  m.collectives[static_cast<std::size_t>(collective_kind::reduce)] = {2, 1, 0};
  m.transport.bytes_sent = 123456;
  m.transport.bytes_received = 654321;
  m.transport.frames_sent = 40;
  m.transport.frames_received = 41;
  m.transport.connections_opened = 3;
  m.transport.connections_accepted = 2;
  m.transport.inbound_failures[static_cast<std::size_t>(net::connection_failure::wrong_secret)] = 9;
  m.transport.outbound_failures[static_cast<std::size_t>(net::connection_failure::connect_failed)] = 4;
  m.parent_changes = {{{1, tree_kind::latency}, 2}, {{1, tree_kind::bandwidth}, 1}};
  m.parents = {{{1, tree_kind::latency}, 1, 1500us, 1.25e8}, {{2, tree_kind::bandwidth}, 0, 0us, 0}};
  m.probes_completed = 12;
  m.probes_abandoned = 1;
  m.members_joined = 3;
  m.members_left = 1;
  m.crashes_detected = 1;
  m.vnodes_adopted = 64;
  m.vnodes_disowned = 0;
  m.frames_from_buried = 5;
  m.suspicions = 7;
  m.suspicions_cleared = 6;

  const auto text = prometheus_text(m);
  const std::vector<std::string> lines{
      "# TYPE banyan_node_info gauge",
      std::string("banyan_node_info{id=\"3\",incarnation=\"18446744073709551557\",version=\"")
          + BANYAN_VERSION_STRING + "\"} 1",
      "banyan_state{state=\"member\"} 1",
      "banyan_state{state=\"joining\"} 0",
      "# TYPE banyan_members gauge",
      "banyan_members 4",
      "banyan_own_vnodes 256",
      "banyan_all_parented 1",
      "# TYPE banyan_deliveries_total counter",
      "banyan_deliveries_total{kind=\"broadcast\"} 5",
      "banyan_deliveries_total{kind=\"message\"} 2",
      "banyan_vnode_deliveries_total{kind=\"broadcast\"} 1280",
      "banyan_delivered_bytes_total{kind=\"broadcast\"} 5000",
      "# TYPE banyan_collectives_total counter",
      "banyan_collectives_total{kind=\"broadcast\",outcome=\"started\"} 7",
      "banyan_collectives_total{kind=\"broadcast\",outcome=\"completed\"} 6",
      "banyan_collectives_total{kind=\"broadcast\",outcome=\"failed\"} 1",
      "banyan_collectives_total{kind=\"reduce\",outcome=\"completed\"} 1",
      "banyan_collectives_total{kind=\"scatter_allgather\",outcome=\"started\"} 0",
      "banyan_sent_bytes_total 123456",
      "banyan_received_bytes_total 654321",
      "banyan_sent_frames_total 40",
      "banyan_received_frames_total 41",
      "banyan_connections_total{side=\"outbound\"} 3",
      "banyan_connections_total{side=\"inbound\"} 2",
      "banyan_connection_failures_total{side=\"inbound\",reason=\"wrong_secret\"} 9",
      "banyan_connection_failures_total{side=\"inbound\",reason=\"stranger_budget\"} 0",
      "banyan_connection_failures_total{side=\"outbound\",reason=\"connect_failed\"} 4",
      "banyan_parent_changes_total{tree=\"latency\",root=\"1\"} 2",
      "banyan_parent_changes_total{tree=\"bandwidth\",root=\"1\"} 1",
      "# TYPE banyan_parent_rtt_seconds gauge",
      "banyan_parent_rtt_seconds{tree=\"latency\",root=\"1\",parent=\"1\"} 0.0015",
      "banyan_parent_rtt_seconds{tree=\"bandwidth\",root=\"2\",parent=\"0\"} 0",
      "banyan_parent_bandwidth_bytes_per_second{tree=\"latency\",root=\"1\",parent=\"1\"} 125000000",
      "banyan_probes_total{outcome=\"completed\"} 12",
      "banyan_probes_total{outcome=\"abandoned\"} 1",
      "banyan_membership_changes_total{change=\"joined\"} 3",
      "banyan_membership_changes_total{change=\"left\"} 1",
      "banyan_crashes_detected_total 1",
      "banyan_vnodes_adopted_total 64",
      "banyan_vnodes_disowned_total 0",
      "banyan_frames_from_buried_total 5",
      "banyan_suspicions_total 7",
      "banyan_suspicions_cleared_total 6",
  };
  for (auto& l : lines)
    BOOST_TEST(has_line(text, l), "missing: " << l << "\n" << text);
  // No "none" kind or reason; every family has HELP and TYPE; nothing was left out.
  BOOST_TEST(text.find("\"none\"") == std::string::npos);
  BOOST_TEST(text.find("invalid metric family") == std::string::npos);
  for (auto& f : metric_families(m)) {
    BOOST_TEST(f.name.rfind("banyan_", 0) == 0u, f.name);
    BOOST_TEST(has_line(text, "# HELP " + f.name + " " + f.help), f.name);
    BOOST_TEST((f.kind == net::metric_family::type::counter) == (f.name.size() > 6 && f.name.substr(f.name.size() - 6) == "_total"),
               f.name);
  }
}

BOOST_AUTO_TEST_CASE(an_unstarted_node_s_metrics_render_too) {
  node_metrics m;
  m.id = 0;
  const auto text = prometheus_text(m);
  BOOST_TEST(has_line(text, "banyan_state{state=\"idle\"} 1"), text);
  BOOST_TEST(has_line(text, "banyan_members 0"), text);
  // No parents: the families are there, without samples.
  BOOST_TEST(has_line(text, "# TYPE banyan_parent_rtt_seconds gauge"), text);
  BOOST_TEST(text.find("banyan_parent_rtt_seconds{") == std::string::npos, text);
}
