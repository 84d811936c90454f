#pragma once
// A processor's view (members, departed incarnations, routes) cut into buckets by
// processor id, each with a digest of its own, so that a probe reply carries only the
// buckets in which the candidate's view differs from the prober's.
//
// Bucket b of a view holds everything the view says about the processors p with
// `view_bucket(p, n) == b`: p's member entry, p's departed incarnations, and the route
// runs that name p as owner (vnodes with no known owner: those of `no_proc`). The
// buckets partition the view, so a view is the union of its buckets, and two views
// whose bucket b has equal content hold the same entry for every member, departure and
// vnode filed in b (a run is maximal, so the runs that name owners of b fix the owner
// and epoch of each of their vnodes).
//
// Merging a view is taking the union of members and tombstones and, per vnode, the
// entry of the higher epoch. Where bucket b is equal on both sides, merging the
// candidate's b changes nothing; so merging only the buckets whose digests differ
// leaves the prober with the same view as merging the whole, whichever side knows
// more. (A candidate that knows less sends a bucket that changes nothing; it learns
// the prober's news when it probes in turn, as with the whole view.)
//
// Digests are 32-bit FNV-1a folds, equal for equal buckets on every processor and
// platform. Different buckets collide with probability about 2^-32; the 64-bit digest
// of the whole view (view_digest.hpp) still differs then, and a candidate that sees the
// whole views differ where no bucket does sends the whole view.

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "banyan/core/messages.hpp"
#include "banyan/core/routing_table.hpp"
#include "member_table.hpp"

namespace banyan::sup {

/// The most buckets a candidate honours (`supervisor_config::view_buckets`): a request
/// with more is answered with the whole view.
constexpr std::size_t max_view_buckets = 4096;

/// The bucket of processor `id` among `n` (> 0): a fixed mix of the id, the same on
/// every processor, so ids spread evenly whatever their pattern.
std::size_t view_bucket(proc_id id, std::size_t n);

/// The digests of the view's `n` buckets (`members`, `departed` as in view_digest).
std::vector<std::uint32_t> view_bucket_digests(
  const member_table& members,
  const std::map<proc_id, std::set<std::uint64_t>>& departed, const routing_table& routes,
  std::size_t n);

/// The buckets where `mine` and `theirs` (the same count) differ, in increasing order.
std::vector<std::uint16_t> differing_buckets(const std::vector<std::uint32_t>& mine,
                                             const std::vector<std::uint32_t>& theirs);

/// Fills `reply`'s members, departed and routes with the view's entries in `buckets`
/// (of `n`; every entry when `buckets` is empty) and sets `reply.view_buckets`.
void put_view(wire::bw_reply& reply, const member_table& members,
              const std::map<proc_id, std::set<std::uint64_t>>& departed,
              const routing_table& routes, std::size_t n,
              const std::vector<std::uint16_t>& buckets);

/// Like `put_view` for the buckets `differ` (increasing, of `n`, not empty), within a
/// byte budget: from the first bucket at or after `from` (0 when `from` >= n), in cyclic
/// order, each bucket goes in whole while `wire::wire_size(reply)` stays at most
/// `budget`, the first one always (so that every reply teaches something); the rest
/// are left out, counted in `reply.view_buckets_left`. `reply` holds the rest of the
/// reply already (trees, open roots), so that they count. Merging a subset of the
/// buckets is merging part of the news: a bucket holds a processor's member entry, its
/// departures and the runs it owns together, so no route arrives without its owner.
void put_view_within(wire::bw_reply& reply, const member_table& members,
                     const std::map<proc_id, std::set<std::uint64_t>>& departed,
                     const routing_table& routes, std::size_t n,
                     const std::vector<std::uint16_t>& differ, std::size_t from,
                     std::size_t budget);

/// The prober's next `bw_request::buckets_from` after a reply that carried `carried`
/// (of `n`) from `from` on and left some out: the bucket after the last carried, in
/// cyclic order from `from`. So each differing bucket is carried within a bounded
/// number of replies whatever the others hold, even where the prober knows more.
std::uint16_t next_buckets_from(const std::vector<std::uint16_t>& carried, std::size_t from,
                                std::size_t n);

} // namespace banyan::sup
