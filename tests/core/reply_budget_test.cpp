// A probe reply within its byte budget (supervisor_config::reply_budget): the buckets of
// the view that differ go in only while they fit, the rest are counted as left out and
// come with the next replies, from where the last one stopped (core/src/view_buckets.hpp);
// and each tree's path is cut to the prober's loop check, with the check's verdict
// unchanged and the trees still free of loops (core/src/prober.cpp).

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "../../core/src/view_buckets.hpp"
#include "banyan/core/latency_rule.hpp"
#include "core/mini_grid.hpp"
#include "core/supervisor_checks.hpp"

using namespace banyan;
using banyan::sup::differing_buckets;
using banyan::sup::next_buckets_from;
using banyan::sup::put_view;
using banyan::sup::put_view_within;
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
  /// Takes in a reply's view as a prober does: departures bury their incarnations, a
  /// member not known departed is admitted, a route of a higher epoch wins.
  void merge(const wire::bw_reply& r) {
    for (auto& d : r.departed) {
      departed[d.id].insert(d.incarnation);
      if (auto m = members.find(d.id); m != members.end() && m->second.incarnation == d.incarnation)
        members.erase(m);
    }
    for (auto& m : r.members)
      if (!departed.count(m.id) || !departed[m.id].count(m.incarnation))
        members[m.id] = m;
    for (auto& route : r.routes)
      routes.apply(route);
  }
};

/// `n` founding members as in emulation (no address), each owning 4 vnodes.
view founded(proc_id n) {
  view v;
  for (proc_id p = 0; p < n; ++p) {
    v.members[p] = {p, "", 0};
    v.routes.assign(vnode_set::range(4 * p, 4 * p + 4), p, 0);
  }
  return v;
}

/// `p` leaves and hands its vnodes to `to`.
void leave(view& v, proc_id p, proc_id to) {
  v.members.erase(p);
  v.departed[p].insert(0);
  v.routes.assign(vnode_set::range(4 * p, 4 * p + 4), to, 1);
}

/// What a candidate of 10 open roots puts in every reply before its view: 20 trees,
/// their paths cut (empty), and the open set.
wire::bw_reply trees_part(proc_id n) {
  wire::bw_reply r;
  r.seq = 77;
  for (proc_id i = 0; i < 10; ++i)
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      wire::tree_info t;
      t.tree = {i * n / 10, k};
      t.connected = true;
      t.dist = std::chrono::milliseconds(40);
      t.est = 1e7;
      t.children = 3;
      r.trees.push_back(t);
    }
  for (proc_id i = 0; i < 10; ++i)
    r.open_roots.push_back({i * n / 10, 1, 1, true});
  return r;
}

struct exchange {
  std::size_t probes = 0, cut = 0, largest = 0;
  bool converged = false;
};

/// The prober asks the candidate again and again (each time from where the last reply
/// stopped, unless `cursor` is false) until their views agree or `limit` replies came.
exchange exchange_until_equal(view& prober, const view& cand, std::size_t n, std::size_t budget,
                              std::size_t limit, bool cursor = true) {
  exchange x;
  std::uint16_t from = 0;
  for (; x.probes < limit; ++x.probes) {
    const auto differ = differing_buckets(cand.digests(n), prober.digests(n));
    if (differ.empty()) {
      x.converged = true;
      break;
    }
    auto reply = trees_part(1000);
    put_view_within(reply, cand.members, cand.departed, cand.routes, n, differ, from, budget);
    x.largest = std::max(x.largest, wire::wire_size(reply));
    BOOST_TEST(reply.view_buckets.size() + reply.view_buckets_left == differ.size());
    BOOST_TEST(!reply.view_buckets.empty()); // every reply teaches something
    BOOST_TEST(std::is_sorted(reply.view_buckets.begin(), reply.view_buckets.end()));
    if (reply.view_buckets_left > 0) {
      ++x.cut;
      if (cursor)
        from = next_buckets_from(reply.view_buckets, from, n);
    }
    prober.merge(reply);
  }
  return x;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_prober_that_missed_ten_leaves_gets_them_within_the_budget_in_a_few_probes) {
  // wan-1000's case: 1,000 members, 128 buckets, a prober that missed all ten leaves of
  // a batch: each leave changes the leaver's bucket and its recipient's.
  const std::size_t n = 128, budget = 4096;
  auto cand = founded(1000);
  for (proc_id i = 0; i < 10; ++i)
    leave(cand, 50 + 100 * i, 51 + 100 * i);
  auto prober = founded(1000);
  const auto differ = differing_buckets(cand.digests(n), prober.digests(n));
  BOOST_TEST(differ.size() >= 15u);
  BOOST_TEST(differ.size() <= 20u);

  // All of them in one reply, as without a budget: well over 4 KiB.
  auto all = trees_part(1000);
  put_view(all, cand.members, cand.departed, cand.routes, n, differ);
  BOOST_TEST(wire::wire_size(all) > 2 * budget);

  // Within the budget, in at most twice the replies that packing the view's bytes
  // into the room the trees leave would take.
  const auto base = wire::wire_size(trees_part(1000));
  const auto room = budget - base;
  const auto ideal = (wire::wire_size(all) - base + room - 1) / room;
  auto x = exchange_until_equal(prober, cand, n, budget, 20);
  BOOST_TEST_MESSAGE("differ " << differ.size() << ", all " << wire::wire_size(all) << " B, base "
                     << base << " B, replies " << x.probes << " (ideal " << ideal << "), cut "
                     << x.cut << ", largest " << x.largest << " B");
  BOOST_TEST(x.converged);
  BOOST_TEST(x.largest <= budget);
  BOOST_TEST(x.cut >= 2u);
  BOOST_TEST(x.probes <= 2 * ideal);
  BOOST_TEST((prober.members == cand.members));
  BOOST_TEST((prober.routes.runs() == cand.routes.runs()));
  BOOST_TEST(prober.digests(n) == cand.digests(n));
}

BOOST_AUTO_TEST_CASE(buckets_where_the_prober_knows_more_do_not_hold_back_the_others) {
  // The prober knows of 30 joins the candidate missed (those buckets differ for ever in
  // this exchange: what the candidate sends of them changes nothing) and missed 10
  // leaves the candidate knows. With room for one bucket per reply, asking on from
  // where the last reply stopped reaches every bucket within one sweep.
  const std::size_t n = 128;
  auto cand = founded(300);
  for (proc_id i = 0; i < 10; ++i)
    leave(cand, 7 + 29 * i, 8 + 29 * i);
  auto prober = founded(300);
  for (proc_id p = 300; p < 330; ++p) {
    prober.members[p] = {p, "", 5};
    prober.routes.assign(vnode_set::range(4 * p, 4 * p + 4), p, 0);
  }
  const auto differ = differing_buckets(cand.digests(n), prober.digests(n));
  BOOST_TEST(differ.size() >= 35u);

  auto stale = prober;
  auto x = exchange_until_equal(stale, cand, n, 1, differ.size());
  BOOST_TEST(x.cut > 0u);
  BOOST_TEST(!x.converged); // the views still differ where the prober knows more
  for (auto& [p, m] : cand.members) // but it holds everything the candidate knows
    BOOST_TEST((stale.members.count(p) && stale.members[p] == m), "member " << p);
  for (auto& [p, incs] : cand.departed)
    BOOST_TEST(stale.departed[p] == incs, "departed " << p);
  for (auto& r : cand.routes.snapshot())
    BOOST_TEST(!stale.routes.would_change(r), "route of " << r.owner);

  // Always from bucket 0 instead: the first differing bucket comes every time, and the
  // news in the later ones never does.
  auto fixed = prober;
  exchange_until_equal(fixed, cand, n, 1, differ.size(), false);
  std::size_t known = 0;
  for (auto& [p, incs] : cand.departed)
    known += fixed.departed.count(p);
  BOOST_TEST_MESSAGE("differ " << differ.size() << "; from bucket 0 every time: " << known
                     << " of " << cand.departed.size() << " departures learnt");
  BOOST_TEST(known < cand.departed.size());
}

namespace {

supervisor_config budget_of(std::size_t bytes) {
  supervisor_config cfg;
  cfg.reply_budget = bytes;
  cfg.background_period = std::chrono::milliseconds(500);
  return cfg;
}

std::map<proc_id, wire::member> members_of(const mini_grid& g, proc_id p) {
  std::map<proc_id, wire::member> out;
  auto s = g.sup(p);
  for (auto m : s->members())
    out[m] = *s->member_info(m);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_processor_that_missed_the_news_gets_it_one_bucket_a_reply) {
  // Processor 5 hears of joins, leaves and route changes only through probe replies, and
  // a budget of 1 byte lets each reply carry one bucket: it learns the news over several
  // replies, each of which says how many buckets it left out.
  mini_grid g{tiny(), 4, budget_of(1)};
  const proc_id deaf = 5;
  g.lose([&](const wire::envelope& e) {
    return e.to == deaf
           && (std::holds_alternative<wire::member_joined>(e.body)
               || std::holds_alternative<wire::member_left>(e.body)
               || std::holds_alternative<wire::routing_update>(e.body));
  }, 1'000'000);
  std::size_t to_deaf = 0, cut = 0, wider = 0;
  std::set<std::uint16_t> carried;
  g.slow([&](const wire::envelope& e) {
    auto* r = std::get_if<wire::bw_reply>(&e.body);
    if (r == nullptr || r->view_omitted || g.sup(e.from)->state() != supervisor::status::member)
      return false;
    wider += r->view_buckets.size() > 1 ? 1 : 0;
    if (e.to == deaf) {
      ++to_deaf;
      cut += r->view_buckets_left > 0 ? 1 : 0;
      carried.insert(r->view_buckets.begin(), r->view_buckets.end());
    }
    return false;
  }, duration{0});
  g.start();
  g.run_for(std::chrono::seconds(5));
  g.leave(3, 2);
  g.leave(6, 1);
  g.run_for(std::chrono::seconds(5));
  g.join_again(3, 0, vnode_set::range(3, 4));
  g.run_for(std::chrono::seconds(20));
  BOOST_TEST(g.lost() > 0);

  BOOST_TEST_MESSAGE("replies to " << deaf << " with buckets " << to_deaf << ", cut " << cut
                     << ", buckets carried " << carried.size());
  BOOST_TEST(wider == 0u); // one bucket per reply, as the budget allows
  BOOST_TEST(cut > 0u);    // some replies left buckets out
  BOOST_TEST(carried.size() >= 3u);
  BOOST_TEST(to_deaf > cut);
  const auto others = members_of(g, 0);
  BOOST_TEST(!others.count(6));
  BOOST_TEST(others.count(3) == 1u);
  BOOST_TEST((members_of(g, deaf) == others));
  BOOST_TEST((g.sup(deaf)->routes().runs() == g.sup(0)->routes().runs()));
  check_trees(g);
}

BOOST_AUTO_TEST_CASE(cut_paths_give_the_loop_check_the_verdict_of_whole_paths_and_trees_stay_loop_free) {
  // Every probe reply of a grid in churn, tree by tree: the path is the prober's id when
  // the prober is on the candidate's path to the root, else empty; so the prober's check
  // (forbidden_parent) says what it says of the whole path. The trees end valid.
  for (std::uint64_t seed : {3u, 8u}) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
      mini_grid g{random_topology(rng, 6), seed};
      const auto n = g.topo().proc_count();
      std::size_t infos = 0, on_path = 0, wrong = 0;
      g.slow([&](const wire::envelope& e) {
        auto* r = std::get_if<wire::bw_reply>(&e.body);
        if (r == nullptr)
          return false;
        for (auto& info : r->trees) {
          auto* t = g.sup(e.from)->tree(info.tree);
          if (t == nullptr)
            continue;
          const auto whole = t->info();
          ++infos;
          const bool mine = std::find(whole.path.begin(), whole.path.end(), e.to) != whole.path.end();
          on_path += mine ? 1 : 0;
          const bool cut_right = mine ? info.path == std::vector<proc_id>{e.to} : info.path.empty();
          const bool same = forbidden_parent(e.to, e.from, info) == forbidden_parent(e.to, e.from, whole);
          wrong += cut_right && same && info.dist == whole.dist && info.est == whole.est ? 0 : 1;
        }
        return false;
      }, duration{0});
      g.start();
      g.run();
      check_settled(g, n);
      g.leave(1, 0);
      g.crash(static_cast<proc_id>(n - 1));
      g.run();
      g.join_again(1, 2, vnode_set::range(1, 2));
      g.run();
      check_trees(g);
      BOOST_TEST_MESSAGE("tree entries in replies " << infos << ", prober on the path " << on_path);
      BOOST_TEST(infos > 0u);
      BOOST_TEST(on_path > 0u); // probers did probe their descendants
      BOOST_TEST(wrong == 0u);
    }
  }
}
