// The emulated wide-area network as an actor. EMULATED: messages never leave the
// process. The actor owns a wan_model; every message a processor sends is
// submitted to the model with its modelled wire size, and the actor wakes itself
// (a delayed message on the actor clock, so virtual time works) whenever the model
// says the next delivery is due.

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/reduce.hpp"
#include "banyan/net/wan_model.hpp"
#include "collective_glue.hpp"

namespace banyan::actors {

namespace {

/// Whether a frame is an engine's: only those come back to their sender (bounced or
/// refused); the supervisor hears of an undeliverable frame by a notice instead.
bool engine_frame(const wire::message& m) {
  return wire::kind_of(m) != collective_kind::none;
}

struct flight {
  wire::envelope e;
  std::uint64_t gen = 0; ///< the sender's attachment (incarnation) when it was sent
};

/// A frame for a processor told it may detach, kept until it detaches or stays.
struct parked_frame {
  wire::envelope e;
  std::uint64_t gen = 0;
  std::size_t bytes = 0;
};

struct network_state {
  std::unique_ptr<net::wan_model> model;
  timestamp origin{0}; ///< time zero of the model's scheduled changes
  std::unordered_map<std::uint64_t, flight> flying;
  std::vector<caf::actor> procs;
  /// A rejoining incarnation whose id is still held by its draining predecessor, with
  /// the join it makes once the predecessor detaches: (actor, contact, wanted).
  std::map<proc_id, std::tuple<caf::actor, proc_id, vnode_set>> waiting;
  std::multiset<timestamp> ticks;
  std::shared_ptr<shared_counters> ctr;
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> trace;

  // The fates of the engine frames each processor id sent (docs/collectives.md,
  // "Leaving"): a frame is in flight, then handed to its receiver (which takes or
  // refuses it) or undeliverable; a refused or undeliverable one is on its way back.
  std::vector<std::uint64_t> gen;        ///< attachments of each id so far
  std::vector<std::uint64_t> flying_out; ///< frames of p not handed to anyone yet
  std::vector<std::uint64_t> returning;  ///< frames of p on their way back to it
  /// Engine frames on their way to p (not handed to it yet): a leaver stays for them, so
  /// that it relays a stream that was sent to it before its senders heard it left
  /// instead of letting every segment bounce back to a sender that then reroutes it.
  std::vector<std::uint64_t> flying_in;
  std::vector<std::uint64_t> handed;     ///< messages handed to id q (frames, bounces)
  std::vector<std::uint64_t> base;       ///< `handed` when q's incarnation attached
  std::vector<std::uint64_t> confirmed;  ///< q has handled the first this many of them
  std::vector<bool> syncing;             ///< a sync to q is unanswered
  /// last_from[p][q]: `handed[q]` right after the last engine frame of p reached q: p's
  /// frames there are settled once q confirmed that many (a refusal arrives before).
  /// Only receivers not known to have handled them are kept (a sender writes to few).
  std::vector<std::map<proc_id, std::uint64_t>> last_from;
  /// Leavers asking to detach: (the incarnation, messages it had received then).
  std::map<proc_id, std::pair<caf::actor, std::uint64_t>> asks;
  std::set<proc_id> dirty; ///< asks to look at again
  /// Told they may detach: frames for them wait here.
  std::map<proc_id, std::vector<parked_frame>> closing;
  static inline const char* name = "banyan.emulated_network";
};

using network_ptr = caf::stateful_actor<network_state>*;

/// Something changed for p: its ask, if any, is to be looked at again.
void touch(network_ptr self, proc_id p) {
  auto& st = self->state;
  if (!st.asks.empty() && st.asks.count(p))
    st.dirty.insert(p);
}

/// Carries `e` back to its sender after `back`; counted in flight meanwhile, so that a
/// cluster is not quiet while a frame is on its way back.
void bounce(network_ptr self, wire::envelope e, std::uint64_t gen, duration back) {
  auto& st = self->state;
  ++st.ctr->in_flight;
  ++st.returning[e.from];
  self->delayed_send(self, back, bounced_atom::value, std::move(e), gen);
}

/// Frame `e` (sent by incarnation `gen` of e.from) arrives at e.to now.
void hand(network_ptr self, wire::envelope e, std::uint64_t gen, std::size_t bytes) {
  auto& st = self->state;
  auto now = now_of(self);
  const auto from = e.from;
  const auto to = e.to;
  const bool engine = engine_frame(e.body);
  const bool running = to < st.procs.size() && st.procs[to];
  if (running) {
    if (auto c = st.closing.find(to); c != st.closing.end()) {
      c->second.push_back({std::move(e), gen, bytes}); // still in flight
      return;
    }
  }
  --st.ctr->in_flight;
  if (engine && from < st.flying_out.size()) {
    --st.flying_out[from];
    touch(self, from);
  }
  if (engine && to < st.flying_in.size()) {
    --st.flying_in[to];
    touch(self, to);
  }
  if (st.trace)
    st.trace(running ? frame_trace::kind::delivered : frame_trace::kind::undeliverable, now, e,
             bytes);
  if (running) {
    ++st.handed[to];
    if (engine && from < st.procs.size())
      st.last_from[from][to] = st.handed[to];
    touch(self, to); // an ask of `to` is out of date
    self->send(st.procs[to], deliver_atom::value, std::move(e), gen);
    return;
  }
  // Nobody runs there: the sender hears of it one way later, as it would from
  // a refused connection.
  ++st.ctr->dropped;
  if (from < st.procs.size() && st.procs[from]) {
    auto back = st.model->topo().one_way(to, from);
    self->delayed_send(st.procs[from], back, unreachable_atom::value, to);
    // The engines need the frame itself back (the supervisor, the notice above).
    if (engine)
      bounce(self, std::move(e), gen, back);
  }
}

/// Answers the asks marked dirty: no (p was sent something since it asked), ok (nothing
/// p sent can come back: none in flight, none on its way back, every receiver has
/// handled p's frames, asking those that may not have with a sync), or not yet.
void answer_asks(network_ptr self) {
  auto& st = self->state;
  auto dirty = std::move(st.dirty);
  st.dirty.clear();
  for (auto p : dirty) {
    auto a = st.asks.find(p);
    if (a == st.asks.end())
      continue;
    auto& [who, received] = a->second;
    if (st.handed[p] - st.base[p] != received) {
      self->send(who, drain_no_atom::value);
      st.asks.erase(a);
      continue;
    }
    if (st.flying_out[p] > 0 || st.returning[p] > 0 || st.flying_in[p] > 0)
      continue;
    bool settled = true;
    auto& sent_to = st.last_from[p];
    for (auto i = sent_to.begin(); i != sent_to.end();) {
      const auto q = i->first;
      if (i->second <= st.confirmed[q]) {
        i = sent_to.erase(i);
        continue;
      }
      ++i;
      settled = false;
      if (!st.syncing[q] && st.procs[q]) {
        st.syncing[q] = true;
        self->send(st.procs[q], sync_atom::value, st.handed[q]);
      }
    }
    if (!settled)
      continue;
    st.closing[p]; // frames for p wait from now on
    self->send(who, drain_ok_atom::value);
    st.asks.erase(a);
  }
}

/// Every ask is to be looked at again.
void all_dirty(network_ptr self) {
  for (auto& [p, a] : self->state.asks)
    self->state.dirty.insert(p);
}

/// A new incarnation of p is attached.
void attached(network_ptr self, proc_id p, caf::actor a) {
  auto& st = self->state;
  st.procs[p] = std::move(a);
  ++st.gen[p];
  st.base[p] = st.handed[p];
  st.confirmed[p] = st.handed[p];
  st.syncing[p] = false;
}

/// Frames that waited for p (told it may detach) go on: to p, which stays, or to what
/// runs at p's id now.
void release(network_ptr self, proc_id p) {
  auto& st = self->state;
  auto c = st.closing.find(p);
  if (c == st.closing.end())
    return;
  auto frames = std::move(c->second);
  st.closing.erase(c);
  for (auto& f : frames)
    hand(self, std::move(f.e), f.gen, f.bytes);
}

void pump(network_ptr self) {
  auto& st = self->state;
  auto now = now_of(self);
  for (auto& d : st.model->advance(now)) {
    auto i = st.flying.find(d.id);
    if (i == st.flying.end())
      continue;
    auto f = std::move(i->second);
    st.flying.erase(i);
    hand(self, std::move(f.e), f.gen, d.bytes);
  }
  if (auto next = st.model->next_event()) {
    if (st.ticks.empty() || *next < *st.ticks.begin()) {
      auto delay = std::max(*next - now, duration{0});
      st.ticks.insert(*next);
      self->delayed_send(self, delay, tick_atom::value, next->count());
    }
  }
  if (!st.dirty.empty())
    answer_asks(self);
}

caf::behavior network_actor(
  network_ptr self, banyan::topology topo, std::shared_ptr<shared_counters> ctr,
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> trace,
  duration share_quantum) {
  auto& init = self->state;
  const auto n = topo.proc_count();
  init.trace = std::move(trace);
  init.procs.resize(n);
  init.gen.assign(n, 0);
  init.flying_out.assign(n, 0);
  init.returning.assign(n, 0);
  init.flying_in.assign(n, 0);
  init.handed.assign(n, 0);
  init.base.assign(n, 0);
  init.confirmed.assign(n, 0);
  init.syncing.assign(n, false);
  init.last_from.resize(n);
  net::wan_options opts;
  opts.origin = now_of(self); // scheduled changes count from the network's start
  opts.share_quantum = share_quantum;
  init.origin = opts.origin;
  init.model = std::make_unique<net::wan_model>(std::move(topo), opts);
  init.ctr = std::move(ctr);
  return {
    [=](send_atom, envelope_batch& batch) {
      auto& st = self->state;
      auto now = now_of(self);
      for (auto& e : batch) {
        if (e.to >= st.procs.size() || e.from >= st.procs.size()) {
          ++st.ctr->dropped;
          continue;
        }
        auto bytes = wire::wire_size(e.body);
        auto id = st.model->submit(now, e.from, e.to, bytes);
        if (st.trace)
          st.trace(frame_trace::kind::sent, now, e, bytes);
        if (engine_frame(e.body)) {
          ++st.flying_out[e.from];
          ++st.flying_in[e.to];
        }
        const auto gen = st.gen[e.from];
        st.flying.emplace(id, flight{std::move(e), gen});
        ++st.ctr->in_flight;
        ++st.ctr->messages;
        st.ctr->bytes += bytes;
      }
      pump(self);
    },
    [=](change_atom, const network_change& c, std::int64_t at) {
      // `at` is the change's time on the actor clock.
      auto& st = self->state;
      auto rel = c;
      rel.at = timestamp{at} - st.origin;
      st.model->schedule(rel);
      pump(self);
    },
    [=](tick_atom, std::int64_t at) {
      auto& ticks = self->state.ticks;
      if (auto i = ticks.find(timestamp{at}); i != ticks.end())
        ticks.erase(i);
      pump(self);
    },
    [=](refuse_atom, wire::envelope& e, std::uint64_t gen) {
      // The engine at e.to did not take the frame: it goes back as if nobody ran there.
      auto& st = self->state;
      ++st.ctr->dropped;
      auto back = st.model->topo().one_way(e.to, e.from);
      bounce(self, std::move(e), gen, back);
    },
    [=](bounced_atom, wire::envelope& e, std::uint64_t gen) {
      auto& st = self->state;
      --st.ctr->in_flight;
      const auto p = e.from;
      --st.returning[p];
      touch(self, p);
      if (st.procs[p]) {
        if (gen != st.gen[p])
          ++st.ctr->stray_returns;
        ++st.handed[p];
        self->send(st.procs[p], bounced_atom::value, std::move(e));
      } else {
        ++st.ctr->stray_returns;
      }
      answer_asks(self);
    },
    [=](drain_ask_atom, proc_id p, const caf::actor& who, std::uint64_t received) {
      auto& st = self->state;
      if (p >= st.procs.size() || st.procs[p] != who)
        return;
      st.asks[p] = {who, received};
      st.dirty.insert(p);
      answer_asks(self);
    },
    [=](drain_cancel_atom, proc_id p, const caf::actor& who) {
      auto& st = self->state;
      if (p >= st.procs.size() || st.procs[p] != who)
        return;
      release(self, p);
      answer_asks(self);
    },
    [=](synced_atom, proc_id q, std::uint64_t count) {
      auto& st = self->state;
      if (q >= st.procs.size())
        return;
      st.syncing[q] = false;
      st.confirmed[q] = std::max(st.confirmed[q], count);
      all_dirty(self);
      answer_asks(self);
    },
    [=](attach_atom, proc_id p, caf::actor a) {
      if (p < self->state.procs.size())
        attached(self, p, std::move(a));
    },
    [=](attach_atom, proc_id p, caf::actor a, proc_id contact, const vnode_set& wanted) {
      // A processor that joins again: while its earlier incarnation is still attached
      // (it left but its frames may still come back, or it still holds streams), frames
      // for p and bounces of the frames it sent must keep reaching it; a stream split
      // between two incarnations would never complete. So the new incarnation attaches,
      // and joins, once the old one detaches.
      auto& st = self->state;
      if (p >= st.procs.size())
        return;
      if (st.procs[p]) {
        if (st.waiting.count(p)) // replaced before it could join: that join is off
          --st.ctr->joining;
        st.waiting[p] = {std::move(a), contact, wanted};
        return;
      }
      attached(self, p, a);
      --st.ctr->joining;
      self->send(a, join_atom::value, contact, wanted);
    },
    [=](detach_atom, proc_id p, const caf::actor& who) {
      // Only the processor attached now. It has handled every message the network sent
      // it (a leaver detaches only then; a crashed one lost the rest).
      auto& st = self->state;
      if (p >= st.procs.size() || st.procs[p] != who)
        return;
      st.procs[p] = nullptr;
      st.asks.erase(p);
      st.confirmed[p] = st.handed[p];
      st.syncing[p] = false;
      if (auto i = st.waiting.find(p); i != st.waiting.end()) {
        auto [next, contact, wanted] = std::move(i->second);
        st.waiting.erase(i);
        attached(self, p, next);
        --st.ctr->joining;
        self->send(next, join_atom::value, contact, wanted);
      }
      release(self, p); // to the new incarnation, or back to their senders
      all_dirty(self);
      answer_asks(self);
    },
  };
}

} // namespace

caf::actor spawn_emulated_network(
  caf::actor_system& sys, const banyan::topology& topo, std::shared_ptr<shared_counters> counters,
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> on_frame,
  duration share_quantum) {
  return sys.spawn(network_actor, topo, std::move(counters), std::move(on_frame), share_quantum);
}

} // namespace banyan::actors
