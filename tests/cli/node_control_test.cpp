// The control mode's command interpreter (demos/cli/node_control.hpp) on two real nodes
// in one process (TCP on 127.0.0.1): the origin of a broadcast waiting for acks holds
// its own output lines back until the acks are in. Every wait has a deadline.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "banyan/actors/node.hpp"
#include "node_control.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

node_config config(proc_id id) {
  node_config cfg;
  cfg.id = id;
  cfg.listen = "127.0.0.1:0";
  cfg.secret = "test secret";
  cfg.seed = 2000 + id;
  return cfg;
}

/// The lines a session writes, as the driver would read them.
struct lines {
  std::mutex mtx;
  std::vector<json> all;
  cli::control_session::emit_fn fn() {
    return [this](const std::string& line) {
      auto j = json::parse(line);
      std::lock_guard<std::mutex> lk(mtx);
      all.push_back(std::move(j));
    };
  }
  std::vector<json> get() {
    std::lock_guard<std::mutex> lk(mtx);
    return all;
  }
  /// Lines with this "ev" (and this "op", unless empty).
  std::size_t count(const std::string& ev, const std::string& op = "") {
    std::size_t n = 0;
    for (auto& j : get())
      n += j.value("ev", "") == ev && (op.empty() || j.value("op", "") == op);
    return n;
  }
  /// Index of the first such line; -1 if none.
  long index(const std::string& ev, const std::string& op) {
    auto v = get();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i].value("ev", "") == ev && v[i].value("op", "") == op)
        return static_cast<long>(i);
    return -1;
  }
};

template <class F>
bool poll_until(std::chrono::milliseconds limit, F done) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_origin_holds_its_lines_until_its_acks_are_in) {
  node a(config(0));
  node b(config(1));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  auto fa = a.found(vnode_set::range(0, 10));
  BOOST_REQUIRE(fa.wait_for(10s) == std::future_status::ready);
  BOOST_REQUIRE(!fa.get().has_value());
  auto fb = b.join({{a.address()}});
  BOOST_REQUIRE(fb.wait_for(15s) == std::future_status::ready);
  BOOST_REQUIRE(!fb.get().has_value());
  BOOST_REQUIRE(poll_until(20s, [&] {
    auto sa = a.status(), sb = b.status();
    return sa.all_parented && sb.all_parented && !sa.busy && !sb.busy && sa.members.size() == 2
           && sb.members.size() == 2;
  }));

  lines la, lb;
  // A hold far longer than the test: lines come out only at an "acked" or at the end.
  cli::control_session sa(a, {}, la.fn(), 60s);
  cli::control_session sb(b, {}, lb.fn(), 60s);
  sa.handle("acks on"); // b's acks stay off for now

  // 1. b does not ack: every line of a's broadcast stays held at a; b writes its own.
  sa.handle("bcast 3");
  BOOST_REQUIRE(poll_until(10s, [&] {
    sa.collect();
    sb.collect();
    return lb.count("delivered") == 1;
  }));
  const auto op1 = lb.get().back().value("op", "");
  BOOST_TEST(lb.get().back().value("ok", false));
  sa.collect();
  BOOST_TEST(la.count("bcast") == 0u);
  BOOST_TEST(la.count("delivered") == 0u);

  // 2. b acks from now on: its ack of a second broadcast counts for the oldest one
  // waiting (acks carry no name, docs/cluster.md), and the acked line brings out what
  // was held before it, with the times it happened at.
  sb.handle("acks on");
  sa.handle("bcast 5");
  BOOST_REQUIRE(poll_until(10s, [&] {
    sa.collect();
    sb.collect();
    return la.count("acked") == 1;
  }));
  const auto acked_at = la.index("acked", op1);
  BOOST_REQUIRE(acked_at >= 0);
  const auto bcast1 = la.index("bcast", op1);
  BOOST_TEST(bcast1 >= 0);
  BOOST_TEST(bcast1 < acked_at);
  // Its stamp is when it started: before b got it.
  const auto b_delivered1 = lb.get()[static_cast<std::size_t>(lb.index("delivered", op1))];
  BOOST_TEST(la.get()[static_cast<std::size_t>(bcast1)].value("t_us", std::int64_t{0})
             <= b_delivered1.value("t_us", std::int64_t{0}));

  // 3. At the end nothing is lost: each line exactly once.
  BOOST_REQUIRE(poll_until(10s, [&] {
    sa.collect();
    sb.collect();
    return lb.count("delivered") == 2;
  }));
  const auto op2 = lb.get().back().value("op", "");
  BOOST_TEST(op2 != op1);
  sa.finish(5s);
  for (const auto& op : {op1, op2}) {
    BOOST_TEST(la.count("bcast", op) == 1u, "bcast " << op);
    BOOST_TEST(la.count("delivered", op) == 1u, "a's own delivery of " << op);
    BOOST_TEST(lb.count("delivered", op) == 1u, "b's delivery of " << op);
  }
  BOOST_TEST(la.count("acked", op1) == 1u);
  BOOST_TEST(la.count("acked", op2) == 0u); // b acked once
}

// The "delivered" line is written out by hand (it is on the path of every hop): it must be
// exactly what nlohmann writes for the same object, which the driver parses.
BOOST_AUTO_TEST_CASE(the_delivered_line_is_the_json_object_it_stands_for) {
  struct row {
    wire::collective_id op;
    bool message;
    std::size_t vnodes, size;
    bool ok;
    std::int64_t t_us;
  };
  const row rows[] = {
    {{0, 1}, false, 1, 1, true, 0},
    {{7, (std::uint64_t{1234567} << 32) + 5}, false, 100, 67108864, true, 9000000000123},
    {{max_node_id, (std::uint64_t{1} << 63) | 42}, true, 0, 0, false, -5},
    {{3, ~std::uint64_t{0}}, true, ~std::size_t{0}, ~std::size_t{0}, false,
     std::numeric_limits<std::int64_t>::max()},
  };
  for (auto& r : rows) {
    json want{{"ev", "delivered"},
              {"t_us", r.t_us},
              {"op", std::to_string(r.op.origin) + ":" + std::to_string(r.op.seq)},
              {"kind", r.message ? "message" : "broadcast"},
              {"vnodes", r.vnodes},
              {"size", r.size},
              {"ok", r.ok}};
    const auto line = cli::delivered_line(r.op, r.message, r.vnodes, r.size, r.ok, r.t_us);
    BOOST_TEST(line == want.dump());
    BOOST_TEST(json::parse(line) == want);
  }
}

namespace {

/// The reduction `k` over `vnodes` of `count` elements of reduction `seq`, computed
/// element by element from `reduce_element`, as `T`.
template <class T>
banyan::shared_bytes direct_result(banyan::reduce_kind k, const banyan::vnode_set& vnodes,
                                   std::size_t count, std::uint64_t seq) {
  std::vector<std::uint8_t> out(count * sizeof(T));
  for (std::size_t i = 0; i < count; ++i) {
    bool first = true;
    T acc{};
    vnodes.for_each([&](banyan::vnode_id v) {
      const T x = static_cast<T>(banyan::cli::reduce_element(v, i, seq));
      if (first)
        acc = x;
      else if (k == banyan::reduce_kind::sum)
        acc = static_cast<T>(acc + x);
      else if (k == banyan::reduce_kind::max)
        acc = std::max(acc, x);
      first = false;
    });
    std::memcpy(out.data() + i * sizeof(T), &acc, sizeof(T));
  }
  return banyan::shared_bytes(std::move(out));
}

} // namespace

BOOST_AUTO_TEST_CASE(a_reduction_result_is_checked_against_every_vnodes_contribution) {
  using namespace banyan;
  vnode_set vnodes = vnode_set::range(0, 10);
  vnodes.insert(20);
  vnodes.insert(4000);
  const reduce_op sum{reduce_kind::sum, element_type::int32, 0};
  const reduce_op max{reduce_kind::max, element_type::float64, 0};
  // Ordinary numbers, and one so near 2^64 that the formula's sum wraps around.
  for (std::uint64_t seq : {std::uint64_t{1}, std::uint64_t{12345},
                            std::numeric_limits<std::uint64_t>::max() - 500}) {
    auto good = direct_result<std::int32_t>(reduce_kind::sum, vnodes, 1000, seq);
    BOOST_TEST(cli::reduce_result_ok(sum, vnodes, 1000, seq, good), seq);
    BOOST_TEST(cli::reduce_result_ok(max, vnodes, 1000, seq,
                                     direct_result<double>(reduce_kind::max, vnodes, 1000, seq)),
               seq);
    // One element off, the wrong vnodes, the wrong number: refused.
    auto bad = good.to_vector();
    bad[4 * 777] ^= 1;
    BOOST_TEST(!cli::reduce_result_ok(sum, vnodes, 1000, seq, shared_bytes(std::move(bad))), seq);
    BOOST_TEST(!cli::reduce_result_ok(sum, vnode_set::range(0, 10), 1000, seq, good), seq);
    BOOST_TEST(!cli::reduce_result_ok(sum, vnodes, 1000, seq + 1, good), seq);
    BOOST_TEST(!cli::reduce_result_ok(sum, vnodes, 999, seq, good), seq);
  }
}
