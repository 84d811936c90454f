// The emulated cluster's ledger of all-to-alls (core/alltoall.hpp and the pairwise
// baseline): what reached every vnode, checked block by block.

#include <algorithm>

#include "collective_glue.hpp"

namespace banyan::actors {

void record_alltoall(collective_ledger& ledger, proc_id me, timestamp now,
                     const alltoall_outbox& out) {
  if (out.gathered.empty() && out.deliveries.empty() && out.problems.empty())
    return;
  std::lock_guard<std::mutex> guard{ledger.mtx};
  for (auto& r : out.gathered)
    ledger.reduce_results[r.op].push_back({me, now, r});
  for (auto& d : out.deliveries) {
    auto& per = ledger.alltoalled[d.op];
    d.vnodes.for_each([&](vnode_id w) { ++per[w]; });
    ledger.alltoall_last[d.op] = now;
    auto values = ledger.alltoall_values.find(d.op);
    bool ok = values != ledger.alltoall_values.end() && d.block == values->second.second &&
              d.blocks.size() == d.vnodes.size();
    if (ok) {
      auto& seen = ledger.alltoall_seen[d.op];
      const auto b = d.block;
      // Each destination's place among every vnode: where v's block for it lies in v's
      // contribution.
      std::vector<std::pair<vnode_id, std::size_t>> places;
      std::size_t place = 0;
      d.from.for_each([&](vnode_id u) {
        if (d.vnodes.contains(u))
          places.emplace_back(u, place);
        ++place;
      });
      ok = places.size() == d.vnodes.size();
      std::size_t source = 0;
      d.from.for_each([&](vnode_id v) {
        if (!ok)
          return;
        auto [c, fresh] = seen.try_emplace(v);
        if (fresh)
          c->second = values->second.first(v);
        const auto& contribution = c->second;
        for (auto [w, wi] : places) {
          auto i = d.blocks.find(w);
          ok = ok && i != d.blocks.end() && i->second.size() == d.from.size() * b &&
               (wi + 1) * b <= contribution.size() &&
               std::equal(contribution.begin() + static_cast<std::ptrdiff_t>(wi * b),
                          contribution.begin() + static_cast<std::ptrdiff_t>((wi + 1) * b),
                          i->second.data() + source * b);
        }
        ++source;
      });
    }
    if (!ok)
      ++ledger.bad_alltoalls;
  }
  for (auto& p : out.problems)
    ledger.reduce_problems[p.op].push_back("processor " + std::to_string(me) + ": " + p.detail +
                                           " " + p.vnodes.to_string());
}

} // namespace banyan::actors
