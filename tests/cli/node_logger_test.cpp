// node_logger: levels, the text and JSON formats, and lines about untrusted input limited
// per category with the count held back.

#include <boost/test/unit_test.hpp>

#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "node_logger.hpp"

using namespace banyan;
using namespace banyan::cli;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(levels_and_formats_parse) {
  BOOST_TEST((parse_log_level("error") == log_level::error));
  BOOST_TEST((parse_log_level("warn") == log_level::warn));
  BOOST_TEST((parse_log_level("info") == log_level::info));
  BOOST_TEST((parse_log_level("debug") == log_level::debug));
  BOOST_TEST(!parse_log_level("warning").has_value());
  BOOST_TEST(!parse_log_level("").has_value());
  BOOST_TEST((parse_log_format("text") == log_format::text));
  BOOST_TEST((parse_log_format("json") == log_format::json));
  BOOST_TEST(!parse_log_format("xml").has_value());
}

BOOST_AUTO_TEST_CASE(the_text_format_names_the_level_except_for_info) {
  const auto t = std::chrono::system_clock::time_point{};
  BOOST_TEST(format_log_line({log_level::info, "left", "left", {}}, log_format::text, 3, t)
             == "node 3: left");
  BOOST_TEST(format_log_line({log_level::warn, "member_crashed", "member_crashed: processor 1", {}},
                             log_format::text, 3, t)
             == "node 3: warn: member_crashed: processor 1");
  BOOST_TEST(format_log_line({log_level::error, "x", "cannot join: y", {}}, log_format::text, 0, t)
             == "node 0: error: cannot join: y");
  BOOST_TEST(format_log_line({log_level::debug, "busy", "busy", {}}, log_format::text, 12, t)
             == "node 12: debug: busy");
}

BOOST_AUTO_TEST_CASE(the_json_format_is_one_object_per_line_with_ts_level_node_event_fields) {
  // 2025-01-02T03:04:05.678Z
  const auto t = std::chrono::system_clock::time_point{} + 1735787045678ms;
  BOOST_TEST(utc_timestamp(t) == "2025-01-02T03:04:05.678Z");
  nlohmann::ordered_json f{{"peer", 5}, {"address", "127.0.0.1:7005"}};
  const auto line = format_log_line({log_level::info, "member_joined", "member_joined: 5 at 127.0.0.1:7005", f},
                                    log_format::json, 3, t);
  BOOST_TEST(line
             == R"({"ts":"2025-01-02T03:04:05.678Z","level":"info","node":3,"event":"member_joined",)"
                R"("msg":"member_joined: 5 at 127.0.0.1:7005","fields":{"peer":5,"address":"127.0.0.1:7005"}})");
  // Bytes that are not UTF-8 (a peer's input quoted in a line) do not break the line.
  const auto odd = format_log_line({log_level::warn, "hostile_input", std::string("bad \xff\xfe bytes"), {}},
                                   log_format::json, 1, t);
  auto j = nlohmann::json::parse(odd, nullptr, false);
  BOOST_REQUIRE(!j.is_discarded());
  BOOST_TEST(j["level"] == "warn");
  BOOST_TEST(j["fields"].is_object());
}

BOOST_AUTO_TEST_CASE(lines_below_the_level_are_dropped) {
  std::ostringstream out;
  node_logger log(7, log_level::warn, log_format::text, out);
  BOOST_TEST(log.enabled(log_level::error));
  BOOST_TEST(log.enabled(log_level::warn));
  BOOST_TEST(!log.enabled(log_level::info));
  log.debug("busy", "busy");
  log.info("joined", "joined: founded");
  log.warn("join_failed", "join_failed: nobody");
  log.error("cannot_join", "cannot join: nobody");
  BOOST_TEST(lines_of(out.str())
             == (std::vector<std::string>{"node 7: warn: join_failed: nobody", "node 7: error: cannot join: nobody"}));
}

BOOST_AUTO_TEST_CASE(untrusted_input_lines_are_limited_per_category_with_the_count_held_back) {
  std::ostringstream out;
  node_logger log(1, log_level::info, log_format::json, out, 200ms);
  for (int i = 0; i < 4; ++i)
    log.hostile("transport", {log_level::warn, "hostile_input", "rejected: bad " + std::to_string(i), {}});
  log.hostile("metrics", {log_level::warn, "metrics_request_refused", "metrics: 400", {}});
  auto lines = lines_of(out.str());
  BOOST_REQUIRE(lines.size() == 2u); // one per category
  BOOST_TEST(nlohmann::json::parse(lines[0])["fields"]["held_back"] == 0);
  std::this_thread::sleep_for(250ms);
  log.hostile("transport", {log_level::warn, "hostile_input", "rejected: bad 4", {}});
  lines = lines_of(out.str());
  BOOST_REQUIRE(lines.size() == 3u);
  auto j = nlohmann::json::parse(lines[2]);
  BOOST_TEST(j["fields"]["held_back"] == 3);
  BOOST_TEST(j["msg"] == "rejected: bad 4 [3 more lines about untrusted input held back]");
  BOOST_TEST(j["event"] == "hostile_input");
}

BOOST_AUTO_TEST_CASE(node_events_get_their_level_event_name_and_fields) {
  auto transport = [](bool hostile, net::connection_failure f, std::string detail) {
    node_event e;
    e.what = node_event::kind::transport;
    e.peer = 4;
    e.detail = std::move(detail);
    e.hostile = hostile;
    e.failure = f;
    return e;
  };
  // Untrusted input: warn, limited as such.
  auto bad = transport(true, net::connection_failure::malformed_handshake,
                       "from 10.0.0.9:5000: bad handshake message: ... (untrusted input)");
  auto r = record_of(bad);
  BOOST_TEST((r.level == log_level::warn));
  BOOST_TEST(r.event == "hostile_input");
  BOOST_TEST(r.message == "from 10.0.0.9:5000: bad handshake message: ... (untrusted input)");
  BOOST_TEST(r.fields["reason"] == "malformed_handshake");
  BOOST_TEST(untrusted_input(bad));
  // A peer hanging up in its handshake (every join's first step): debug, not limited.
  auto closed = transport(true, net::connection_failure::handshake_closed, "from ...: closed");
  BOOST_TEST((record_of(closed).level == log_level::debug));
  BOOST_TEST(!untrusted_input(closed));
  // A peer we connect to with another secret: a warning, not limited.
  auto secret = transport(false, net::connection_failure::wrong_secret, "to 4 at ...: wrong shared secret");
  BOOST_TEST((record_of(secret).level == log_level::warn));
  BOOST_TEST(record_of(secret).event == "misconfigured_peer");
  BOOST_TEST(!untrusted_input(secret));
  // A connection coming up: debug.
  BOOST_TEST((record_of(transport(false, net::connection_failure::none, "to 4: connected")).level
              == log_level::debug));

  node_event crash;
  crash.what = node_event::kind::member_crashed;
  crash.peer = 1;
  crash.detail = "processor 1 taken to have crashed";
  BOOST_TEST((record_of(crash).level == log_level::warn));
  BOOST_TEST(record_of(crash).event == "member_crashed");

  node_event pc;
  pc.what = node_event::kind::parent_changed;
  pc.tree = {2, tree_kind::latency};
  pc.old_parent = 4;
  pc.new_parent = no_proc;
  auto p = record_of(pc);
  BOOST_TEST((p.level == log_level::debug));
  BOOST_TEST(p.fields.dump() == R"({"tree":"latency","root":2,"old_parent":4,"new_parent":null})");

  node_event joined;
  joined.what = node_event::kind::member_joined;
  joined.peer = 5;
  joined.detail = "127.0.0.1:7005";
  auto j = record_of(joined);
  BOOST_TEST((j.level == log_level::info));
  BOOST_TEST(j.message == "member_joined: 5 at 127.0.0.1:7005");
  BOOST_TEST(j.fields.dump() == R"({"peer":5,"address":"127.0.0.1:7005"})");

  node_event adopted;
  adopted.what = node_event::kind::vnodes_adopted;
  adopted.peer = 2;
  adopted.vnodes = vnode_set::range(8, 12);
  BOOST_TEST((record_of(adopted).level == log_level::info));
  BOOST_TEST(record_of(adopted).fields["vnode_count"] == 4);
}
