#pragma once
// Collective engines riding along the supervisors of a mini_grid, as a processor actor
// would own them: every frame for an engine goes to it, it sees every supervisor event
// (`on_view_change`), its timers come back to it, and its processor stays reachable
// until it has drained. Deliveries are checked and counted in a ledger shared by all
// processors, so a test can ask whether every vnode got every broadcast exactly once.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "core/mini_grid.hpp"

namespace banyan::test {

/// What every processor delivered, for the whole grid.
struct delivery_ledger {
  std::map<wire::collective_id, shared_bytes> sent;        ///< op -> the message
  std::map<std::pair<wire::collective_id, vnode_id>, int> count; ///< deliveries
  std::vector<std::string> problems; ///< deliveries that were wrong in themselves

  /// Every op sent reached each vnode of [0, vnodes) exactly once; the first few
  /// exceptions, or an empty string.
  std::string check_exactly_once(vnode_id vnodes) const {
    std::string r;
    int shown = 0;
    for (auto& [op, msg] : sent)
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto i = count.find({op, v});
        int n = i == count.end() ? 0 : i->second;
        if (n != 1 && shown++ < 8)
          r += "broadcast (" + std::to_string(op.origin) + "," + std::to_string(op.seq) +
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

/// Engines of one processor incarnation.
class collective_rider final : public mini_grid::rider {
public:
  /// Over the processor's supervisor (adaptive trees).
  collective_rider(const supervisor& s, delivery_ledger& ledger, broadcast_config bc)
    : sup_(&s), view_(std::make_unique<supervisor_view>(s)), ledger_(ledger),
      bcast_(*view_, bc) {}
  /// Over another view (static trees); ownership as that view says.
  collective_rider(std::unique_ptr<tree_view> view, delivery_ledger& ledger, broadcast_config bc)
    : view_(std::move(view)), ledger_(ledger), bcast_(*view_, bc) {}

  broadcast_engine& bcast() { return bcast_; }
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

  bool on_message(timestamp now, proc_id from, const wire::message& m, outbox& out) override {
    broadcast_outbox bo;
    bool taken = broadcast_engine::handles(m) && bcast_.on_message(now, from, m, bo);
    take(bo, out);
    return taken;
  }
  void on_timer(timestamp now, std::uint64_t token, outbox& out) override {
    broadcast_outbox bo;
    bcast_.on_timer(now, token, bo);
    take(bo, out);
  }
  void after_supervisor(timestamp now, outbox& out) override {
    broadcast_outbox bo;
    bcast_.on_view_change(now, bo);
    take(bo, out);
  }
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m, outbox& out) override {
    broadcast_outbox bo;
    bcast_.on_undeliverable(now, to, m, bo);
    take(bo, out);
  }
  /// A processor that left stays until its engine has drained.
  bool active(timestamp now) const override { return !bcast_.drained(now); }

private:
  void take(broadcast_outbox& bo, outbox& out) {
    for (auto& e : bo.sends)
      out.sends.push_back(std::move(e));
    for (auto& t : bo.timers)
      out.timers.push_back(t);
    for (auto& d : bo.deliveries) {
      // Independent of the engine: the vnodes are owned here now, and the bytes are right.
      auto own = sup_ ? sup_->own_vnodes() : view_->own_vnodes();
      if (sup_ && sup_->state() != supervisor::status::member &&
          sup_->state() != supervisor::status::leaving)
        own.clear();
      if (!own.includes(d.vnodes))
        ledger_.problems.push_back("delivered " + d.vnodes.to_string() + " at processor " +
                                   std::to_string(view_->self()) + " which owns " +
                                   own.to_string());
      auto sent = ledger_.sent.find(d.op);
      if (sent == ledger_.sent.end() || !(sent->second == d.payload))
        ledger_.problems.push_back("wrong bytes delivered at processor " +
                                   std::to_string(view_->self()));
      d.vnodes.for_each([&](vnode_id v) { ++ledger_.count[{d.op, v}]; });
    }
    bo.clear();
  }

  const supervisor* sup_ = nullptr;
  std::unique_ptr<tree_view> view_;
  delivery_ledger& ledger_;
  broadcast_engine bcast_;
};

} // namespace banyan::test
