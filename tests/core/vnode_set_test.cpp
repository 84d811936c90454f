#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "banyan/core/vnode_set.hpp"

// Lets BOOST_TEST print operands when a comparison fails.
namespace banyan {
inline std::ostream& boost_test_print_type(std::ostream& os, const vnode_set& s) {
  return os << s.to_string();
}
inline std::ostream& boost_test_print_type(std::ostream& os, vnode_set::interval x) {
  return os << "[" << x.lo << "," << x.hi << ")";
}
} // namespace banyan

using banyan::vnode_id;
using banyan::vnode_set;
using interval = vnode_set::interval;

namespace {

constexpr vnode_id top = std::numeric_limits<vnode_id>::max();

// Sorted, disjoint, non-adjacent, non-empty intervals.
bool well_formed(const vnode_set& s) {
  const auto& xs = s.intervals();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].lo >= xs[i].hi)
      return false;
    if (i > 0 && xs[i - 1].hi >= xs[i].lo)
      return false;
  }
  return true;
}

std::vector<vnode_id> members(const vnode_set& s) {
  std::vector<vnode_id> out;
  s.for_each([&](vnode_id v) { out.push_back(v); });
  return out;
}

std::vector<vnode_id> members(const std::set<vnode_id>& s) {
  return {s.begin(), s.end()};
}

// The intervals a std::set should compress to, computed independently of vnode_set.
std::vector<interval> runs_of(const std::set<vnode_id>& s) {
  std::vector<interval> out;
  for (auto v : s) {
    if (!out.empty() && out.back().hi == v)
      ++out.back().hi;
    else
      out.push_back(interval{v, v + 1});
  }
  return out;
}

std::string string_of(const std::set<vnode_id>& s) {
  std::string out = "{";
  bool first = true;
  for (auto r : runs_of(s)) {
    if (!first)
      out += ',';
    first = false;
    out += std::to_string(r.lo);
    if (r.hi - r.lo > 1)
      out += '-' + std::to_string(r.hi - 1);
  }
  return out + "}";
}

// Checks the set against its model: representation, membership, size, text.
void check_same(const vnode_set& s, const std::set<vnode_id>& model, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(well_formed(s), "not well formed: " << s.to_string());
    BOOST_TEST(members(s) == members(model), s.to_string() << " vs " << string_of(model));
    BOOST_TEST(s.size() == model.size());
    BOOST_TEST(s.empty() == model.empty());
    BOOST_TEST(s.interval_count() == runs_of(model).size());
    BOOST_TEST(s.to_string() == string_of(model));
    if (!model.empty())
      BOOST_TEST(s.front() == *model.begin());
  }
}

std::set<vnode_id> model_union(const std::set<vnode_id>& a, const std::set<vnode_id>& b) {
  auto out = a;
  out.insert(b.begin(), b.end());
  return out;
}
std::set<vnode_id> model_inter(const std::set<vnode_id>& a, const std::set<vnode_id>& b) {
  std::set<vnode_id> out;
  for (auto v : a)
    if (b.count(v))
      out.insert(v);
  return out;
}
std::set<vnode_id> model_diff(const std::set<vnode_id>& a, const std::set<vnode_id>& b) {
  std::set<vnode_id> out;
  for (auto v : a)
    if (!b.count(v))
      out.insert(v);
  return out;
}

// A random set over [base, base + span), built either by inserts or from random
// (possibly overlapping, touching or empty) intervals, so both paths get exercised.
struct random_set {
  vnode_set set;
  std::set<vnode_id> model;
};

random_set make_random(std::mt19937& rng, vnode_id base, vnode_id span) {
  random_set r;
  std::uniform_int_distribution<vnode_id> off(0, span - 1);
  std::uniform_int_distribution<int> count(0, 12);
  if (rng() % 2 == 0) {
    for (int i = count(rng); i > 0; --i) {
      auto v = base + off(rng);
      r.set.insert(v);
      r.model.insert(v);
    }
  } else {
    std::vector<interval> xs;
    std::uniform_int_distribution<vnode_id> len(0, 8);
    for (int i = count(rng); i > 0; --i) {
      auto lo = off(rng);
      auto hi = std::min<vnode_id>(span, lo + len(rng));
      if (rng() % 8 == 0)
        std::swap(lo, hi); // an empty (reversed) interval must be ignored
      xs.push_back(interval{base + lo, base + hi});
      for (auto v = lo; v < hi; ++v)
        r.model.insert(base + v);
    }
    r.set = vnode_set::from_intervals(xs);
  }
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(vnode_set_unit)

BOOST_AUTO_TEST_CASE(empty_set) {
  vnode_set s;
  BOOST_TEST(s.empty());
  BOOST_TEST(s.size() == 0u);
  BOOST_TEST(s.interval_count() == 0u);
  BOOST_TEST(s.to_string() == "{}");
  BOOST_TEST(!s.contains(0));
  BOOST_TEST(!s.contains(top));
  BOOST_TEST(s.includes(vnode_set{}));
  BOOST_TEST(!s.intersects(vnode_set{}));
  BOOST_TEST(!s.includes(vnode_set{1}));
  BOOST_TEST(vnode_set{1}.includes(s));
  BOOST_TEST((s | s).empty());
  BOOST_TEST((s & vnode_set{1, 2}).empty());
  BOOST_TEST((vnode_set{1, 2} - s) == (vnode_set{1, 2}));
  BOOST_TEST((s - vnode_set{1, 2}).empty());
  s.erase(5); // erasing from an empty set is a no-op
  BOOST_TEST(s.empty());
  BOOST_TEST(vnode_set::range(5, 5).empty());
  BOOST_TEST(vnode_set::range(6, 5).empty());
  BOOST_TEST(vnode_set::from_intervals({{3, 3}, {9, 2}}).empty());
}

BOOST_AUTO_TEST_CASE(to_string_formats_closed_ranges) {
  BOOST_TEST((vnode_set{0, 1, 2, 3, 7, 9, 10, 11}).to_string() == "{0-3,7,9-11}");
  BOOST_TEST((vnode_set{4}).to_string() == "{4}");
  BOOST_TEST((vnode_set{4, 5}).to_string() == "{4-5}");
  BOOST_TEST(vnode_set::range(10, 20).to_string() == "{10-19}");
}

BOOST_AUTO_TEST_CASE(insert_merges_adjacent) {
  vnode_set s{1, 3};
  BOOST_TEST(s.interval_count() == 2u);
  s.insert(2); // bridges [1,2) and [3,4)
  BOOST_TEST(s.interval_count() == 1u);
  BOOST_TEST((s.intervals()[0] == interval{1, 4}));
  s.insert(4); // extends the upper end
  s.insert(0); // extends the lower end
  BOOST_TEST(s.interval_count() == 1u);
  BOOST_TEST((s.intervals()[0] == interval{0, 5}));
  s.insert(2); // already present: no change
  BOOST_TEST((s.intervals()[0] == interval{0, 5}));
  s.insert(7); // not adjacent: a new interval
  BOOST_TEST(s.to_string() == "{0-4,7}");
  s.insert(6); // adjacent to 7 only
  BOOST_TEST(s.to_string() == "{0-4,6-7}");
  s.insert(5);
  BOOST_TEST(s.to_string() == "{0-7}");
}

BOOST_AUTO_TEST_CASE(erase_splits_and_trims) {
  auto s = vnode_set::range(10, 20);
  s.erase(15); // middle: splits
  BOOST_TEST(s.to_string() == "{10-14,16-19}");
  s.erase(10); // lower end: trims
  BOOST_TEST(s.to_string() == "{11-14,16-19}");
  s.erase(19); // upper end: trims
  BOOST_TEST(s.to_string() == "{11-14,16-18}");
  s.erase(15); // not a member
  s.erase(9);
  s.erase(100);
  BOOST_TEST(s.to_string() == "{11-14,16-18}");
  s.erase(16);
  s.erase(17);
  s.erase(18); // a whole interval disappears
  BOOST_TEST(s.to_string() == "{11-14}");
  BOOST_TEST(s.size() == 4u);
  vnode_set one{42};
  one.erase(42);
  BOOST_TEST(one.empty());
}

BOOST_AUTO_TEST_CASE(from_intervals_normalizes) {
  auto s = vnode_set::from_intervals({{20, 25}, {0, 3}, {3, 5}, {22, 30}, {8, 9}, {1, 2}, {7, 7}});
  BOOST_TEST(well_formed(s));
  BOOST_TEST(s.to_string() == "{0-4,8,20-29}");
  // Duplicates and containment.
  auto t = vnode_set::from_intervals({{5, 10}, {5, 10}, {6, 7}, {0, 100}});
  BOOST_TEST(t == vnode_set::range(0, 100));
  BOOST_TEST(t.interval_count() == 1u);
}

BOOST_AUTO_TEST_CASE(set_algebra_by_hand) {
  auto a = vnode_set::from_intervals({{0, 10}, {20, 30}});
  auto b = vnode_set::from_intervals({{5, 25}, {30, 31}});
  // [0,10) | [5,25) | [20,30) | [30,31) collapses to one interval.
  BOOST_TEST((a | b) == vnode_set::range(0, 31));
  BOOST_TEST((a & b).to_string() == "{5-9,20-24}");
  BOOST_TEST((a - b).to_string() == "{0-4,25-29}");
  BOOST_TEST((b - a).to_string() == "{10-19,30}");
  BOOST_TEST(a.intersects(b));
  BOOST_TEST(!a.includes(b));
  BOOST_TEST((a | b).includes(a));
  BOOST_TEST((a | b).includes(b));
  // Touching but not overlapping sets do not intersect.
  BOOST_TEST(!vnode_set::range(0, 5).intersects(vnode_set::range(5, 9)));
  // A set spanning two of our intervals is not included, even if its ends are.
  BOOST_TEST(!a.includes(vnode_set::range(5, 25)));
  auto c = a;
  c |= b;
  BOOST_TEST(c == (a | b));
  c = a;
  c &= b;
  BOOST_TEST(c == (a & b));
  c = a;
  c -= b;
  BOOST_TEST(c == (a - b));
  // One interval of the subtrahend reaching across several of ours.
  auto many = vnode_set::from_intervals({{0, 2}, {4, 6}, {8, 10}, {12, 14}});
  BOOST_TEST((many - vnode_set::range(1, 13)).to_string() == "{0,13}");
}

BOOST_AUTO_TEST_CASE(ids_near_the_top) {
  const vnode_id m = vnode_set::max_member;
  BOOST_TEST(m == top - 1);
  vnode_set s{m, m - 1, m - 3};
  BOOST_TEST(well_formed(s));
  BOOST_TEST(s.to_string() == "{" + std::to_string(m - 3) + "," + std::to_string(m - 1) + "-" +
                                  std::to_string(m) + "}");
  BOOST_TEST(s.contains(m));
  BOOST_TEST(!s.contains(top));
  BOOST_TEST(s.intervals().back().hi == top);
  s.insert(m - 2);
  BOOST_TEST((s == vnode_set::range(m - 3, top)));
  BOOST_TEST(s.size() == 4u);
  s.erase(m);
  BOOST_TEST((s == vnode_set::range(m - 3, m)));
  s.erase(top); // never a member: no-op
  BOOST_TEST(s.size() == 3u);
  // The whole representable range.
  auto all = vnode_set::range(0, top);
  BOOST_TEST(all.size() == static_cast<std::size_t>(top));
  BOOST_TEST(all.contains(0));
  BOOST_TEST(all.contains(m));
  BOOST_TEST(!all.contains(top));
  BOOST_TEST(all.to_string() == "{0-" + std::to_string(m) + "}");
  auto holes = all - vnode_set{0, m, 1000};
  BOOST_TEST(holes.to_string() == "{1-999,1001-" + std::to_string(m - 1) + "}");
  BOOST_TEST((all & vnode_set{m}) == (vnode_set{m}));
  BOOST_TEST(((holes | vnode_set{0, m, 1000}) == all));
}

BOOST_AUTO_TEST_CASE(unrepresentable_id_throws) {
  vnode_set s{1};
  BOOST_CHECK_THROW(s.insert(top), std::out_of_range);
  BOOST_TEST(s == (vnode_set{1})); // unchanged
  BOOST_CHECK_THROW((vnode_set{1, top}), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(for_each_visits_in_order) {
  auto s = vnode_set::from_intervals({{7, 9}, {1, 3}});
  BOOST_TEST(members(s) == (std::vector<vnode_id>{1, 2, 7, 8}));
}

// Sets keep their first few intervals inside themselves and the rest on the heap:
// copies and moves between every pair of sizes around that boundary keep the members,
// and a moved-from set is empty and usable.
BOOST_AUTO_TEST_CASE(copies_and_moves_across_the_inline_boundary) {
  auto spaced = [](std::size_t n) { // n intervals {0, 2, 4, ...}
    vnode_set s;
    for (std::size_t k = 0; k < n; ++k)
      s.insert(static_cast<vnode_id>(2 * k));
    return s;
  };
  const std::size_t top_n = 2 * vnode_set::inline_intervals + 2;
  for (std::size_t a = 0; a <= top_n; ++a)
    for (std::size_t b = 0; b <= top_n; ++b) {
      BOOST_TEST_CONTEXT("sizes " << a << " and " << b) {
        const auto src = spaced(a);
        BOOST_TEST(src.interval_count() == a);
        vnode_set copy(src);
        BOOST_TEST(copy == src);
        auto dst = spaced(b);
        dst = src;
        BOOST_TEST(dst == src);
        BOOST_TEST(well_formed(dst));
        auto moved_from = spaced(a);
        auto target = spaced(b);
        target = std::move(moved_from);
        BOOST_TEST(target == src);
        BOOST_TEST(moved_from.empty()); // NOLINT(bugprone-use-after-move): specified so
        moved_from.insert(5);
        BOOST_TEST(members(moved_from) == (std::vector<vnode_id>{5}));
        vnode_set constructed(std::move(target));
        BOOST_TEST(constructed == src);
        BOOST_TEST(target.empty()); // NOLINT(bugprone-use-after-move)
        auto& alias = dst;
        dst = alias; // self-assignment
        BOOST_TEST(dst == src);
        // Growing a copy leaves its source alone.
        copy.insert(static_cast<vnode_id>(4 * top_n + 1));
        BOOST_TEST(copy.interval_count() == a + 1);
        BOOST_TEST(src.interval_count() == a);
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(vnode_set_property)

// Every operation against std::set, on small dense universes (many adjacencies) and on
// a universe ending at max_member (overflow edge), with fixed seeds.
void run_property(std::uint32_t seed, vnode_id base, vnode_id span) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<vnode_id> off(0, span - 1);
  auto start = make_random(rng, base, span);
  auto s = start.set;
  auto model = start.model;
  check_same(s, model, "initial");
  for (int step = 0; step < 60; ++step) {
    auto other = make_random(rng, base, span);
    check_same(other.set, other.model, "operand");
    auto v = base + off(rng);
    BOOST_TEST_CONTEXT("seed " << seed << " step " << step << " s=" << s.to_string()
                               << " other=" << other.set.to_string() << " v=" << v) {
      BOOST_TEST(s.contains(v) == (model.count(v) == 1));
      BOOST_TEST(s.intersects(other.set) == !model_inter(model, other.model).empty());
      BOOST_TEST(s.includes(other.set) == model_diff(other.model, model).empty());
      BOOST_TEST(other.set.includes(s) == model_diff(model, other.model).empty());
      check_same(s | other.set, model_union(model, other.model), "union");
      check_same(s & other.set, model_inter(model, other.model), "intersection");
      check_same(s - other.set, model_diff(model, other.model), "difference");
      check_same(other.set - s, model_diff(other.model, model), "reverse difference");
      // Mutate the running set so it wanders through many shapes.
      switch (rng() % 6) {
        case 0: s.insert(v); model.insert(v); break;
        case 1: s.erase(v); model.erase(v); break;
        case 2: s |= other.set; model = model_union(model, other.model); break;
        case 3: s &= other.set; model = model_inter(model, other.model); break;
        case 4: s -= other.set; model = model_diff(model, other.model); break;
        default: {
          // Erase a random run of ids in a row, which splits and trims intervals.
          auto hi = std::min<vnode_id>(span, v - base + 1 + rng() % 5);
          for (auto u = v - base; u < hi; ++u) {
            s.erase(base + u);
            model.erase(base + u);
          }
        }
      }
      check_same(s, model, "after mutation");
    }
  }
}

BOOST_AUTO_TEST_CASE(small_universe_many_seeds) {
  for (std::uint32_t seed = 1; seed <= 200; ++seed)
    run_property(seed, 0, 64);
}

BOOST_AUTO_TEST_CASE(top_of_id_space_many_seeds) {
  for (std::uint32_t seed = 1001; seed <= 1100; ++seed)
    run_property(seed, vnode_set::max_member - 47, 48);
}

BOOST_AUTO_TEST_SUITE_END()
