// The broadcast engine's CPU and heap allocations per message, without a network:
// what one processor's engine spends on a 1-byte broadcast with acknowledgements, the
// workload of `banyan cluster --workload latency` (docs/results.md, "The broadcast
// engine's CPU").
//
// PROCS supervisors on one LAN (like processes on loopback) settle their trees in a
// mini_grid (virtual time); then an engine over each one's `supervisor_view` handles
// REPS broadcasts from processor 0: the root's `broadcast`, every frame handed straight
// to its receiver's `on_message` (tree order), every receiver's acknowledgement (an
// empty `send` to the root's vnode, as the control mode does) and the root's
// `on_message` for it. Each call is timed with steady_clock and its allocations counted
// (a global operator new that counts). Prints a table and writes JSON.
//
//   bench_engine_cpu [--procs 16] [--reps 20000] [--seed 1] [--out FILE]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/core/topology.hpp"
#include "core/counting_new.hpp"
#include "core/mini_grid.hpp"


using namespace banyan;
using clk = std::chrono::steady_clock;

namespace {

/// One kind of call: its times (ns) and allocations.
struct series {
  std::vector<double> ns;
  std::vector<double> allocs;
  double median(std::vector<double> v) const {
    if (v.empty())
      return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
  double mean(const std::vector<double>& v) const {
    double s = 0;
    for (double x : v)
      s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
  }
};

template <class F>
void timed(series& s, F&& f) {
  const auto a0 = banyan::test::allocations_so_far();
  const auto t0 = clk::now();
  f();
  const auto t1 = clk::now();
  const auto a1 = banyan::test::allocations_so_far();
  s.ns.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  s.allocs.push_back(static_cast<double>(a1 - a0));
}

} // namespace

int main(int argc, char** argv) {
  std::size_t procs = 16, reps = 20000;
  std::uint64_t seed = 1;
  std::string out_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--procs")
      procs = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--reps")
      reps = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--out")
      out_path = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_engine_cpu: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  auto topo = parse_topology("group A procs " + std::to_string(procs) + " rtt 0.05ms\n");
  if (!topo) {
    std::fprintf(stderr, "bad topology\n");
    return 1;
  }
  test::mini_grid g{*topo, seed};
  g.start();
  g.run_for(std::chrono::seconds(30)); // trees settle well within this on one LAN
  if (g.busy())
    std::fprintf(stderr, "warning: still busy after 30 s: %s\n", g.busy_report().c_str());

  std::vector<std::unique_ptr<supervisor_view>> views;
  std::vector<std::unique_ptr<broadcast_engine>> engines;
  for (proc_id p = 0; p < procs; ++p) {
    views.push_back(std::make_unique<supervisor_view>(*g.sup(p)));
    broadcast_config cfg;
    cfg.first_seq = (std::uint64_t{p} + 1) << 32;
    engines.push_back(std::make_unique<broadcast_engine>(*views[p], cfg));
  }
  const auto root_vnodes = g.sup(0)->own_vnodes();
  const tree_key lat{0, tree_kind::latency};

  series root_bcast, fwd_recv, leaf_recv, ack_send, ack_recv;
  const auto msg = shared_bytes(std::vector<std::uint8_t>{42});
  const shared_bytes empty;
  std::uint64_t deliveries = 0, frames = 0;
  timestamp now = g.now();
  for (std::size_t r = 0; r < reps; ++r) {
    now += std::chrono::microseconds(500);
    broadcast_outbox out;
    timed(root_bcast, [&] { (void) engines[0]->broadcast(now, msg, out); });
    std::deque<wire::envelope> q(out.sends.begin(), out.sends.end());
    deliveries += out.deliveries.size();
    std::vector<wire::envelope> acks;
    while (!q.empty()) {
      auto e = std::move(q.front());
      q.pop_front();
      ++frames;
      broadcast_outbox o;
      const bool forwards = !views[e.to]->children(lat).empty();
      timed(forwards ? fwd_recv : leaf_recv,
            [&] { (void) engines[e.to]->on_message(now, e.from, e.body, o); });
      for (auto& s : o.sends)
        q.push_back(std::move(s));
      deliveries += o.deliveries.size();
      for (std::size_t d = 0; d < o.deliveries.size(); ++d) {
        broadcast_outbox a;
        timed(ack_send, [&] { (void) engines[e.to]->send(now, root_vnodes, empty, a); });
        for (auto& s : a.sends)
          acks.push_back(std::move(s));
      }
    }
    for (auto& e : acks) {
      broadcast_outbox o;
      timed(ack_recv, [&] { (void) engines[e.to]->on_message(now, e.from, e.body, o); });
      for (auto& s : o.sends) // an ack reaches the root directly: nothing to forward
        q.push_back(std::move(s));
    }
    if (!q.empty()) {
      std::fprintf(stderr, "an ack was forwarded: the root does not own its vnode?\n");
      return 1;
    }
  }
  const auto want = static_cast<std::uint64_t>(reps) * procs;
  if (deliveries != want) {
    std::fprintf(stderr, "deliveries %llu, expected %llu\n",
                 static_cast<unsigned long long>(deliveries), static_cast<unsigned long long>(want));
    return 1;
  }

  std::string tree;
  for (proc_id p = 0; p < procs; ++p)
    tree += (p ? " " : "") + std::to_string(g.sup(p)->parent(lat));
  std::printf("broadcast engine CPU per call, %zu processors on one LAN, %zu 1-byte broadcasts "
              "from 0 with acks (latency tree parents: %s)\n",
              procs, reps, tree.c_str());
  std::printf("%-34s %8s %10s %10s %10s\n", "call", "calls", "median ns", "mean ns", "allocs");
  std::string json = "{\"procs\": " + std::to_string(procs) + ", \"reps\": " + std::to_string(reps) +
                     ", \"frames_per_bcast\": " +
                     std::to_string(static_cast<double>(frames) / static_cast<double>(reps)) +
                     ", \"calls\": {";
  bool first = true;
  for (auto& [name, s] : std::vector<std::pair<const char*, series*>>{
         {"root broadcast", &root_bcast},
         {"forwarder on_message (segment)", &fwd_recv},
         {"leaf on_message (segment)", &leaf_recv},
         {"receiver send (ack)", &ack_send},
         {"root on_message (ack)", &ack_recv}}) {
    std::printf("%-34s %8zu %10.0f %10.0f %10.1f\n", name, s->ns.size(), s->median(s->ns),
                s->mean(s->ns), s->mean(s->allocs));
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s\"%s\": {\"calls\": %zu, \"median_ns\": %.0f, \"mean_ns\": %.0f, "
                  "\"allocs\": %.2f}",
                  first ? "" : ", ", name, s->ns.size(), s->median(s->ns), s->mean(s->ns),
                  s->mean(s->allocs));
    json += buf;
    first = false;
  }
  json += "}}\n";
  if (!out_path.empty()) {
    if (FILE* f = std::fopen(out_path.c_str(), "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}
