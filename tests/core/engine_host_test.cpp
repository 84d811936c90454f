// engine_host: frames, bounces and timers reach the engine of their kind, view changes
// the engines that follow the view, in order; holding and drained cover every engine.
#define BOOST_TEST_MODULE core_engine_host
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "banyan/core/engine_host.hpp"

using namespace banyan;

namespace {

/// Records every event as a line "<name> <event>", answers frames with `take`.
struct probe_engine final : collective_engine {
  probe_engine(std::string name, std::vector<collective_kind> ks, std::vector<std::string>& log)
    : name_(std::move(name)), kinds_(std::move(ks)), log_(log) {}
  std::vector<collective_kind> kinds() const override { return kinds_; }
  collective_kind kind() const override { return kinds_.front(); }
  bool on_message(timestamp, proc_id from, const wire::message&) override {
    log_.push_back(name_ + " message from " + std::to_string(from));
    out_.sends.push_back({0, from, wire::ping{}});
    return take;
  }
  void on_timer(timestamp, std::uint64_t token) override {
    log_.push_back(name_ + " timer " + std::to_string(token));
  }
  void on_undeliverable(timestamp, proc_id to, const wire::message&) override {
    log_.push_back(name_ + " bounce from " + std::to_string(to));
  }
  void on_view_change(timestamp, const view_change& c) override {
    log_.push_back(name_ + " view " + c.adopted.to_string());
  }
  bool holding() const override { return hold; }
  bool drained(timestamp, const send_fates& f) const override {
    return !hold && f.none_can_return(sent, timestamp{}, timestamp{});
  }
  std::uint64_t frames_sent() const override { return sent; }
  timestamp last_send() const override { return timestamp{std::chrono::seconds(sent)}; }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_ = {}; }

  bool take = true;
  bool hold = false;
  std::uint64_t sent = 0;

private:
  std::string name_;
  std::vector<collective_kind> kinds_;
  std::vector<std::string>& log_;
  engine_outbox out_;
};

wire::message segment_of(collective_kind k) {
  wire::bcast_segment s;
  s.op = {1, 1, k};
  return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(events_reach_the_engine_of_their_kind_and_are_carried_out) {
  std::vector<std::string> log;
  std::vector<std::string> carried;
  engine_host host{[&](collective_engine& e) {
    carried.push_back(std::string(to_string(e.kind())) + " " +
                      std::to_string(e.outbox().sends.size()));
    e.clear_outbox();
  }};
  auto& b = host.add(std::make_unique<probe_engine>(
    "b", std::vector<collective_kind>{collective_kind::broadcast, collective_kind::message}, log));
  host.add(std::make_unique<probe_engine>("r", std::vector<collective_kind>{collective_kind::reduce},
                                          log));
  host.add(std::make_unique<probe_engine>(
             "s", std::vector<collective_kind>{collective_kind::static_broadcast}, log),
           false);
  const timestamp now{};
  BOOST_TEST(host.on_message(now, 4, segment_of(collective_kind::message)));
  wire::reduce_partial p;
  p.collective = collective_kind::reduce;
  BOOST_TEST(host.on_message(now, 5, p));
  BOOST_TEST(host.on_message(now, 6, segment_of(collective_kind::static_broadcast)));
  // Nobody's: no engine of its kind, or none at all (a supervisor message).
  BOOST_TEST(!host.on_message(now, 7, segment_of(collective_kind::scatter_allgather)));
  BOOST_TEST(!host.on_message(now, 7, segment_of(collective_kind::none)));
  BOOST_TEST(!host.on_message(now, 7, wire::ping{}));
  // Refused by its engine: false, and still carried out.
  b.take = false;
  BOOST_TEST(!host.on_message(now, 8, segment_of(collective_kind::broadcast)));
  BOOST_TEST(host.on_undeliverable(now, 9, segment_of(collective_kind::message)));
  BOOST_TEST(!host.on_undeliverable(now, 9, segment_of(collective_kind::scatter_allgather)));
  BOOST_TEST(host.on_timer(now, collective_kind::reduce, 3));
  BOOST_TEST(!host.on_timer(now, collective_kind::static_reduce, 3));
  // Only the engines that follow the view, in registration order.
  host.on_view_change(now, view_change{vnode_set{2, 3}});
  const std::vector<std::string> want_log{
    "b message from 4", "r message from 5", "s message from 6", "b message from 8",
    "b bounce from 9",  "r timer 3",        "b view {2-3}",     "r view {2-3}"};
  BOOST_TEST(log == want_log, boost::test_tools::per_element());
  const std::vector<std::string> want_carried{"broadcast 1", "reduce 1", "static_broadcast 1",
                                              "broadcast 1", "broadcast 0", "reduce 0",
                                              "broadcast 0", "reduce 0"};
  BOOST_TEST(carried == want_carried, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_new_engine_of_a_kind_replaces_the_old_in_its_place) {
  std::vector<std::string> log;
  engine_host host;
  host.add(std::make_unique<probe_engine>("a", std::vector<collective_kind>{collective_kind::broadcast}, log));
  host.add(std::make_unique<probe_engine>("r", std::vector<collective_kind>{collective_kind::reduce}, log));
  host.add(std::make_unique<probe_engine>(
    "b", std::vector<collective_kind>{collective_kind::broadcast, collective_kind::message}, log));
  host.on_view_change(timestamp{});
  const std::vector<std::string> want{"b view {}", "r view {}"};
  BOOST_TEST(log == want, boost::test_tools::per_element());
  host.remove(collective_kind::message);
  BOOST_TEST(host.find(collective_kind::broadcast) == nullptr);
  BOOST_TEST(host.find(collective_kind::reduce) != nullptr);
  BOOST_TEST(host.get<probe_engine>(collective_kind::reduce) != nullptr);
}

BOOST_AUTO_TEST_CASE(holding_and_drained_cover_every_engine) {
  std::vector<std::string> log;
  engine_host host;
  BOOST_TEST(!host.holding());
  BOOST_TEST(host.drained(timestamp{}, send_fates::known(0)));
  auto& a = host.add(std::make_unique<probe_engine>(
    "a", std::vector<collective_kind>{collective_kind::broadcast}, log));
  auto& r = host.add(std::make_unique<probe_engine>(
    "r", std::vector<collective_kind>{collective_kind::reduce}, log), false);
  a.sent = 3;
  r.sent = 5;
  BOOST_TEST((host.last_send() == timestamp{std::chrono::seconds(5)}));
  const auto marks = host.frames_sent();
  BOOST_TEST(host.drained_since(timestamp{}, marks));
  r.sent = 6; // sent since the marks: its fate is unknown
  BOOST_TEST(!host.drained_since(timestamp{}, marks));
  r.sent = 5;
  a.hold = true;
  BOOST_TEST(host.holding());
  BOOST_TEST(!host.drained_since(timestamp{}, marks));
  a.hold = false;
  BOOST_TEST(!host.drained(timestamp{}, send_fates::known(4))); // r sent 5
  BOOST_TEST(host.drained(timestamp{}, send_fates::known(5)));
}
