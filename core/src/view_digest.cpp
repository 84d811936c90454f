#include "view_digest.hpp"

#include "fnv1a.hpp"

namespace banyan::sup {

std::uint64_t view_digest(const member_table& members,
                          const std::map<proc_id, std::set<std::uint64_t>>& departed,
                          const routing_table& routes) {
  fnv1a f;
  // Each part starts with its size, so no two views can run together into one stream.
  f.u64(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) { // ordered by id
    f.u64(members.id(i));
    f.u64(members.incarnation(i));
    f.text(members.address(i));
  }
  f.u64(departed.size());
  for (auto& [id, incs] : departed) {
    f.u64(id);
    f.u64(incs.size());
    for (auto inc : incs) // ordered
      f.u64(inc);
  }
  f.u64(routes.runs().size());
  for (auto& r : routes.runs()) { // canonical: equal tables have equal runs
    f.u64(r.lo);
    f.u64(r.hi);
    f.u64(r.owner);
    f.u64(r.epoch);
  }
  return f.h != 0 ? f.h : 1; // 0 is the request's "no digest: send me your view"
}

} // namespace banyan::sup
