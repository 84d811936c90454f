#include "view_buckets.hpp"

#include <algorithm>
#include <tuple>

#include "fnv1a.hpp"

namespace banyan::sup {
namespace {

// Every entry starts with its tag and has fields of fixed length or led by their
// length, so no two buckets' contents run together into one stream.
enum tag : std::uint64_t { member_tag = 1, departed_tag = 2, run_tag = 3 };

} // namespace

std::size_t view_bucket(proc_id id, std::size_t n) {
  std::uint64_t x = static_cast<std::uint64_t>(id) + 0x9e3779b97f4a7c15ull; // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<std::size_t>(x % n);
}

std::vector<std::uint32_t> view_bucket_digests(
  const member_table& members,
  const std::map<proc_id, std::set<std::uint64_t>>& departed, const routing_table& routes,
  std::size_t n) {
  std::vector<fnv1a> f(n);
  for (std::size_t i = 0; i < members.size(); ++i) { // ordered by id: within a bucket too
    const auto id = members.id(i);
    auto& b = f[view_bucket(id, n)];
    b.u64(member_tag);
    b.u64(id);
    b.u64(members.incarnation(i));
    b.text(members.address(i));
  }
  for (auto& [id, incs] : departed) {
    auto& b = f[view_bucket(id, n)];
    b.u64(departed_tag);
    b.u64(id);
    b.u64(incs.size());
    for (auto inc : incs) // ordered
      b.u64(inc);
  }
  for (auto& r : routes.runs()) { // canonical: equal tables have equal runs
    auto& b = f[view_bucket(r.owner, n)];
    b.u64(run_tag);
    b.u64(r.lo);
    b.u64(r.hi);
    b.u64(r.owner);
    b.u64(r.epoch);
  }
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::uint32_t>(f[i].h ^ (f[i].h >> 32));
  return out;
}

std::vector<std::uint16_t> differing_buckets(const std::vector<std::uint32_t>& mine,
                                             const std::vector<std::uint32_t>& theirs) {
  std::vector<std::uint16_t> out;
  for (std::size_t i = 0; i < mine.size() && i < theirs.size(); ++i)
    if (mine[i] != theirs[i])
      out.push_back(static_cast<std::uint16_t>(i));
  return out;
}

void put_view(wire::bw_reply& reply, const member_table& members,
              const std::map<proc_id, std::set<std::uint64_t>>& departed,
              const routing_table& routes, std::size_t n,
              const std::vector<std::uint16_t>& buckets) {
  std::vector<bool> wanted(buckets.empty() ? 0 : n, false);
  for (auto b : buckets)
    if (b < n)
      wanted[b] = true;
  auto in = [&](proc_id p) { return buckets.empty() || wanted[view_bucket(p, n)]; };
  if (buckets.empty())
    reply.members.reserve(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    if (in(members.id(i)))
      reply.members.push_back(members.member(i));
  for (auto& [p, incs] : departed)
    if (in(p))
      for (auto inc : incs)
        reply.departed.push_back({p, {}, inc});
  if (buckets.empty()) {
    reply.routes = routes.snapshot();
  } else {
    for (auto& r : routes.snapshot())
      if (in(r.owner))
        reply.routes.push_back(std::move(r));
  }
  reply.view_buckets = buckets;
}

void put_view_within(wire::bw_reply& reply, const member_table& members,
                     const std::map<proc_id, std::set<std::uint64_t>>& departed,
                     const routing_table& routes, std::size_t n,
                     const std::vector<std::uint16_t>& differ, std::size_t from,
                     std::size_t budget) {
  // Each differing bucket's entries, gathered in one pass over the view.
  struct bucket {
    std::vector<wire::member> members, departed;
    std::vector<wire::route_entry> routes;
  };
  std::vector<std::size_t> at(n, differ.size()); // bucket -> its place in `differ`
  for (std::size_t i = 0; i < differ.size(); ++i)
    if (differ[i] < n)
      at[differ[i]] = i;
  std::vector<bucket> content(differ.size());
  auto of = [&](proc_id p) -> bucket* {
    auto i = at[view_bucket(p, n)];
    return i < differ.size() ? &content[i] : nullptr;
  };
  for (std::size_t i = 0; i < members.size(); ++i)
    if (auto* b = of(members.id(i)))
      b->members.push_back(members.member(i));
  for (auto& [p, incs] : departed)
    if (auto* b = of(p))
      for (auto inc : incs)
        b->departed.push_back({p, {}, inc});
  for (auto& r : routes.snapshot())
    if (auto* b = of(r.owner))
      b->routes.push_back(std::move(r));

  // From the first at or after `from`, cyclically; whole buckets while they fit.
  const std::size_t start = from < n ? from : 0;
  const auto first = static_cast<std::size_t>(
    std::lower_bound(differ.begin(), differ.end(), start) - differ.begin());
  std::size_t carried = 0;
  for (std::size_t k = 0; k < differ.size(); ++k) {
    const auto i = (first + k) % differ.size();
    const auto sizes = std::make_tuple(reply.members.size(), reply.departed.size(),
                                       reply.routes.size());
    auto& b = content[i];
    reply.members.insert(reply.members.end(), b.members.begin(), b.members.end());
    reply.departed.insert(reply.departed.end(), b.departed.begin(), b.departed.end());
    reply.routes.insert(reply.routes.end(), b.routes.begin(), b.routes.end());
    reply.view_buckets.push_back(differ[i]);
    if (carried > 0 && budget > 0 && wire::wire_size(reply) > budget) {
      reply.members.resize(std::get<0>(sizes));
      reply.departed.resize(std::get<1>(sizes));
      reply.routes.resize(std::get<2>(sizes));
      reply.view_buckets.pop_back();
      break;
    }
    ++carried;
  }
  std::sort(reply.view_buckets.begin(), reply.view_buckets.end());
  reply.view_buckets_left = static_cast<std::uint16_t>(differ.size() - carried);
}

std::uint16_t next_buckets_from(const std::vector<std::uint16_t>& carried, std::size_t from,
                                std::size_t n) {
  if (n == 0 || carried.empty())
    return 0;
  const std::size_t start = from < n ? from : 0;
  std::size_t last = 0; // the farthest carried bucket, counted from `start`
  for (auto b : carried)
    last = std::max(last, (static_cast<std::size_t>(b) + n - start) % n);
  return static_cast<std::uint16_t>((start + last + 1) % n);
}

} // namespace banyan::sup
