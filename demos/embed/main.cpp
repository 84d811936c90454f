// Embeds banyan::node in a program of its own: two processors in one process over
// loopback TCP. The first founds the computation, the second joins through its address;
// then a broadcast, an int32 sum reduction, and a graceful leave. Every wait has a
// deadline; the exit status says whether everything arrived exactly once and added up.
#include <banyan/actors/node.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

template <class T>
bool ready(std::future<T>& f, std::chrono::seconds limit) {
  return f.wait_for(limit) == std::future_status::ready;
}

int fail(const std::string& what) {
  std::cerr << "embed_example: " << what << "\n";
  return 1;
}

} // namespace

int main() {
  const auto all = banyan::vnode_set::range(0, 64);
  banyan::node_config ca;
  ca.id = 0;
  ca.secret = "example secret";
  banyan::node_config cb = ca;
  cb.id = 1;
  banyan::node a(ca);
  banyan::node b(cb);

  // Deliveries, per message and vnode, from both nodes' actors.
  std::mutex mtx;
  std::map<banyan::wire::collective_id, std::map<banyan::vnode_id, int>> got;
  auto record = [&](const banyan::node_delivery& d) {
    std::lock_guard<std::mutex> lk(mtx);
    d.vnodes.for_each([&](banyan::vnode_id v) { ++got[d.op][v]; });
  };
  a.on_deliver(record);
  b.on_deliver(record);

  for (auto* n : {&a, &b})
    if (auto port = n->start(); !port)
      return fail(port.err().to_string());
  auto founded = a.found(all);
  if (!ready(founded, 5s) || founded.get())
    return fail("found failed");
  auto joined = b.join({{a.address()}});
  if (!ready(joined, 10s))
    return fail("join timed out");
  if (auto err = joined.get())
    return fail(err->to_string());
  // Wait until both have a parent in every tree rooted elsewhere.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!(a.status().all_parented && b.status().all_parented)) {
    if (std::chrono::steady_clock::now() > deadline)
      return fail("trees did not form");
    std::this_thread::sleep_for(20ms);
  }
  std::cout << "joined: node 0 owns " << a.own_vnodes().size() << " vnodes, node 1 "
            << b.own_vnodes().size() << "\n";

  // A 1 MiB broadcast from node 1: every vnode gets it exactly once.
  auto bc = b.broadcast(banyan::shared_bytes(std::vector<std::uint8_t>(1u << 20, 0x42)));
  if (!ready(bc, 5s))
    return fail("broadcast did not start");
  auto op = bc.get();
  if (!op)
    return fail(op.err().to_string());
  deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mtx);
      auto& per = got[*op];
      bool once = per.size() == all.size();
      for (auto& [v, n] : per)
        once = once && n == 1;
      if (once)
        break;
    }
    if (std::chrono::steady_clock::now() > deadline)
      return fail("the broadcast did not reach every vnode exactly once");
    std::this_thread::sleep_for(10ms);
  }
  std::cout << "broadcast " << banyan::wire::to_string(*op) << " delivered to " << all.size()
            << " vnodes\n";

  // Sum of one int32 per vnode (the vnode's number), rooted at vnode 0.
  banyan::node_reduction r;
  r.seq = 1;
  r.root = 0;
  r.op = {banyan::reduce_kind::sum, banyan::element_type::int32};
  r.count = 1;
  r.values = [](banyan::vnode_id v) {
    std::vector<std::uint8_t> b(4);
    const auto x = static_cast<std::int32_t>(v);
    std::memcpy(b.data(), &x, 4);
    return b;
  };
  auto ra = a.reduce(r);
  auto rb = b.reduce(r);
  if (!ready(ra, 20s) || !ready(rb, 20s))
    return fail("the reduction did not complete");
  std::int64_t sum = -1;
  for (auto* f : {&ra, &rb}) {
    auto res = f->get();
    if (!res)
      return fail(res.err().to_string());
    if (res->value.size() == 4) {
      std::int32_t x = 0;
      std::memcpy(&x, res->value.data(), 4);
      sum = x;
    }
  }
  const std::int64_t want = 63 * 64 / 2;
  std::cout << "sum over vnodes: " << sum << " (expected " << want << ")\n";
  if (sum != want)
    return fail("wrong sum");

  auto left = b.leave();
  if (!ready(left, 10s))
    return fail("leave timed out");
  if (auto err = left.get())
    return fail(err->to_string());
  b.stop(); // waits for its engines to drain
  std::cout << "node 1 left; node 0 owns " << a.own_vnodes().size() << " vnodes\n";
  a.stop();
  return 0;
}
