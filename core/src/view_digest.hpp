#pragma once
// A processor's view of the computation (members with their incarnations and addresses,
// the incarnations that left, and the routing table) named by 64 bits.
//
// A bandwidth probe's reply carries the candidate's view for the prober to merge
// (anti-entropy). Once membership and ownership have settled, every processor holds
// the same view, and merging it changes nothing; at a thousand processors it is most of
// the reply's bytes. So the prober sends the digest of its own view with its request,
// and a candidate whose view has the same digest leaves its view out of the reply.
//
// Equal views give equal digests on every processor and platform (FNV-1a over the
// fields in a fixed order, not std::hash). Different views give different digests
// except with probability about 2^-64 per comparison; a collision would delay one
// anti-entropy exchange until the next probe between processors whose views differ.

#include <cstdint>
#include <map>
#include <set>

#include "banyan/core/messages.hpp"
#include "banyan/core/routing_table.hpp"
#include "member_table.hpp"

namespace banyan::sup {

/// `members`: what is known of every member, by id; `departed`: the incarnations that
/// left, by id (membership::all_info and tombstones). Never 0.
std::uint64_t view_digest(const member_table& members,
                          const std::map<proc_id, std::set<std::uint64_t>>& departed,
                          const routing_table& routes);

} // namespace banyan::sup
