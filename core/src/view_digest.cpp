#include "view_digest.hpp"

namespace banyan::sup {
namespace {

struct fnv1a {
  std::uint64_t h = 14695981039346656037ull;
  void byte(unsigned char b) {
    h ^= b;
    h *= 1099511628211ull;
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i)
      byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  void text(const std::string& s) {
    u64(s.size());
    for (unsigned char c : s)
      byte(c);
  }
};

} // namespace

std::uint64_t view_digest(const std::map<proc_id, wire::member>& members,
                          const std::map<proc_id, std::set<std::uint64_t>>& departed,
                          const routing_table& routes) {
  fnv1a f;
  // Each part starts with its size, so no two views can run together into one stream.
  f.u64(members.size());
  for (auto& [id, m] : members) { // ordered by id
    f.u64(id);
    f.u64(m.incarnation);
    f.text(m.address);
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
