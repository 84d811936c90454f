// shared_bytes::extend: adjacent slices of one buffer join without a copy.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "banyan/core/shared_bytes.hpp"

using banyan::shared_bytes;

namespace {
shared_bytes numbers(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>(i);
  return shared_bytes(std::move(v));
}
} // namespace

BOOST_AUTO_TEST_CASE(adjacent_slices_of_one_buffer_join_in_place) {
  const auto all = numbers(100);
  auto a = all.slice(10, 30);
  BOOST_TEST(a.extend(all.slice(40, 25)));
  BOOST_TEST(a.size() == 55u);
  BOOST_TEST(a.data() == all.data() + 10); // the same bytes, not a copy
  BOOST_TEST(a == all.slice(10, 55));
  BOOST_TEST(a.extend(shared_bytes{})); // nothing to add
  BOOST_TEST(a.size() == 55u);
}

BOOST_AUTO_TEST_CASE(gaps_overlaps_and_other_buffers_do_not_join) {
  const auto all = numbers(100);
  auto a = all.slice(0, 10);
  BOOST_TEST(!a.extend(all.slice(11, 5))); // a gap
  BOOST_TEST(!a.extend(all.slice(5, 10))); // an overlap
  const auto copy = shared_bytes::copy_of(all.data(), all.size());
  BOOST_TEST(!a.extend(copy.slice(10, 5))); // equal bytes elsewhere
  BOOST_TEST(a.size() == 10u);              // unchanged by the refusals
  BOOST_TEST(a == all.slice(0, 10));
  shared_bytes none;
  BOOST_TEST(!none.extend(all.slice(0, 1)));
  BOOST_TEST(none.empty());
}
