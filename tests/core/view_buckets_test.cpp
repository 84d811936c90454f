// A view cut into buckets by processor id (core/src/view_buckets.hpp): bucket digests
// are equal exactly where the buckets are; a reply that carries only the differing
// buckets leaves out nothing the prober lacks; and in emulated clusters a processor that
// missed membership and route news learns it from such replies, views converge, and the
// whole view still goes when the prober sends no bucket digests.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "../../core/src/view_buckets.hpp"
#include "core/mini_grid.hpp"
#include "core/supervisor_checks.hpp"

using namespace banyan;
using banyan::sup::differing_buckets;
using banyan::sup::put_view;
using banyan::sup::view_bucket;
using banyan::sup::view_bucket_digests;
using banyan::test::mini_grid;
using namespace banyan::test::supervisor_checks;

namespace {

struct view {
  std::map<proc_id, wire::member> members;
  std::map<proc_id, std::set<std::uint64_t>> departed;
  routing_table routes;
  std::vector<std::uint32_t> digests(std::size_t n) const {
    return view_bucket_digests(members, departed, routes, n);
  }
};

view sample() {
  view v;
  for (proc_id p = 0; p < 40; ++p)
    v.members[p] = {p, "10.0.0." + std::to_string(p) + ":7000", 100 + p};
  v.departed[49] = {5, 8};
  for (proc_id p = 0; p < 40; ++p)
    v.routes.assign(vnode_set::range(p * 10, p * 10 + 10), p, 3);
  return v;
}

/// The buckets (of n) of the processors named.
std::set<std::size_t> buckets_of(const std::vector<proc_id>& ids, std::size_t n) {
  std::set<std::size_t> out;
  for (auto p : ids)
    out.insert(view_bucket(p, n));
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(equal_views_have_equal_bucket_digests_built_in_any_order) {
  auto a = sample();
  view b;
  for (proc_id p = 40; p-- > 0;)
    b.members[p] = a.members[p];
  b.departed[49] = {8, 5};
  for (proc_id p = 40; p-- > 0;)
    b.routes.assign(vnode_set::range(p * 10, p * 10 + 10), p, 3);
  for (std::size_t n : {1u, 7u, 64u, 128u})
    BOOST_TEST(a.digests(n) == b.digests(n));
  // The ids spread: 40 processors fill most of 64 buckets.
  std::set<std::size_t> used;
  for (proc_id p = 0; p < 40; ++p)
    used.insert(view_bucket(p, 64));
  BOOST_TEST(used.size() >= 24u);
}

BOOST_AUTO_TEST_CASE(a_change_changes_exactly_the_buckets_of_the_processors_it_concerns) {
  struct change {
    const char* what;
    std::function<void(view&)> apply;
    std::vector<proc_id> concerns;
  };
  const std::vector<change> changes = {
    {"a new member", [](view& v) { v.members[47] = {47, "10.0.0.47:7000", 1}; }, {47}},
    {"a member gone", [](view& v) { v.members.erase(3); }, {3}},
    {"another incarnation", [](view& v) { v.members[2].incarnation = 5; }, {2}},
    {"another address", [](view& v) { v.members[2].address = "10.0.0.2:7001"; }, {2}},
    {"another departed incarnation", [](view& v) { v.departed[49].insert(11); }, {49}},
    {"a crash tombstone", [](view& v) { v.departed[4] = {104}; }, {4}},
    {"a vnode moved from 1 to 4",
     [](view& v) { v.routes.assign(vnode_set::range(12, 13), 4, 4); }, {1, 4}},
    {"a later epoch, same owner",
     [](view& v) { v.routes.assign(vnode_set::range(0, 10), 0, 4); }, {0}},
    {"an unknown vnode known", [](view& v) { v.routes.assign(vnode_set::range(400, 401), 5, 3); },
     {5}},
    {"vnodes of unknown owner", [](view& v) { v.routes.assign(vnode_set::range(500, 510), no_proc, 2); },
     {no_proc}},
  };
  for (std::size_t n : {4u, 64u, 128u}) {
    const auto base = sample().digests(n);
    for (auto& c : changes) {
      auto v = sample();
      c.apply(v);
      const auto d = differing_buckets(v.digests(n), base);
      const auto expected = buckets_of(c.concerns, n);
      BOOST_TEST((std::set<std::size_t>(d.begin(), d.end()) == expected),
                 c.what << " with " << n << " buckets: " << d.size() << " differ");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_reply_of_the_differing_buckets_leaves_out_nothing_the_prober_lacks) {
  // The prober and the candidate each know something the other does not.
  auto prober = sample();
  auto cand = sample();
  cand.members[47] = {47, "10.0.0.47:7000", 9};       // a join the prober missed
  cand.members.erase(6);                              // a leave the prober missed
  cand.departed[6] = {106};
  cand.routes.assign(vnode_set::range(60, 70), 47, 8); // 6's vnodes went to 47
  cand.departed[11] = {111};                           // a crash the prober missed
  cand.members.erase(11);
  prober.members[48] = {48, "10.0.0.48:7000", 3};     // a join the candidate missed
  prober.routes.assign(vnode_set::range(0, 5), 48, 9);
  for (std::size_t n : {16u, 128u}) {
    const auto differ = differing_buckets(cand.digests(n), prober.digests(n));
    BOOST_TEST(!differ.empty());
    BOOST_TEST(differ.size() <= 6u);
    wire::bw_reply delta, whole;
    put_view(delta, cand.members, cand.departed, cand.routes, n, differ);
    put_view(whole, cand.members, cand.departed, cand.routes, n, {});
    BOOST_TEST(delta.view_buckets == differ);
    BOOST_TEST(whole.view_buckets.empty());
    BOOST_TEST(whole.members.size() == cand.members.size());
    BOOST_TEST(delta.members.size() < whole.members.size());
    BOOST_TEST(wire::wire_size(delta) < wire::wire_size(whole));
    // Whatever the whole view has and the delta not, the prober holds as it is.
    for (auto& m : whole.members)
      if (std::find(delta.members.begin(), delta.members.end(), m) == delta.members.end()) {
        auto it = prober.members.find(m.id);
        BOOST_TEST((it != prober.members.end() && it->second == m), "member " << m.id);
      }
    for (auto& d : whole.departed)
      if (std::find(delta.departed.begin(), delta.departed.end(), d) == delta.departed.end())
        BOOST_TEST(prober.departed[d.id].count(d.incarnation) == 1u, "departed " << d.id);
    for (auto& r : whole.routes)
      if (std::find(delta.routes.begin(), delta.routes.end(), r) == delta.routes.end())
        BOOST_TEST(!prober.routes.would_change(r), "route of " << r.owner);
    // And the news is in it.
    auto has_member = [&](proc_id p) {
      return std::any_of(delta.members.begin(), delta.members.end(),
                         [&](auto& m) { return m.id == p; });
    };
    auto has_departed = [&](proc_id p) {
      return std::any_of(delta.departed.begin(), delta.departed.end(),
                         [&](auto& m) { return m.id == p; });
    };
    BOOST_TEST(has_member(47));
    BOOST_TEST(has_departed(6));
    BOOST_TEST(has_departed(11));
    // Merged, the delta's routes give the prober the table the whole view gives it.
    auto by_delta = prober.routes, by_whole = prober.routes;
    for (auto& r : delta.routes)
      by_delta.apply(r);
    for (auto& r : whole.routes)
      by_whole.apply(r);
    BOOST_TEST(by_delta.runs() == by_whole.runs());
    BOOST_TEST(by_delta.owner(65) == 47u);
  }
}

namespace {

/// What a processor's view holds that tests can see: its members and its routing table.
struct seen_view {
  std::map<proc_id, wire::member> members;
  routing_table routes;
};

seen_view view_of(const mini_grid& g, proc_id p) {
  seen_view v;
  auto s = g.sup(p);
  for (auto m : s->members())
    v.members[m] = *s->member_info(m);
  v.routes = s->routes();
  return v;
}

/// Counts the probe replies of a grid and checks, for each that carries a view or part
/// of one, that every member entry and route of the candidate that the prober lacked
/// when it asked is in it.
struct reply_tap {
  std::map<std::pair<proc_id, std::uint64_t>, seen_view> asked; // (prober, seq)
  std::size_t omitted = 0, deltas = 0, wholes = 0, missing = 0;
  std::size_t delta_bytes = 0, whole_bytes = 0; // the largest of each, without padding

  void install(mini_grid& g) {
    g.slow([this, &g](const wire::envelope& e) {
      if (auto* q = std::get_if<wire::bw_request>(&e.body))
        asked[{e.from, q->seq}] = view_of(g, e.from);
      if (auto* r = std::get_if<wire::bw_reply>(&e.body))
        check(g, e, *r);
      return false;
    }, duration{0});
  }

  void check(const mini_grid& g, const wire::envelope& e, const wire::bw_reply& r) {
    const auto bare = wire::wire_size(r) - r.padding;
    if (r.view_omitted) {
      ++omitted;
      return;
    }
    if (g.sup(e.from)->state() != supervisor::status::member)
      return; // the empty reply of a processor that is leaving
    (r.view_buckets.empty() ? wholes : deltas) += 1;
    auto& widest = r.view_buckets.empty() ? whole_bytes : delta_bytes;
    widest = std::max(widest, bare);
    auto it = asked.find({e.to, r.seq});
    if (it == asked.end())
      return;
    const auto& prober = it->second;
    const auto cand = view_of(g, e.from);
    for (auto& [p, m] : cand.members) {
      auto had = prober.members.find(p);
      if ((had == prober.members.end() || !(had->second == m))
          && std::find(r.members.begin(), r.members.end(), m) == r.members.end()) {
        ++missing;
        BOOST_TEST_MESSAGE("member " << p << " left out of a reply to " << e.to);
      }
    }
    for (auto& route : cand.routes.snapshot())
      if (prober.routes.would_change(route)
          && std::find(r.routes.begin(), r.routes.end(), route) == r.routes.end()) {
        ++missing;
        BOOST_TEST_MESSAGE("route of " << route.owner << " left out of a reply to " << e.to);
      }
  }
};

supervisor_config with_buckets(std::size_t n) {
  supervisor_config cfg;
  cfg.view_buckets = n;
  return cfg;
}

/// Leaves, a rejoin and a crash on tiny-2c8 (8 processors, one vnode each).
void churn(mini_grid& g) {
  g.leave(3, 2);
  g.leave(6);
  g.run();
  g.join_again(6, 1, vnode_set::range(6, 7));
  g.run();
  g.join_again(3, 0, vnode_set::range(3, 4));
  g.run();
}

} // namespace

BOOST_AUTO_TEST_CASE(replies_after_churn_carry_every_difference_and_views_converge) {
  for (std::size_t n : {std::size_t{128}, std::size_t{2}, std::size_t{0}}) {
    BOOST_TEST_CONTEXT("view_buckets " << n) {
      mini_grid g{tiny(), 3, with_buckets(n)};
      reply_tap tap;
      tap.install(g);
      g.start();
      g.run();
      check_settled(g, 8);
      BOOST_TEST(tap.omitted > 0u); // founded with one view
      BOOST_TEST(tap.deltas + tap.wholes == 0u);
      churn(g);
      check_settled(g, 8);
      BOOST_TEST(tap.missing == 0u);
      if (n == 0) { // no bucket digests sent: whole views only
        BOOST_TEST(tap.deltas == 0u);
        BOOST_TEST(tap.wholes > 0u);
      }
      if (n == 128) {
        BOOST_TEST(tap.deltas > 0u);
        BOOST_TEST(tap.delta_bytes < tap.whole_bytes + (tap.wholes == 0 ? 1000000u : 0u));
      }
      auto first = view_of(g, 0);
      for (proc_id p = 1; p < 8; ++p) {
        auto v = view_of(g, p);
        BOOST_TEST((v.members == first.members), "members of " << p);
        BOOST_TEST((v.routes.runs() == first.routes.runs()), "routes of " << p);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_processor_that_missed_the_news_learns_it_from_delta_replies) {
  // Processor 5 never hears of joins, leaves, crashes or route changes but through
  // probe replies: every such notice to it vanishes. Background probing keeps it probing.
  supervisor_config cfg;
  cfg.background_period = std::chrono::milliseconds(500);
  mini_grid g{tiny(), 4, cfg};
  const proc_id deaf = 5;
  g.lose([&](const wire::envelope& e) {
    return e.to == deaf
           && (std::holds_alternative<wire::member_joined>(e.body)
               || std::holds_alternative<wire::member_left>(e.body)
               || std::holds_alternative<wire::routing_update>(e.body));
  }, 1'000'000);
  std::size_t to_deaf_wholes = 0;
  std::set<proc_id> joined_seen, departed_seen; // news carried to 5 by delta replies
  std::size_t route_news = 0;
  g.slow([&](const wire::envelope& e) {
    auto* r = std::get_if<wire::bw_reply>(&e.body);
    if (r == nullptr || e.to != deaf || r->view_omitted || g.sup(e.from)->state() != supervisor::status::member)
      return false;
    if (r->view_buckets.empty()) {
      ++to_deaf_wholes;
      return false;
    }
    auto mine = view_of(g, deaf);
    for (auto& m : r->members)
      if (!mine.members.count(m.id) || !(mine.members[m.id] == m))
        joined_seen.insert(m.id);
    for (auto& d : r->departed)
      if (mine.members.count(d.id) && mine.members[d.id].incarnation == d.incarnation)
        departed_seen.insert(d.id);
    for (auto& route : r->routes)
      if (mine.routes.would_change(route))
        ++route_news;
    return false;
  }, duration{0});
  g.start();
  g.run_for(std::chrono::seconds(5));

  g.leave(3, 2); // a leave, its vnode to 2
  g.run_for(std::chrono::seconds(5));
  g.crash(1);    // a crash: its vnode adopted by a survivor
  g.run_for(std::chrono::seconds(15));
  g.join_again(3, 0, vnode_set::range(3, 4)); // a join that takes a vnode back
  g.run_for(std::chrono::seconds(15));
  BOOST_TEST(g.lost() > 0);

  // 5 knows what the others know.
  auto others = view_of(g, 0);
  auto v = view_of(g, deaf);
  BOOST_TEST(!others.members.count(1));
  BOOST_TEST(others.members.count(3) == 1u);
  BOOST_TEST((v.members == others.members));
  BOOST_TEST((v.routes.runs() == others.routes.runs()));
  BOOST_TEST(v.routes.owner(3) == 3u);
  // And it learned them from replies that carried only the buckets that differed.
  BOOST_TEST(to_deaf_wholes == 0u);
  BOOST_TEST(joined_seen.count(3) == 1u);
  BOOST_TEST(departed_seen.count(3) == 1u);
  BOOST_TEST(route_news > 0u);
}
