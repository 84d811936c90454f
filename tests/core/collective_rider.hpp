#pragma once
// Collective engines riding along the supervisors of a mini_grid, as a processor actor
// would own them: every frame for an engine goes to it, it sees every supervisor event
// (`on_view_change`), its timers come back to it, and its processor stays reachable
// until it has drained. Deliveries, contributions and results are checked and counted
// in ledgers shared by all processors, so a test can ask whether every vnode got every
// broadcast, and was counted in every reduction, exactly once.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/reduce.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/core/vnode_blocks.hpp"
#include "core/mini_grid.hpp"

namespace banyan::test {

/// What every processor delivered, for the whole grid.
struct delivery_ledger {
  std::map<wire::collective_id, shared_bytes> sent;        ///< op -> the message
  /// Point-to-point messages: op -> the vnodes it is for (broadcasts: every vnode).
  std::map<wire::collective_id, vnode_set> targets;
  std::map<std::pair<wire::collective_id, vnode_id>, int> count; ///< deliveries
  std::vector<std::string> problems; ///< deliveries that were wrong in themselves
  /// Outcomes reported at the origins (`broadcast_config::acknowledge`), and how often.
  std::map<wire::collective_id, broadcast_completion> outcomes;
  std::map<wire::collective_id, int> outcome_count;
  /// Every delivery in the order made: where, and whom that processor had taken for
  /// crashed itself before.
  struct record {
    proc_id at = no_proc;
    wire::collective_id op;
    vnode_set vnodes;
    std::vector<proc_id> took_for_crashed;
  };
  std::vector<record> log;

  /// Every broadcast sent reached each vnode of [0, vnodes) exactly once, and every
  /// point-to-point message each of its vnodes exactly once (and no other); the first
  /// few exceptions, or an empty string.
  std::string check_exactly_once(vnode_id vnodes) const {
    std::string r;
    int shown = 0;
    for (auto& [op, msg] : sent)
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto i = count.find({op, v});
        int n = i == count.end() ? 0 : i->second;
        auto t = targets.find(op);
        int want = t == targets.end() || t->second.contains(v) ? 1 : 0;
        if (n != want && shown++ < 8)
          r += std::string(t == targets.end() ? "broadcast" : "message") + " (" + std::to_string(op.origin) + "," + std::to_string(op.seq) +
               ") reached vnode " + std::to_string(v) + " " + std::to_string(n) + " times; ";
      }
    for (auto& [key, n] : count)
      if (!sent.count(key.first) && shown++ < 8)
        r += "delivery of a broadcast nobody sent; ";
    for (std::size_t i = 0; i < problems.size() && i < 4; ++i)
      r += problems[i] + "; ";
    return r;
  }
};

/// What every processor contributed to and received from reductions, for the whole grid.
struct reduction_ledger {
  reduce_op_table ops;
  /// The contribution of vnode v to reduction op (set by the test).
  std::function<std::vector<std::uint8_t>(std::uint64_t op, vnode_id v)> value;
  std::map<std::uint64_t, reduce_spec> specs;                   ///< reductions started
  std::map<std::pair<std::uint64_t, vnode_id>, int> calls;      ///< contributions taken
  std::map<std::uint64_t, std::vector<reduce_result>> results;  ///< results delivered
  std::vector<std::string> problems;

  /// Reduction op's result as computed directly: every vnode of [0, vnodes) once.
  std::vector<std::uint8_t> expected(std::uint64_t op, vnode_id vnodes) const {
    auto& spec = specs.at(op);
    std::vector<std::uint8_t> acc = value(op, 0);
    for (vnode_id v = 1; v < vnodes; ++v) {
      auto x = value(op, v);
      auto e = ops.combine(spec.fn, acc, x.data(), x.size());
      if (e)
        throw std::runtime_error(e->to_string());
    }
    return acc;
  }

  /// Every reduction started: every vnode contributed once, one result, the right one.
  std::string check(vnode_id vnodes) const {
    std::string r;
    int shown = 0;
    for (auto& [op, spec] : specs) {
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto i = calls.find({op, v});
        int n = i == calls.end() ? 0 : i->second;
        if (n != 1 && shown++ < 8)
          r += "reduction " + std::to_string(op) + " took vnode " + std::to_string(v) + " " +
               std::to_string(n) + " times; ";
      }
      auto res = results.find(op);
      if (res == results.end() || res->second.size() != 1) {
        r += "reduction " + std::to_string(op) + " has " +
             std::to_string(res == results.end() ? 0 : res->second.size()) + " results; ";
        continue;
      }
      auto& got = res->second.front();
      if (got.vnodes != vnode_set::range(0, vnodes))
        r += "reduction " + std::to_string(op) + " covers " + got.vnodes.to_string() + "; ";
      if (got.value.to_vector() != expected(op, vnodes))
        r += "reduction " + std::to_string(op) + " has a wrong value; ";
    }
    for (std::size_t i = 0; i < problems.size() && i < 4; ++i)
      r += problems[i] + "; ";
    return r;
  }
};

/// Engines of one processor incarnation.
class collective_rider final : public mini_grid::rider {
public:
  /// Over the processor's supervisor (adaptive trees). With a reduction ledger, a
  /// reduction engine too (a founder's own vnodes are settled at the start).
  collective_rider(const supervisor& s, delivery_ledger& ledger, broadcast_config bc,
                   reduction_ledger* reductions = nullptr, reduce_config rc = {})
    : sup_(&s), view_(std::make_unique<supervisor_view>(s)), ledger_(ledger),
      bcast_(*view_, bc), reductions_(reductions) {
    if (reductions_)
      reduce_.emplace(*view_, reductions_->ops, rc,
                      s.state() == supervisor::status::member ? s.own_vnodes() : vnode_set{});
  }
  /// Over another view (static trees); ownership as that view says.
  collective_rider(std::unique_ptr<tree_view> view, delivery_ledger& ledger, broadcast_config bc,
                   reduction_ledger* reductions = nullptr, reduce_config rc = {})
    : view_(std::move(view)), ledger_(ledger), bcast_(*view_, bc), reductions_(reductions) {
    if (reductions_)
      reduce_.emplace(*view_, reductions_->ops, rc, view_->own_vnodes());
  }

  broadcast_engine& bcast() { return bcast_; }
  reduce_engine& reducer() { return *reduce_; }
  tree_view& view() { return *view_; }

  /// Starts a broadcast and records what was sent.
  wire::collective_id broadcast(timestamp now, shared_bytes msg, outbox& out) {
    broadcast_outbox bo;
    auto id = bcast_.broadcast(now, msg, bo);
    if (!id)
      BOOST_FAIL(id.err().to_string());
    ledger_.sent[*id] = msg;
    take(bo, out);
    return *id;
  }

  /// Sends a point-to-point message to `to` and records what was sent.
  wire::collective_id send(timestamp now, const vnode_set& to, shared_bytes msg, outbox& out) {
    broadcast_outbox bo;
    auto id = bcast_.send(now, to, msg, bo);
    if (!id)
      BOOST_FAIL(id.err().to_string());
    ledger_.sent[*id] = msg;
    ledger_.targets[*id] = to;
    take(bo, out);
    return *id;
  }

  /// Starts reduction `spec` here; contributions come from the ledger's `value`.
  std::optional<error> reduce(timestamp now, const reduce_spec& spec, outbox& out) {
    reductions_->specs[spec.op] = spec;
    auto* l = reductions_;
    auto op = spec.op;
    reduce_outbox ro;
    auto e = reduce_->start(now, spec, [l, op](vnode_id v) {
      ++l->calls[{op, v}];
      return l->value(op, v);
    }, ro);
    take(ro, out);
    return e;
  }

  /// Gives reduction `op` up here (as a runtime's timeout or a cancel does).
  reduce_abandoned abandon(timestamp now, std::uint64_t op, outbox& out) {
    reduce_outbox ro;
    auto r = reduce_->abandon(now, op, ro);
    take(ro, out);
    return r;
  }

  bool on_message(timestamp now, proc_id from, const wire::message& m, outbox& out) override {
    if (broadcast_engine::handles(m)) {
      broadcast_outbox bo;
      bool taken = bcast_.on_message(now, from, m, bo);
      take(bo, out);
      return taken;
    }
    if (reduce_ && reduce_engine::handles(m)) {
      reduce_outbox ro;
      bool taken = reduce_->on_message(now, from, m, ro);
      take(ro, out);
      return taken;
    }
    return false;
  }
  // Timer tokens: the engine's token times 2, plus 1 for the reduction engine.
  void on_timer(timestamp now, std::uint64_t token, outbox& out) override {
    if (token % 2 == 0) {
      broadcast_outbox bo;
      bcast_.on_timer(now, token / 2, bo);
      take(bo, out);
    } else if (reduce_) {
      reduce_outbox ro;
      reduce_->on_timer(now, token / 2, ro);
      take(ro, out);
    }
  }
  void after_supervisor(timestamp now, outbox& out) override {
    broadcast_outbox bo;
    bcast_.on_view_change(now, bo);
    take(bo, out);
    if (reduce_) {
      reduce_outbox ro;
      reduce_->on_view_change(now, ro);
      take(ro, out);
    }
  }
  void on_supervisor_events(timestamp now, const std::vector<tree_event>& events,
                            outbox& out) override {
    for (auto& e : events)
      if (e.what == tree_event::kind::crash_detected)
        took_for_crashed_.push_back(e.peer);
    if (!reduce_)
      return;
    for (auto& e : events)
      if (e.what == tree_event::kind::adopted) { // as the runtimes do
        reduce_outbox ro;
        reduce_->adopt(now, e.vnodes, ro);
        take(ro, out);
      }
  }
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m, outbox& out) override {
    if (broadcast_engine::handles(m)) {
      broadcast_outbox bo;
      bcast_.on_undeliverable(now, to, m, bo);
      take(bo, out);
    } else if (reduce_) {
      reduce_outbox ro;
      reduce_->on_undeliverable(now, to, m, ro);
      take(ro, out);
    }
  }
  /// A processor that left stays until its engines have drained.
  bool active(timestamp now) const override {
    return !bcast_.drained(now) || (reduce_ && !reduce_->drained(now));
  }

private:
  vnode_set own_now() const {
    if (!sup_)
      return view_->own_vnodes();
    if (sup_->state() != supervisor::status::member && sup_->state() != supervisor::status::leaving)
      return {};
    return sup_->own_vnodes();
  }

  void take(broadcast_outbox& bo, outbox& out) {
    for (auto& e : bo.sends)
      out.sends.push_back(std::move(e));
    for (auto& t : bo.timers)
      out.timers.push_back({t.after, t.token * 2});
    for (auto& d : bo.deliveries) {
      // Independent of the engine: the vnodes are owned here now, and the bytes are right.
      auto own = own_now();
      if (!own.includes(d.vnodes))
        ledger_.problems.push_back("delivered " + d.vnodes.to_string() + " at processor " +
                                   std::to_string(view_->self()) + " which owns " +
                                   own.to_string());
      if (d.p2p != (ledger_.targets.count(d.op) > 0))
        ledger_.problems.push_back("a delivery at processor " + std::to_string(view_->self()) +
                                   " marked p2p = " + (d.p2p ? "true" : "false") + " wrongly");
      auto sent = ledger_.sent.find(d.op);
      auto want = sent == ledger_.sent.end() ? shared_bytes{} : sent->second;
      if (bcast_.config().blocks && sent != ledger_.sent.end()) {
        // A scatter: the blocks of the vnodes delivered to, out of every vnode's.
        const auto all = view_->all_vnodes();
        want = slice_blocks(want, all, d.vnodes, block_size_of(all, want.size()));
      }
      if (sent == ledger_.sent.end() || !(want == d.payload))
        ledger_.problems.push_back("wrong bytes delivered at processor " +
                                   std::to_string(view_->self()));
      d.vnodes.for_each([&](vnode_id v) { ++ledger_.count[{d.op, v}]; });
      ledger_.log.push_back({view_->self(), d.op, d.vnodes, took_for_crashed_});
    }
    for (auto& c : bo.completions) {
      if (c.op.origin != view_->self())
        ledger_.problems.push_back("an outcome of a broadcast of another origin at processor " +
                                   std::to_string(view_->self()));
      ledger_.outcomes[c.op] = c;
      ++ledger_.outcome_count[c.op];
    }
    bo.clear();
  }

  void take(reduce_outbox& ro, outbox& out) {
    for (auto& e : ro.sends)
      out.sends.push_back(std::move(e));
    for (auto& t : ro.timers)
      out.timers.push_back({t.after, t.token * 2 + 1});
    for (auto& r : ro.results) {
      if (!own_now().contains(r.root))
        reductions_->problems.push_back("result of reduction " + std::to_string(r.op) +
                                        " at processor " + std::to_string(view_->self()) +
                                        " which does not own vnode " + std::to_string(r.root));
      reductions_->results[r.op].push_back(r);
    }
    for (auto& p : ro.problems)
      reductions_->problems.push_back("processor " + std::to_string(view_->self()) +
                                      ", reduction " + std::to_string(p.op) + ": " + p.detail +
                                      " " + p.vnodes.to_string());
    ro.clear();
  }

  const supervisor* sup_ = nullptr;
  std::unique_ptr<tree_view> view_;
  delivery_ledger& ledger_;
  broadcast_engine bcast_;
  reduction_ledger* reductions_ = nullptr;
  std::vector<proc_id> took_for_crashed_; ///< crash_detected events, in order
  std::optional<reduce_engine> reduce_;
};

/// Collective riders over every supervisor of a mini_grid, adaptive trees, one ledger;
/// each incarnation numbers its broadcasts apart (`first_seq`).
struct adaptive_riders {
  delivery_ledger ledger;
  broadcast_config cfg;
  std::map<proc_id, std::uint64_t> incarnations;
  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id p, const supervisor& s) {
      auto c = cfg;
      c.first_seq = (incarnations[p]++ << 32) + 1;
      return std::make_unique<collective_rider>(s, ledger, c);
    });
  }
};

/// Processor p's rider (it must have one).
inline collective_rider& rider(mini_grid& g, proc_id p) {
  auto* r = dynamic_cast<collective_rider*>(g.rider_of(p));
  if (r == nullptr)
    throw std::logic_error("processor " + std::to_string(p) + " has no collective rider");
  return *r;
}

} // namespace banyan::test
