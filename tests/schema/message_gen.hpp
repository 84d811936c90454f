#pragma once
// Random messages of every type (fixed seeds), for the codec's tests and the fuzz
// targets' seed corpus (fuzz_corpus_gen.cpp).

#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "banyan/core/messages.hpp"

namespace banyan::test {

namespace wire = banyan::wire;
using bytes = std::vector<std::uint8_t>;

constexpr std::size_t message_type_count = std::variant_size_v<wire::message>;

struct gen {
  std::mt19937_64 rng;
  std::size_t max_list = 5;    // longest list of entries in a message
  std::size_t max_data = 3000; // longest payload (half of them are at most 17 bytes)

  explicit gen(std::uint64_t seed) : rng(seed) {}

  std::uint64_t u64() { return rng(); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(rng()); }
  std::size_t upto(std::size_t n) { return static_cast<std::size_t>(rng() % (n + 1)); }
  bool coin() { return (rng() & 1) != 0; }

  proc_id proc() { return coin() ? static_cast<proc_id>(upto(1000)) : u32(); }
  tree_key key() { return tree_key{proc(), coin() ? tree_kind::latency : tree_kind::bandwidth}; }

  // Canonical intervals (sorted, disjoint, non-adjacent), including ones near the top.
  vnode_set vnodes() {
    std::vector<vnode_set::interval> runs;
    const std::size_t n = upto(6);
    std::uint64_t at = upto(3);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t lo = at + (i == 0 ? 0 : 1 + upto(100));
      const std::uint64_t hi = lo + 1 + upto(coin() ? 3 : 100000);
      if (hi > std::numeric_limits<std::uint32_t>::max())
        break;
      runs.push_back({static_cast<banyan::vnode_id>(lo), static_cast<banyan::vnode_id>(hi)});
      at = hi;
    }
    return vnode_set::from_intervals(runs);
  }

  std::string text() {
    std::string s(upto(20), ' ');
    for (auto& c : s)
      c = static_cast<char>('!' + upto(90));
    return s;
  }

  std::vector<proc_id> path() {
    std::vector<proc_id> p(upto(7));
    for (auto& x : p)
      x = proc();
    return p;
  }

  wire::tree_info info() {
    wire::tree_info t;
    t.tree = key();
    t.connected = coin();
    t.dist = banyan::duration(static_cast<std::int64_t>(u64() >> 1) * (coin() ? 1 : -1));
    t.est = coin() ? banyan::infinite_rate : static_cast<double>(u32()) * 1.25;
    t.children = static_cast<std::uint32_t>(upto(50));
    t.path = path();
    t.reattaching = coin();
    return t;
  }
  wire::subtree_entry subtree() { return {key(), vnodes()}; }
  /// A summary as a decoder accepts it (subtree_summary.hpp: figures the prediction can use).
  wire::summary_entry summary() {
    wire::summary_entry e;
    e.tree = key();
    e.summary.half_rtt = banyan::duration(static_cast<std::int64_t>(u64() >> 1));
    e.summary.per_byte = static_cast<double>(u32()) * 1e-12;
    e.summary.bottleneck = coin() ? banyan::infinite_rate : 1 + static_cast<double>(u32()) * 1.25;
    e.summary.depth = 1 + static_cast<std::uint32_t>(upto(60));
    e.summary.complete = coin();
    return e;
  }
  wire::route_entry route() { return {vnodes(), proc(), u64()}; }
  wire::open_root open_root() { return {proc(), u64(), u64(), coin()}; }
  wire::member member() { return {proc(), text(), coin() ? 0 : u64()}; }
  wire::adopt_verdict verdict() { return {key(), coin(), info(), coin() ? proc() : banyan::no_proc}; }
  wire::reduce_record record() { return {vnodes(), u64()}; }
  wire::reduce_done done() { return {u64(), u32(), vnodes()}; }

  // Bytes of any length (word boundaries included), half the time a slice of a larger
  // buffer, so that the encoder must honour the slice's offset.
  banyan::shared_bytes data() {
    const std::size_t n = coin() ? upto(17) : upto(max_data);
    const std::size_t before = coin() ? upto(9) : 0;
    bytes b(before + n + upto(5));
    for (auto& x : b)
      x = static_cast<std::uint8_t>(rng());
    return banyan::shared_bytes(std::move(b)).slice(before, n);
  }
  banyan::reduce_op fn() {
    return {static_cast<banyan::reduce_kind>(upto(4)), static_cast<banyan::element_type>(upto(4)),
            coin() ? 0 : u32()};
  }
  banyan::collective_kind collective() {
    return static_cast<banyan::collective_kind>(upto(banyan::collective_kind_count - 1));
  }
  /// An operation's name as a frame can carry it: a 32-bit number and a 32-bit life.
  wire::collective_id op() { return {proc(), u32(), collective(), u32()}; }
  wire::bcast_segment segment() {
    wire::bcast_segment m;
    m.op = op();
    m.kind = coin() ? tree_kind::latency : tree_kind::bandwidth;
    m.vnodes = vnodes();
    m.direct = coin();
    m.hops = u32();
    m.stream = u64();
    m.first = coin();
    m.index = u32();
    m.count = u32();
    m.total = u64();
    m.payload = data();
    return m;
  }
  wire::reduce_partial partial() {
    return {collective(), u64(), u32(), fn(), coin() ? tree_kind::latency : tree_kind::bandwidth, vnodes(),
            coin(), u32(), data(), coin()};
  }

  template <class F>
  auto list(F make) {
    std::vector<decltype(make())> xs(upto(max_list));
    for (auto& x : xs)
      x = make();
    return xs;
  }

  // A message of alternative `type` of wire::message.
  wire::message message(std::size_t type) {
    switch (type) {
      case 0: return wire::ping{u64()};
      case 1: return wire::pong{u64()};
      case 2: {
        wire::bw_request q{u64(), coin() ? u64() : 0};
        if (coin())
          q.buckets = list([&] { return u32(); });
        q.buckets_from = static_cast<std::uint16_t>(q.buckets.size() / 2); // no draw: the sequence stays
        return q;
      }
      case 3: {
        wire::bw_reply r{u64(), list([&] { return info(); }), static_cast<std::uint32_t>(upto(300)),
                         {}, {}, {}};
        if (coin()) // the view left out: no members, departures or routes
          r.view_omitted = true;
        else {
          r.members = list([&] { return member(); });
          r.departed = list([&] { return member(); });
          r.routes = list([&] { return route(); });
          if (coin()) // only some buckets of it, named in increasing order
            for (std::uint16_t b = 0, n = static_cast<std::uint16_t>(upto(max_list)); b < n; ++b)
              r.view_buckets.push_back(static_cast<std::uint16_t>(b * 3 + 1));
          r.view_buckets_left = static_cast<std::uint16_t>(r.view_buckets.size() % 3);
        }
        if (coin())
          r.open_roots = list([&] { return open_root(); });
        return r;
      }
      case 4: return wire::adopt_request{u64(), list([&] { return subtree(); })};
      case 5: return wire::adopt_reply{u64(), list([&] { return verdict(); })};
      case 6: return wire::release{list([&] { return key(); })};
      case 7: {
        wire::orphan o{list([&] { return key(); }), {}};
        if (coin())
          for (std::size_t i = 0; i < o.trees.size(); ++i)
            o.steps.push_back(list([&] { return proc(); }));
        return o;
      }
      case 8: return wire::tree_update{list([&] { return info(); })};
      case 9: return wire::subtree_update{list([&] { return subtree(); })};
      case 10: return wire::join_request{member(), vnodes()};
      case 11: return wire::join_accept{list([&] { return member(); }), list([&] { return route(); })};
      case 12: return wire::member_joined{member()};
      case 13: return wire::member_left{proc(), list([&] { return route(); }), u64(), coin()};
      case 14: return wire::handover_request{vnodes(), proc()};
      case 15: return wire::routing_update{list([&] { return route(); })};
      case 16: return wire::vnode_handover{route()};
      case 17: return wire::vnode_handover_ack{u64(), coin()};
      case 18: return segment();
      case 19: return partial();
      case 20: return wire::reduce_handoff{collective(), list([&] { return record(); }), u32(),
                                           list([&] { return done(); })};
      case 21: return wire::bcast_offer{op(), vnodes(), u64(), u32()};
      case 22: return wire::bcast_answer{op(), u64(), coin()};
      case 23: return wire::bcast_ack{op(), vnodes()};
      case 24: return wire::ping_req{u64(), proc()};
      case 25: return wire::ping_ack{u64(), proc(), coin()};
      case 26: return wire::merge_offer{list([&] { return member(); })};
      case 27: return wire::reduce_ack{collective(), u64(), vnodes()};
      case 28: return wire::reduce_ask{collective(), u64(), vnodes()};
      case 29: return wire::tree_summary{list([&] { return summary(); })};
      case 30: return wire::trees_open{list([&] { return open_root(); })};
    }
    throw std::out_of_range("no message type " + std::to_string(type));
  }

  wire::envelope envelope(std::size_t type) { return {proc(), proc(), message(type)}; }
};

} // namespace banyan::test
