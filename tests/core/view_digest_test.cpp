// The digest that lets a probe reply leave out a view the prober already holds: equal
// views give equal digests, and each kind of difference a view can have gives another.

#include <boost/test/unit_test.hpp>

#include "../../core/src/view_digest.hpp"

using namespace banyan;
using banyan::sup::view_digest;

namespace {

struct view {
  std::map<proc_id, wire::member> members;
  std::map<proc_id, std::set<std::uint64_t>> departed;
  routing_table routes;
  std::uint64_t digest() const { return view_digest(members, departed, routes); }
};

view sample() {
  view v;
  for (proc_id p = 0; p < 6; ++p)
    v.members[p] = {p, "10.0.0." + std::to_string(p) + ":7000", 100 + p};
  v.departed[9] = {5, 8};
  for (proc_id p = 0; p < 6; ++p)
    v.routes.assign(vnode_set::range(p * 10, p * 10 + 10), p, 3);
  return v;
}

} // namespace

BOOST_AUTO_TEST_CASE(equal_views_have_equal_digests_built_in_any_order) {
  auto a = sample();
  view b;
  for (proc_id p = 6; p-- > 0;) // the members and routes learned in the other order
    b.members[p] = a.members[p];
  b.departed[9] = {8, 5};
  for (proc_id p = 6; p-- > 0;)
    b.routes.assign(vnode_set::range(p * 10, p * 10 + 10), p, 3);
  BOOST_TEST(a.digest() == b.digest());
  BOOST_TEST(a.digest() != 0u); // 0 means "no digest" in a request
  BOOST_TEST(view{}.digest() != 0u);
}

BOOST_AUTO_TEST_CASE(every_kind_of_difference_changes_the_digest) {
  const auto base = sample().digest();
  std::vector<std::pair<const char*, view>> changed;
  auto add = [&](const char* what, auto change) {
    auto v = sample();
    change(v);
    changed.emplace_back(what, std::move(v));
  };
  add("a new member", [](view& v) { v.members[7] = {7, "10.0.0.7:7000", 1}; });
  add("a member gone", [](view& v) { v.members.erase(3); });
  add("another incarnation", [](view& v) { v.members[2].incarnation = 5; });
  add("another address", [](view& v) { v.members[2].address = "10.0.0.2:7001"; });
  add("another departed incarnation", [](view& v) { v.departed[9].insert(11); });
  add("another departed member", [](view& v) { v.departed[4] = {1}; });
  add("a vnode moved", [](view& v) { v.routes.assign(vnode_set::range(12, 13), 4, 4); });
  add("a later epoch, same owner", [](view& v) { v.routes.assign(vnode_set::range(0, 10), 0, 4); });
  add("an unknown vnode known", [](view& v) { v.routes.assign(vnode_set::range(60, 61), 5, 3); });
  // Parts that could run into one another: a member's address against the next field.
  add("address text shifted", [](view& v) {
    v.members[1].address = "10.0.0.1:700";
    v.members[1].incarnation = 101;
  });
  for (auto& [what, v] : changed) {
    BOOST_TEST(v.digest() != base, what);
    for (auto& [other, w] : changed)
      if (&v != &w)
        BOOST_TEST(v.digest() != w.digest(), what << " / " << other);
  }
}
