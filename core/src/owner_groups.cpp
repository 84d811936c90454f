#include "banyan/core/owner_groups.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

namespace banyan {

namespace {

/// Consecutive runs of `owners` (in order), at most `fanout` of them, of sizes as even
/// as possible; the first owner of each run is its head.
void split(const std::vector<proc_id>& owners, const std::map<proc_id, vnode_set>& parts,
           std::size_t fanout, std::vector<owner_group>& out) {
  const auto n = owners.size();
  if (n == 0)
    return;
  const auto k = std::min(n, fanout);
  std::size_t at = 0;
  for (std::size_t g = 0; g < k; ++g) {
    const auto size = n / k + (g < n % k ? 1 : 0);
    owner_group grp;
    grp.head = owners[at];
    for (std::size_t j = 0; j < size; ++j)
      grp.vnodes |= parts.at(owners[at + j]);
    at += size;
    out.push_back(std::move(grp));
  }
}

} // namespace

std::vector<owner_group> group_owners(const tree_view& view,
                                      const std::map<proc_id, vnode_set>& parts,
                                      std::size_t fanout) {
  std::vector<owner_group> out;
  if (fanout == 0 || parts.size() <= 1) {
    for (auto& [p, vs] : parts)
      out.push_back({p, vs});
    return out;
  }
  // Nearest first; the unmeasured after the measured, by id. An unmeasured owner whose
  // latency tree reaches us along a path at least as long as the shortest wide-area
  // RTT we measured is beyond our LAN too: it joins the measured remote ones, ranked
  // by that path's length (estimated, after the measured).
  using ranked = std::tuple<bool, duration, proc_id>; // (unmeasured, rtt, id)
  std::vector<ranked> local, remote;
  // The yardstick scans every figure measured: only looked up for an unmeasured owner.
  std::optional<std::optional<duration>> wan;
  for (auto& [p, vs] : parts) {
    if (view.owner(vs.front()) != p) {
      // A peer standing in for unknown or unreachable owners: it knows better where
      // they are, so their part goes to it alone.
      out.push_back({p, vs});
      continue;
    }
    auto rtt = view.rtt(p);
    if (!rtt && !wan)
      wan = view.smallest_remote_rtt();
    if (!rtt && *wan)
      if (auto d = view.tree_distance(p); d && *d >= **wan) {
        remote.emplace_back(false, duration::max() / 2 + *d / 2, p);
        continue;
      }
    (view.local(p) ? local : remote).emplace_back(!rtt, rtt.value_or(duration::max()), p);
  }
  std::sort(local.begin(), local.end());
  std::sort(remote.begin(), remote.end());
  auto ids = [](const std::vector<ranked>& r) {
    std::vector<proc_id> v;
    v.reserve(r.size());
    for (auto& x : r)
      v.push_back(std::get<2>(x));
    return v;
  };
  split(ids(local), parts, fanout, out);
  // Remote owners measured: one group, headed by the nearest of them (in the next
  // cluster: it knows its LAN, and what lies beyond, better than we do).
  auto unmeasured = std::find_if(remote.begin(), remote.end(),
                                 [](const ranked& r) { return std::get<0>(r); });
  if (unmeasured != remote.begin()) {
    owner_group far;
    far.head = std::get<2>(remote.front());
    for (auto r = remote.begin(); r != unmeasured; ++r)
      far.vnodes |= parts.at(std::get<2>(*r));
    out.push_back(std::move(far));
  }
  // Owners never measured may be anywhere, next door too: in `fanout` groups by id,
  // never with the remote group (which would carry LAN vnodes across the WAN and back).
  split(ids(std::vector<ranked>(unmeasured, remote.end())), parts, fanout, out);
  return out;
}

} // namespace banyan
