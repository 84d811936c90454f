// The emulated cluster's ledger of what the collective engines delivered, gathered or
// found wrong, checked against what the cluster sent (all-to-alls: alltoall_record.cpp).

#include <algorithm>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "banyan/core/allgather.hpp"
#include "banyan/core/allreduce.hpp"
#include "banyan/core/alltoall.hpp"
#include "banyan/core/broadcast_collective.hpp"
#include "banyan/core/mpich_allreduce.hpp"
#include "banyan/core/pairwise_alltoall.hpp"
#include "banyan/core/reduce_collective.hpp"
#include "banyan/core/ring_allgather.hpp"
#include "banyan/core/scatter_allgather_collective.hpp"
#include "collective_glue.hpp"

namespace banyan::actors {

namespace {

/// Whether `d` carries exactly the bytes the cluster sent (`bytes` of payload_fill).
bool payload_ok(const shared_bytes& b, std::size_t bytes) {
  if (b.size() != bytes)
    return false;
  for (auto x : b)
    if (x != payload_fill)
      return false;
  return true;
}

/// Records what a broadcast-like engine delivered.
void record(collective_ledger& ledger, timestamp now, const broadcast_outbox& bo) {
  if (bo.deliveries.empty())
    return;
  std::lock_guard<std::mutex> guard{ledger.mtx};
  for (auto& d : bo.deliveries) {
    auto& per = ledger.deliveries[d.op];
    d.vnodes.for_each([&](vnode_id v) { per[v].push_back(now); });
    if (auto b = ledger.blocks.find(d.op); b != ledger.blocks.end()) {
      // A scatter: each vnode's own block, in vnode order.
      bool ok = d.payload.size() == b->second * d.vnodes.size();
      std::size_t at = 0;
      d.vnodes.for_each([&](vnode_id v) {
        for (std::size_t i = 0; ok && i < b->second; ++i)
          ok = d.payload.data()[at + i] == block_byte(v, i);
        at += b->second;
      });
      if (!ok)
        ++ledger.bad_payloads;
      continue;
    }
    auto size = ledger.sizes.find(d.op);
    if (size == ledger.sizes.end() || !payload_ok(d.payload, size->second) ||
        d.p2p != (ledger.targets.count(d.op) > 0))
      ++ledger.bad_payloads;
  }
}

/// Records what a reduction engine completed or found wrong.
void record(collective_ledger& ledger, proc_id me, timestamp now, const reduce_outbox& ro) {
  if (ro.results.empty() && ro.problems.empty())
    return;
  std::lock_guard<std::mutex> guard{ledger.mtx};
  for (auto& r : ro.results)
    ledger.reduce_results[r.op].push_back({me, now, r});
  for (auto& p : ro.problems)
    ledger.reduce_problems[p.op].push_back("processor " + std::to_string(me) +
                                               ": " + p.detail + " " + p.vnodes.to_string());
}

/// Records what an allreduce or barrier engine gathered, delivered or found wrong.
void record(collective_ledger& ledger, proc_id me, timestamp now, collective_kind kind,
            const allreduce_outbox& ao) {
  if (ao.reduced.empty() && ao.deliveries.empty() && ao.problems.empty())
    return;
  std::lock_guard<std::mutex> guard{ledger.mtx};
  for (auto& r : ao.reduced)
    ledger.allreduces[{kind, r.op}].reduced.push_back({me, now, r});
  for (auto& d : ao.deliveries) {
    auto& e = ledger.allreduces[{kind, d.op}];
    if (e.reduced.empty() && !e.first_value)
      e.first_value = d.value; // no root (a baseline): the first one delivered
    const auto& want = e.reduced.empty() ? *e.first_value : e.reduced.front().result.value;
    if (!(want == d.value))
      ++e.wrong_values;
    d.vnodes.for_each([&](vnode_id v) { e.delivered[v].emplace_back(now, me); });
  }
  for (auto& p : ao.problems)
    ledger.allreduces[{kind, p.op}].problems.push_back(
      "processor " + std::to_string(me) + ": " + p.detail + " " + p.vnodes.to_string());
}

/// Records what an allgather engine completed (at the root's owner), delivered or found
/// wrong.
void record(collective_ledger& ledger, proc_id me, timestamp now, const allgather_outbox& ao) {
  if (ao.gathered.empty() && ao.deliveries.empty() && ao.problems.empty())
    return;
  std::lock_guard<std::mutex> guard{ledger.mtx};
  for (auto& r : ao.gathered)
    ledger.reduce_results[r.op].push_back({me, now, r});
  for (auto& d : ao.deliveries) {
    auto& per = ledger.allgathered[d.op];
    d.vnodes.for_each([&](vnode_id v) { ++per[v]; });
    ledger.allgather_last[d.op] = now;
    auto values = ledger.allgather_values.find(d.op);
    bool ok = values != ledger.allgather_values.end();
    std::size_t at = 0;
    d.all.for_each([&](vnode_id v) {
      if (!ok)
        return;
      auto want = values->second(v);
      ok = at + want.size() <= d.blocks.size() &&
           std::equal(want.begin(), want.end(), d.blocks.data() + at);
      at += want.size();
    });
    if (!ok || at != d.blocks.size())
      ++ledger.bad_allgathers;
  }
  for (auto& p : ao.problems)
    ledger.reduce_problems[p.op].push_back("processor " + std::to_string(me) +
                                               ": " + p.detail + " " + p.vnodes.to_string());
}

/// Which recorder of carry_out_engine an engine takes: a property of its dynamic type,
/// found once per type (the chain of dynamic_casts ran for every engine on every event).
enum class recorder : std::uint8_t {
  none, broadcast, reduce, sag, allreduce, mpich, allgather, ring, alltoall, pairwise
};

recorder recorder_of(collective_engine& e) {
  static thread_local std::vector<std::pair<std::type_index, recorder>> known;
  const std::type_index type{typeid(e)};
  for (auto& [t, r] : known)
    if (t == type)
      return r;
  recorder r = recorder::none;
  if (dynamic_cast<broadcast_collective*>(&e))
    r = recorder::broadcast;
  else if (dynamic_cast<reduce_collective*>(&e))
    r = recorder::reduce;
  else if (dynamic_cast<scatter_allgather_collective*>(&e))
    r = recorder::sag;
  else if (dynamic_cast<allreduce_collective*>(&e))
    r = recorder::allreduce;
  else if (dynamic_cast<mpich_allreduce_collective*>(&e))
    r = recorder::mpich;
  else if (dynamic_cast<allgather_collective*>(&e))
    r = recorder::allgather;
  else if (dynamic_cast<ring_allgather_collective*>(&e))
    r = recorder::ring;
  else if (dynamic_cast<alltoall_collective*>(&e))
    r = recorder::alltoall;
  else if (dynamic_cast<pairwise_alltoall_collective*>(&e))
    r = recorder::pairwise;
  known.emplace_back(type, r);
  return r;
}

} // namespace

void record_engine(collective_ledger& ledger, proc_id me, timestamp now, collective_engine& e) {
  switch (recorder_of(e)) {
  case recorder::none:
    break;
  case recorder::broadcast:
    record(ledger, now, dynamic_cast<broadcast_collective&>(e).out());
    break;
  case recorder::reduce:
    record(ledger, me, now, dynamic_cast<reduce_collective&>(e).out());
    break;
  case recorder::sag:
    record(ledger, now, dynamic_cast<scatter_allgather_collective&>(e).out());
    break;
  case recorder::allreduce:
    record(ledger, me, now, e.kind(), dynamic_cast<allreduce_collective&>(e).out());
    break;
  case recorder::mpich:
    record(ledger, me, now, e.kind(), dynamic_cast<mpich_allreduce_collective&>(e).out());
    break;
  case recorder::allgather:
    record(ledger, me, now, dynamic_cast<allgather_collective&>(e).out());
    break;
  case recorder::ring:
    record(ledger, me, now, dynamic_cast<ring_allgather_collective&>(e).out());
    break;
  case recorder::alltoall:
    record_alltoall(ledger, me, now, dynamic_cast<alltoall_collective&>(e).out());
    break;
  case recorder::pairwise:
    record_alltoall(ledger, me, now, dynamic_cast<pairwise_alltoall_collective&>(e).out());
    break;
  }
}

} // namespace banyan::actors
