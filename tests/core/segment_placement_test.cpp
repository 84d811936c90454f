// segment_placement and buffer_pool: received broadcast segments placed into one buffer
// per message (so the message is whole without a copy), and message buffers reused.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "banyan/core/buffer_pool.hpp"
#include "banyan/core/segment_placement.hpp"

#include <sys/mman.h>
#include <unistd.h>

using namespace banyan;

namespace {
const wire::collective_id op1{1, 10};
const wire::collective_id op2{2, 10};
} // namespace

BOOST_AUTO_TEST_CASE(segments_in_any_order_make_the_message_in_one_buffer) {
  buffer_pool pool(1u << 20);
  segment_placement sp(pool, 1u << 20);
  // 4 segments of 64 bytes, the last 40: 232 bytes.
  std::vector<std::optional<segment_slot>> slots(4);
  for (std::uint32_t i : {3u, 1u, 0u, 2u}) {
    slots[i] = sp.place(op1, i, 4, 232, i == 3 ? 40 : 64);
    BOOST_REQUIRE(slots[i].has_value());
    BOOST_TEST(slots[i]->region.size() == (i == 3 ? 40u : 64u));
    BOOST_TEST(slots[i]->dest == slots[i]->region.data());
    for (std::size_t k = 0; k < slots[i]->region.size(); ++k)
      slots[i]->dest[k] = static_cast<std::uint8_t>(i * 64 + k);
  }
  BOOST_TEST(sp.open() == 0u); // all placed: forgotten, the slices keep the buffer
  shared_bytes whole = slots[0]->region;
  for (std::uint32_t i = 1; i < 4; ++i)
    BOOST_TEST(whole.extend(slots[i]->region));
  BOOST_REQUIRE(whole.size() == 232u);
  for (std::size_t k = 0; k < 232; ++k)
    BOOST_TEST(whole.data()[k] == static_cast<std::uint8_t>(k));
}

BOOST_AUTO_TEST_CASE(duplicates_and_inconsistent_segments_are_declined) {
  buffer_pool pool(1u << 20);
  segment_placement sp(pool, 1000);
  BOOST_TEST(sp.place(op1, 0, 4, 232, 64).has_value());
  BOOST_TEST(!sp.place(op1, 0, 4, 232, 64).has_value()); // placed already
  BOOST_TEST(!sp.place(op1, 1, 4, 232, 56).has_value()); // another segment length
  BOOST_TEST(!sp.place(op1, 3, 4, 232, 48).has_value()); // the last does not end it
  BOOST_TEST(!sp.place(op1, 1, 5, 232, 64).has_value()); // another count
  BOOST_TEST(!sp.place(op1, 4, 4, 232, 64).has_value()); // index out of range
  BOOST_TEST(sp.place(op1, 3, 4, 232, 40).has_value());
  BOOST_TEST(!sp.place(op2, 0, 2, 2000, 1000).has_value()); // above max_message
  BOOST_TEST(!sp.place(op2, 0, 2, 100, 40).has_value());    // 2 x 40 cannot make 100
  BOOST_TEST(!sp.place(op2, 0, 1, 100, 99).has_value());    // one segment: the whole
  BOOST_TEST(sp.open() == 1u);
}

BOOST_AUTO_TEST_CASE(the_oldest_open_message_is_forgotten_beyond_the_limit) {
  buffer_pool pool(1u << 20);
  segment_placement sp(pool, 1000, 2);
  BOOST_TEST(sp.place({1, 1}, 0, 2, 128, 64).has_value());
  BOOST_TEST(sp.place({1, 2}, 0, 2, 128, 64).has_value());
  BOOST_TEST(sp.place({1, 3}, 0, 2, 128, 64).has_value());
  BOOST_TEST(sp.open() == 2u);
  // {1, 1} was forgotten: its second segment gets a new buffer, not joinable.
  auto a = sp.place({1, 2}, 1, 2, 128, 64);
  BOOST_TEST(a.has_value());
  BOOST_TEST(sp.open() == 1u);
}

BOOST_AUTO_TEST_CASE(released_buffers_are_reused) {
  buffer_pool pool(1000);
  const std::uint8_t* first = nullptr;
  {
    auto b = pool.take(600);
    BOOST_TEST(b.size == 600u);
    first = b.data();
  }
  BOOST_TEST(pool.counters().idle_bytes == 600u);
  {
    auto b = pool.take(500); // fits in the idle one
    BOOST_TEST(b.data() == first);
    BOOST_TEST(b.size >= 500u);
    auto c = pool.take(500); // none idle: new
    BOOST_TEST(c.data() != first);
    b = {}; // back first: kept
    c = {}; // 600 + 500 would exceed 1000: freed
  }
  BOOST_TEST(pool.counters().idle_bytes == 600u);
  BOOST_TEST(pool.counters().reused == 1u);
  BOOST_TEST(pool.counters().allocated == 2u);
  // Through a placement: the next message of the same size gets the same memory.
  segment_placement sp(pool, 1000);
  const std::uint8_t* where = nullptr;
  {
    auto s = sp.place(op1, 0, 1, 400, 400);
    BOOST_REQUIRE(s.has_value());
    where = s->dest;
  }
  auto s = sp.place(op2, 0, 1, 400, 400);
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->dest == where);
}

BOOST_AUTO_TEST_CASE(a_buffer_outliving_its_pool_is_freed) {
  pooled_block kept;
  {
    buffer_pool pool(1u << 20);
    kept = pool.take(100);
  }
  BOOST_TEST(kept.size == 100u);
  kept.data()[99] = 1; // still writable
  kept = {}; // no crash, no leak (the sanitizer builds check the latter)
  BOOST_TEST(!kept.bytes);
}

namespace {
/// Pages of [p, p + n) resident in memory (Linux `mincore`; whole pages inside the range).
std::size_t resident_pages(const std::uint8_t* p, std::size_t n) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto last = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
  if (last <= first)
    return 0;
  std::vector<unsigned char> in((last - first) / page);
  BOOST_REQUIRE(mincore(reinterpret_cast<void*>(first), last - first, in.data()) == 0);
  std::size_t count = 0;
  for (auto c : in)
    count += c & 1u;
  return count;
}
} // namespace

// A peer announcing a long message (its first segment says how long) must not make this
// node commit memory for bytes it has not sent: the block is not zeroed, so only the pages
// the received segments are written to become resident.
BOOST_AUTO_TEST_CASE(an_announced_message_costs_memory_only_as_its_bytes_arrive) {
  constexpr std::size_t mib = std::size_t{1} << 20;
  constexpr std::size_t total = 256 * mib;
  buffer_pool pool(0);
  segment_placement sp(pool, total);
  auto s = sp.place(op1, 0, 256, total, mib);
  BOOST_REQUIRE(s.has_value());
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t before = resident_pages(s->dest, total);
  BOOST_TEST(before * page <= mib / 4); // nothing written yet (allocator header only)
  std::memset(s->dest, 0xab, mib);      // the first segment's payload arrives
  const std::size_t after = resident_pages(s->dest, total);
  BOOST_TEST(after * page >= mib - page); // the check sees written pages...
  BOOST_TEST(after * page <= 2 * mib);    // ...and only those
}
