#include "banyan/net/wan_model.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <unordered_map>

namespace banyan::net {

namespace {

/// A transmission never ends (a rate of zero, which max-min fairness with positive
/// capacities only produces through rounding).
constexpr timestamp never{std::numeric_limits<timestamp::rep>::max()};

/// Remaining byte counts below this are floating residue: the transfer is done.
constexpr double done_bytes = 1e-6;

/// The message data that travels through the stages.
struct message {
  std::uint64_t id = 0;
  proc_id from = no_proc;
  proc_id to = no_proc;
  std::size_t bytes = 0;
};

/// A message waiting for its sender's CPU: becomes ready at `at`.
struct start_event {
  timestamp at;
  message msg;
};

/// A fully sent message, travelling for one_way: arrives at `at`.
struct arrival_event {
  timestamp at;
  message msg;
};

/// Min-heap orders: by time, then by id (ids grow with submission order).
struct later_start {
  bool operator()(const start_event& x, const start_event& y) const {
    return x.at != y.at ? x.at > y.at : x.msg.id > y.msg.id;
  }
};
struct later_arrival {
  bool operator()(const arrival_event& x, const arrival_event& y) const {
    return x.at != y.at ? x.at > y.at : x.msg.id > y.msg.id;
  }
};

/// A capacity shared by the flows crossing it.
struct resource {
  rate capacity = infinite_rate;
  std::vector<std::uint32_t> flows; ///< slots of the transmitting flows that cross it
  double load = 0;                  ///< sum of their rates, kept up to date
  /// It limited some of its flows in the last allocation that involved it: it is full,
  /// and a change to one of its flows changes the others' rates.
  bool bottleneck = false;
  // Scratch space of one rebalance:
  std::uint64_t stamp = 0;    ///< rebalance that last took it into its region
  bool whole = false;         ///< every flow crossing it is being reallocated
  bool froze = false;         ///< it fixed the rate of some flows (it is a bottleneck)
  double left = 0;            ///< capacity not yet given out
  double old_rates = 0;       ///< old rates of the reallocated flows crossing it
  double new_rates = 0;       ///< new rates of the reallocated flows crossing it
  std::uint32_t unfrozen = 0; ///< reallocated flows crossing it that have no rate yet

  /// Whether another flow crossing it could be held back by it (conservatively: nearly
  /// full counts as full).
  bool saturated() const { return bottleneck || load >= capacity * (1 - 1e-9); }
};

/// A message transmitting: its path, its progress, its current fair rate.
struct flow {
  message msg;
  std::vector<std::uint32_t> path; ///< resources crossed (finite capacities only)
  std::vector<std::uint32_t> pos;  ///< pos[i]: index of this flow in path[i]'s `flows`
  double remaining = 0;            ///< bytes not yet sent as of `updated`
  rate speed = 0;                  ///< bytes per second since `updated`
  rate next_speed = 0;             ///< water-filling result
  timestamp updated{};
  timestamp finish = never; ///< its entry in `finishes`, unless never
  std::uint32_t heap_pos = 0; ///< its index in `finishes` (when finish != never)
  bool scheduled = false; ///< a rate was assigned since it started
};

/// A flow's marks in the rebalancing, apart from the flow so that the scans over every flow
/// of a resource read a compact array.
struct flow_mark {
  std::uint64_t region = 0; ///< rebalance that last took it into its region
  std::uint64_t frozen = 0; ///< filling that last gave it its rate
};

/// Everything about a pair of leaf groups that the model needs per message.
struct route {
  std::vector<std::uint32_t> middle; ///< uplinks and link between the two NICs
  duration one_way{};
  int side_a = -1; ///< crossing key (-1: same leaf)
  int side_b = -1;
};

/// The ordered pair's stream: whether a message is on the wire, and who waits.
struct stream {
  bool busy = false;
  std::deque<message> waiting;
};

std::uint64_t pair_key(std::uint32_t a, std::uint32_t b) {
  return (static_cast<std::uint64_t>(a) << 32) | b;
}

} // namespace

struct wan_model::impl {
  topology topo;
  wan_options opts;
  std::vector<int> leaf;           ///< leaf group of every processor
  std::vector<timestamp> cpu_free; ///< when each sender's CPU is next free
  std::vector<resource> res;
  std::uint32_t uplink_base = 0; ///< res index of group g's uplink out: base + 2g (+1 in)
  std::uint32_t link_base = 0;   ///< res index of link l a->b: base + 2l (+1 b->a)
  std::unordered_map<std::uint64_t, std::uint32_t> default_links; ///< (cA, cB) -> res
  std::unordered_map<std::uint64_t, route> routes;                ///< (leaf a, leaf b)

  std::vector<flow> flows;
  std::vector<flow_mark> marks; ///< per slot, as `flows`
  std::vector<std::uint32_t> free_slots;
  std::unordered_map<std::uint64_t, std::uint32_t> slot_of; ///< transmitting id -> slot
  std::unordered_map<std::uint64_t, stream> streams;        ///< (from, to) -> stream

  std::priority_queue<start_event, std::vector<start_event>, later_start> starts;
  /// Projected ends of the transmissions (flows whose finish is not never): a min-heap
  /// of slots by (finish, message id), each flow knowing its index, so that a flow whose
  /// rate changes moves its one entry in place. Ends are processed in that order.
  std::vector<std::uint32_t> finishes;
  std::priority_queue<arrival_event, std::vector<arrival_event>, later_arrival> arrivals;

  // Changes since the last rebalance.
  std::vector<std::uint32_t> new_flows; ///< slots of flows that started
  std::vector<std::uint32_t> freed;     ///< saturated resources that lost a flow
  // Rebalancing scratch, kept to avoid reallocating on every event.
  std::vector<std::uint32_t> region_res;   ///< resources whose allocation is redone
  std::vector<std::uint32_t> region_flows; ///< flows whose rates are recomputed
  std::vector<std::uint32_t> whole_queue;  ///< whole resources whose flows to take in
  /// Water-filling queue of (fair share, resource): a min-heap in a reused vector.
  std::vector<std::pair<double, std::uint32_t>> fill;
  std::uint64_t epoch = 0;
  std::uint64_t fills = 0; ///< fillings so far (a rebalance may fill more than once)

  // Scheduled changes of the network (topology::changes), applied at their time.
  std::vector<network_change> changes;
  std::size_t next_change = 0;
  network_state capacities;
  /// Once an RTT changed, a later message of a pair could overtake an earlier one on a
  /// link whose RTT shrank: arrivals are then kept in order per pair.
  bool rtt_changed = false;
  std::unordered_map<std::uint64_t, timestamp> last_arrival; ///< (from, to) -> latest

  /// With a share quantum: the multiple of it at which the changes since the last
  /// rebalance will be applied (never: none pending).
  timestamp rebalance_at = never;

  std::uint64_t next_id = 1;
  std::uint64_t undelivered = 0;
  timestamp advanced{std::numeric_limits<timestamp::rep>::min()}; ///< last advance's now
  wan_stats stats;

  explicit impl(topology t, wan_options o)
    : topo(std::move(t)), opts(o), changes(topo.changes), capacities(topo) {
    leaf = topo.cluster_of();
    const auto n = static_cast<std::uint32_t>(leaf.size());
    cpu_free.assign(n, timestamp{std::numeric_limits<timestamp::rep>::min()});
    res.resize(2 * static_cast<std::size_t>(n));
    for (std::uint32_t p = 0; p < n; ++p)
      res[2 * p].capacity = res[2 * p + 1].capacity = topo.groups[leaf[p]].nic;
    uplink_base = static_cast<std::uint32_t>(res.size());
    for (const auto& g : topo.groups) {
      res.emplace_back().capacity = g.uplink;
      res.emplace_back().capacity = g.uplink;
    }
    link_base = static_cast<std::uint32_t>(res.size());
    for (const auto& l : topo.links) {
      res.emplace_back().capacity = l.bw_ab;
      res.emplace_back().capacity = l.bw_ba;
    }
  }

  std::uint32_t nic_out(proc_id p) const { return 2 * p; }
  std::uint32_t nic_in(proc_id p) const { return 2 * p + 1; }

  /// The resources between a's and b's NICs, and the latency; computed once per pair of
  /// leaf groups.
  const route& route_between(int la, int lb, proc_id a, proc_id b) {
    const auto key = pair_key(static_cast<std::uint32_t>(la), static_cast<std::uint32_t>(lb));
    if (auto it = routes.find(key); it != routes.end())
      return it->second;
    route r;
    r.one_way = la == lb ? topo.groups[la].rtt / 2 : topo.one_way(a, b);
    if (la != lb) {
      const auto s = topo.split_of(a, b);
      r.side_a = s.side_a;
      r.side_b = s.side_b;
      auto add = [&](std::uint32_t x) {
        if (!std::isinf(res[x].capacity))
          r.middle.push_back(x);
      };
      for (int g = la; g != s.common; g = topo.groups[g].parent)
        add(uplink_base + 2 * static_cast<std::uint32_t>(g));
      if (int l = topo.find_link(s.side_a, s.side_b); l >= 0) {
        const bool forward = topo.links[l].a == s.side_a;
        add(link_base + 2 * static_cast<std::uint32_t>(l) + (forward ? 0 : 1));
      } else {
        const rate bw = s.common < 0 ? topo.root_link_bw : topo.groups[s.common].link_bw;
        if (!std::isinf(bw)) {
          // A default link: every ordered pair of siblings has its own capacity.
          const auto k =
              pair_key(static_cast<std::uint32_t>(s.side_a), static_cast<std::uint32_t>(s.side_b));
          auto [it, fresh] = default_links.try_emplace(k, static_cast<std::uint32_t>(res.size()));
          if (fresh)
            res.emplace_back().capacity = bw;
          r.middle.push_back(it->second);
        }
      }
      std::vector<std::uint32_t> inbound;
      for (int g = lb; g != s.common; g = topo.groups[g].parent)
        if (!std::isinf(topo.groups[g].uplink))
          inbound.push_back(uplink_base + 2 * static_cast<std::uint32_t>(g) + 1);
      r.middle.insert(r.middle.end(), inbound.rbegin(), inbound.rend());
    }
    return routes.emplace(key, std::move(r)).first->second;
  }

  /// Queues the arrival of `m` at `at`, after any earlier message of its pair.
  void arrive(const message& m, timestamp at) {
    if (rtt_changed && m.from != m.to) {
      auto& last = last_arrival[pair_key(m.from, m.to)];
      at = std::max(at, last);
      last = at;
    }
    arrivals.push({at, m});
  }

  // --- share quantum (wan_options::share_quantum) ---------------------------------------

  bool quantized() const { return opts.share_quantum.count() > 0; }

  /// The first multiple of the quantum at or after `t` (never if there is none).
  timestamp quantum_ceil(timestamp t) const {
    const auto q = opts.share_quantum.count();
    const auto c = t.count();
    auto r = c % q;
    if (r < 0)
      r += q;
    if (r == 0)
      return t;
    if (c > never.count() - (q - r))
      return never;
    return timestamp{c + (q - r)};
  }

  // --- projected ends -----------------------------------------------------------------

  bool ends_before(std::uint32_t a, std::uint32_t b) const {
    const flow& x = flows[a];
    const flow& y = flows[b];
    return x.finish != y.finish ? x.finish < y.finish : x.msg.id < y.msg.id;
  }

  void place(std::size_t i, std::uint32_t s) {
    finishes[i] = s;
    flows[s].heap_pos = static_cast<std::uint32_t>(i);
  }

  void sift_up(std::size_t i) {
    const auto s = finishes[i];
    while (i > 0) {
      const auto up = (i - 1) / 2;
      if (!ends_before(s, finishes[up]))
        break;
      place(i, finishes[up]);
      i = up;
    }
    place(i, s);
  }

  void sift_down(std::size_t i) {
    const auto s = finishes[i];
    const auto n = finishes.size();
    for (;;) {
      auto child = 2 * i + 1;
      if (child >= n)
        break;
      if (child + 1 < n && ends_before(finishes[child + 1], finishes[child]))
        ++child;
      if (!ends_before(finishes[child], s))
        break;
      place(i, finishes[child]);
      i = child;
    }
    place(i, s);
  }

  /// Enters the flow in `slot`, whose finish is not never.
  void push_finish(std::uint32_t slot) {
    finishes.push_back(slot);
    sift_up(finishes.size() - 1);
  }

  /// Removes the flow in `slot`'s entry.
  void erase_finish(std::uint32_t slot) {
    const std::size_t i = flows[slot].heap_pos;
    const auto last = finishes.back();
    finishes.pop_back();
    if (i < finishes.size()) {
      place(i, last);
      sift_down(i);
      sift_up(flows[last].heap_pos);
    }
  }

  /// Moves the entry of the flow in `slot`, whose finish changed (and is not never).
  void move_finish(std::uint32_t slot) {
    sift_up(flows[slot].heap_pos);
    sift_down(flows[slot].heap_pos);
  }

  // --- scheduled changes --------------------------------------------------------------

  std::optional<timestamp> next_change_at() const {
    if (next_change >= changes.size())
      return std::nullopt;
    return opts.origin + changes[next_change].at;
  }

  /// Applies change `c` at `t`: new capacities take effect for the flows transmitting
  /// now (their rates are recomputed at `t`), a new RTT for messages sent from now on.
  void apply_change(const network_change& c) {
    capacities.apply(topo, c);
    auto set = [this](std::uint32_t x, rate cap) {
      auto& r = res[x];
      if (r.capacity == cap)
        return;
      r.capacity = cap;
      // Its flows are reallocated whole, as when a full resource loses a flow.
      if (!r.flows.empty())
        freed.push_back(x);
      else
        r.bottleneck = false;
    };
    if (c.what == network_change::target::link) {
      const auto l = static_cast<std::uint32_t>(c.link);
      set(link_base + 2 * l, topo.links[l].bw_ab);
      set(link_base + 2 * l + 1, topo.links[l].bw_ba);
      if (c.rtt) {
        routes.clear(); // one-way latencies are cached per pair of leaves
        if (!rtt_changed) {
          // From now on arrivals are ordered per pair: start from those on their way.
          rtt_changed = true;
          auto pending = arrivals;
          for (; !pending.empty(); pending.pop()) {
            const auto& a = pending.top();
            auto& last = last_arrival[pair_key(a.msg.from, a.msg.to)];
            last = std::max(last, a.at);
          }
        }
      }
    } else {
      const auto g = static_cast<std::uint32_t>(c.group);
      set(uplink_base + 2 * g, topo.groups[g].uplink);
      set(uplink_base + 2 * g + 1, topo.groups[g].uplink);
    }
  }

  /// With nothing in flight no flow can feel a change at its own time: apply those due.
  void catch_up(timestamp now) {
    if (undelivered > 0)
      return;
    for (auto at = next_change_at(); at && *at <= now; at = next_change_at())
      apply_change(changes[next_change++]);
  }

  // --- stages -------------------------------------------------------------------------

  /// The sender's CPU is done with `m`: deliver it to oneself, or queue it on its stream.
  void ready(const message& m, timestamp t) {
    if (m.from == m.to) {
      arrive(m, t);
      return;
    }
    if (m.bytes <= opts.squeeze_bytes && streams.find(pair_key(m.from, m.to)) == streams.end()) {
      // A small message on an idle stream slips between the packets of the bulk
      // transfers: charge its uncontended transmission time and leave the sharing
      // alone. FIFO per pair still holds: the stream is idle, the sender's CPU spaces
      // consecutive messages, and ties are delivered in id order.
      const auto& r = route_between(leaf[m.from], leaf[m.to], m.from, m.to);
      const auto bw = topo.path_bandwidth(m.from, m.to);
      const auto tx = std::isinf(bw) ? duration{0}
                                     : duration{static_cast<std::int64_t>(
                                         std::ceil(static_cast<double>(m.bytes) * 1e9 / bw))};
      arrive(m, t + tx + r.one_way);
      return;
    }
    auto& s = streams[pair_key(m.from, m.to)];
    if (s.busy) {
      s.waiting.push_back(m);
      return;
    }
    s.busy = true;
    start_transmission(m, t);
  }

  void start_transmission(const message& m, timestamp t) {
    std::uint32_t slot;
    if (free_slots.empty()) {
      slot = static_cast<std::uint32_t>(flows.size());
      flows.emplace_back();
      marks.emplace_back();
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    flow& f = flows[slot];
    f.msg = m;
    f.remaining = static_cast<double>(m.bytes);
    f.speed = 0;
    f.updated = t;
    f.finish = never;
    f.scheduled = false;
    f.path.clear();
    f.pos.clear();
    const auto& r = route_between(leaf[m.from], leaf[m.to], m.from, m.to);
    auto add = [&](std::uint32_t x) {
      if (std::isinf(res[x].capacity))
        return;
      f.path.push_back(x);
      f.pos.push_back(static_cast<std::uint32_t>(res[x].flows.size()));
      res[x].flows.push_back(slot);
    };
    add(nic_out(m.from));
    for (auto x : r.middle)
      add(x);
    add(nic_in(m.to));
    slot_of.emplace(m.id, slot);
    new_flows.push_back(slot);
  }

  /// The last byte of the flow in `slot` left at `t`.
  void end_transmission(std::uint32_t slot, timestamp t) {
    flow& f = flows[slot];
    for (std::size_t i = 0; i < f.path.size(); ++i) {
      auto& r = res[f.path[i]];
      // Only a full resource hands the freed capacity to its other flows.
      if (r.saturated())
        freed.push_back(f.path[i]);
      r.load -= f.speed;
      const auto at = f.pos[i];
      const auto moved = r.flows.back();
      r.flows[at] = moved;
      r.flows.pop_back();
      if (moved != slot) {
        // Tell the moved flow where it now sits in this resource's list.
        auto& g = flows[moved];
        for (std::size_t j = 0; j < g.path.size(); ++j)
          if (g.path[j] == f.path[i]) {
            g.pos[j] = at;
            break;
          }
      }
      if (r.flows.empty()) {
        r.load = 0; // no rounding residue survives an idle resource
        r.bottleneck = false;
      }
    }
    const message m = f.msg;
    if (f.finish != never)
      erase_finish(slot);
    f.scheduled = false;
    slot_of.erase(m.id);
    free_slots.push_back(slot);
    const auto& r = route_between(leaf[m.from], leaf[m.to], m.from, m.to);
    arrive(m, t + r.one_way);
    auto it = streams.find(pair_key(m.from, m.to));
    assert(it != streams.end() && it->second.busy);
    if (it->second.waiting.empty()) {
      streams.erase(it);
    } else {
      const message next = it->second.waiting.front();
      it->second.waiting.pop_front();
      start_transmission(next, t);
    }
  }

  void deliver(const arrival_event& a, std::vector<delivery>& out) {
    out.push_back({a.msg.id, a.msg.from, a.msg.to, a.at, a.msg.bytes});
    --undelivered;
    stats.messages_delivered++;
    stats.bytes_delivered += a.msg.bytes;
    if (a.msg.from == a.msg.to)
      return;
    const auto& r = route_between(leaf[a.msg.from], leaf[a.msg.to], a.msg.from, a.msg.to);
    if (r.side_a < 0)
      stats.local_bytes += a.msg.bytes;
    else
      stats.crossing_bytes[{r.side_a, r.side_b}] += a.msg.bytes;
  }

  // --- max-min fairness ---------------------------------------------------------------
  //
  // The allocation is redone only in a region around what changed. A flow's rate can
  // change only if it shares a full resource (`saturated`) with a flow that changed, so
  // the region grows through full resources and stops at resources with spare capacity,
  // whose other flows keep their rates: their capacity is charged to the region. If the
  // new rates fill one of those border resources, the region swallows it and the
  // allocation is redone; the result is the same max-min allocation a computation over
  // everything would give (each flow keeps a full resource on which it is fastest).

  /// Takes resource `x` into the region; `whole` also takes every flow crossing it.
  void take_resource(std::uint32_t x, bool whole) {
    auto& r = res[x];
    if (r.stamp != epoch) {
      r.stamp = epoch;
      r.whole = false;
      region_res.push_back(x);
    }
    if (whole && !r.whole) {
      r.whole = true;
      whole_queue.push_back(x);
    }
  }

  void take_flow(std::uint32_t s) {
    auto& mark = marks[s].region;
    if (mark == epoch)
      return;
    mark = epoch;
    const flow& f = flows[s];
    region_flows.push_back(s);
    for (auto x : f.path)
      take_resource(x, res[x].saturated());
  }

  void take_whole_resources() {
    while (!whole_queue.empty()) {
      const auto x = whole_queue.back();
      whole_queue.pop_back();
      for (auto s : res[x].flows)
        if (marks[s].region != epoch)
          take_flow(s);
    }
  }

  /// Progressive filling over the region: repeatedly take the resource with the smallest
  /// fair share, give that share to its flows that have none yet, charge them everywhere
  /// else. A resource's share only grows as flows elsewhere are frozen at smaller shares,
  /// so a queued share that is out of date is too small: re-queue it at its current one.
  void fill_region() {
    ++fills;
    for (auto x : region_res) {
      auto& r = res[x];
      r.unfrozen = 0;
      r.old_rates = 0;
      r.new_rates = 0;
      r.froze = false;
    }
    // Region flows still without a rate; once none is left, every resource still queued
    // has no flow to give a share to, and the filling is over.
    std::size_t open = 0;
    for (auto s : region_flows) {
      flow& f = flows[s];
      f.next_speed = infinite_rate; // stays so for a flow crossing no finite resource
      open += f.path.empty() ? 0 : 1;
      for (auto x : f.path) {
        res[x].unfrozen++;
        res[x].old_rates += f.speed;
      }
    }
    auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
    fill.clear();
    for (auto x : region_res) {
      auto& r = res[x];
      // A border resource keeps what its other flows use.
      r.left = r.whole ? r.capacity : std::max(0.0, r.capacity - (r.load - r.old_rates));
      if (r.unfrozen > 0)
        fill.emplace_back(r.left / r.unfrozen, x);
    }
    std::make_heap(fill.begin(), fill.end(), later);
    while (open > 0 && !fill.empty()) {
      std::pop_heap(fill.begin(), fill.end(), later);
      const auto [queued, x] = fill.back();
      fill.pop_back();
      auto& r = res[x];
      if (r.unfrozen == 0)
        continue;
      const double share = r.left / r.unfrozen;
      if (share > queued) {
        fill.emplace_back(share, x);
        std::push_heap(fill.begin(), fill.end(), later);
        continue;
      }
      r.froze = true;
      for (auto s : r.flows) {
        auto& mark = marks[s];
        if (mark.region != epoch || mark.frozen == fills)
          continue; // outside the region, or already limited elsewhere
        mark.frozen = fills;
        flow& f = flows[s];
        f.next_speed = share;
        --open;
        for (auto y : f.path) {
          auto& q = res[y];
          q.left = std::max(0.0, q.left - share);
          q.new_rates += share;
          q.unfrozen--;
        }
      }
    }
  }

  /// Recomputes the rates of the flows that the starts and ends since the last call can
  /// affect, and moves their finish events.
  void rebalance(timestamp t) {
    if (freed.empty() && new_flows.empty())
      return;
    ++epoch;
    region_res.clear();
    region_flows.clear();
    for (auto x : freed)
      take_resource(x, true);
    for (auto s : new_flows)
      take_flow(s);
    freed.clear();
    new_flows.clear();
    take_whole_resources();
    for (;;) {
      fill_region();
      bool grew = false;
      for (std::size_t i = 0; i < region_res.size(); ++i) {
        const auto x = region_res[i];
        const auto& r = res[x];
        if (r.whole)
          continue;
        const double load = r.load - r.old_rates + r.new_rates;
        if (r.froze || load >= r.capacity * (1 - 1e-9)) {
          take_resource(x, true);
          grew = true;
        }
      }
      if (!grew)
        break;
      take_whole_resources();
    }

    for (auto x : region_res)
      res[x].bottleneck = res[x].froze;
    for (auto s : region_flows) {
      flow& f = flows[s];
      if (f.scheduled && f.next_speed == f.speed)
        continue; // same rate, same end: keep the event (and avoid rounding drift)
      // Progress to t at the old rate, then switch.
      if (t > f.updated && f.speed > 0) {
        if (std::isinf(f.speed))
          f.remaining = 0;
        else
          f.remaining -= f.speed * std::chrono::duration<double>(t - f.updated).count();
      }
      if (f.remaining < done_bytes)
        f.remaining = 0;
      f.updated = t;
      for (auto x : f.path)
        res[x].load += f.next_speed - f.speed;
      f.speed = f.next_speed;
      f.scheduled = true;
      const bool queued = f.finish != never;
      if (f.remaining <= 0 || std::isinf(f.speed)) {
        f.finish = t;
      } else if (f.speed <= 0) {
        f.finish = never;
      } else {
        // Round up, but forgive floating noise far below a nanosecond.
        const double ns = std::ceil(f.remaining / f.speed * 1e9 - 1e-6);
        const double max_ns = static_cast<double>((never - t).count());
        f.finish = ns >= max_ns ? never : t + timestamp{static_cast<timestamp::rep>(ns)};
      }
      if (quantized() && f.finish != never)
        f.finish = quantum_ceil(f.finish);
      if (f.finish == never) {
        if (queued)
          erase_finish(s);
      } else if (queued) {
        move_finish(s);
      } else {
        push_finish(s);
      }
    }
  }
};

wan_model::wan_model(topology topo, wan_options opts)
  : impl_(std::make_unique<impl>(std::move(topo), opts)) {}
wan_model::~wan_model() = default;
wan_model::wan_model(wan_model&&) noexcept = default;
wan_model& wan_model::operator=(wan_model&&) noexcept = default;

const topology& wan_model::topo() const noexcept {
  return impl_->topo;
}

std::uint64_t wan_model::submit(timestamp now, proc_id from, proc_id to, std::size_t bytes) {
  auto& m = *impl_;
  assert(from < m.leaf.size() && to < m.leaf.size());
  assert(now >= m.advanced);
  m.catch_up(now);
  const message msg{m.next_id++, from, to, bytes};
  const timestamp start = std::max(now, m.cpu_free[from]) + m.topo.send_overhead;
  m.cpu_free[from] = start;
  m.starts.push({start, msg});
  m.undelivered++;
  m.stats.messages_submitted++;
  m.stats.bytes_submitted += bytes;
  return msg.id;
}

std::optional<timestamp> wan_model::next_event() const {
  const auto& m = *impl_;
  std::optional<timestamp> t;
  auto consider = [&t](timestamp x) {
    if (!t || x < *t)
      t = x;
  };
  if (!m.starts.empty())
    consider(m.starts.top().at);
  if (!m.finishes.empty())
    consider(m.flows[m.finishes.front()].finish);
  if (!m.arrivals.empty())
    consider(m.arrivals.top().at);
  if (m.rebalance_at != never)
    consider(m.rebalance_at);
  // A change matters only to what is in flight (`catch_up` applies the others).
  if (m.undelivered > 0)
    if (auto c = m.next_change_at())
      consider(*c);
  return t;
}

std::vector<delivery> wan_model::advance(timestamp now) {
  auto& m = *impl_;
  assert(now >= m.advanced);
  m.advanced = now;
  m.catch_up(now);
  std::vector<delivery> out;
  // All events of one instant are applied before rates are recomputed once for it; an
  // instant may take several rounds when it creates events at itself (zero latency).
  for (auto t = next_event(); t && *t <= now; t = next_event()) {
    // Changes first: a transmission starting at this instant gets the new capacities.
    for (auto c = m.next_change_at(); c && *c == *t; c = m.next_change_at())
      m.apply_change(m.changes[m.next_change++]);
    while (!m.arrivals.empty() && m.arrivals.top().at == *t) {
      m.deliver(m.arrivals.top(), out);
      m.arrivals.pop();
    }
    while (!m.finishes.empty() && m.flows[m.finishes.front()].finish == *t)
      m.end_transmission(m.finishes.front(), *t);
    while (!m.starts.empty() && m.starts.top().at == *t) {
      const auto e = m.starts.top();
      m.starts.pop();
      m.ready(e.msg, *t);
    }
    if (!m.quantized() || m.quantum_ceil(*t) == *t) {
      m.rebalance_at = never;
      m.rebalance(*t);
    } else if (!m.freed.empty() || !m.new_flows.empty()) {
      m.rebalance_at = m.quantum_ceil(*t);
    }
  }
  std::sort(out.begin(), out.end(), [](const delivery& x, const delivery& y) {
    return x.at != y.at ? x.at < y.at : x.id < y.id;
  });
  return out;
}

std::size_t wan_model::in_flight() const noexcept {
  return static_cast<std::size_t>(impl_->undelivered);
}

std::size_t wan_model::transmitting() const noexcept {
  return impl_->slot_of.size();
}

std::optional<rate> wan_model::current_rate(std::uint64_t id) const {
  const auto& m = *impl_;
  auto it = m.slot_of.find(id);
  if (it == m.slot_of.end())
    return std::nullopt;
  return m.flows[it->second].speed;
}

void wan_model::schedule(const network_change& c) {
  auto& m = *impl_;
  auto pos = std::upper_bound(m.changes.begin() + static_cast<std::ptrdiff_t>(m.next_change),
                              m.changes.end(), c,
                              [](const network_change& x, const network_change& y) { return x.at < y.at; });
  auto& added = *m.changes.insert(pos, c);
  if (m.opts.origin + added.at < m.advanced)
    added.at = m.advanced - m.opts.origin; // (it cannot change what was reported)
}

std::size_t wan_model::changes_applied() const noexcept {
  return impl_->next_change;
}

const wan_stats& wan_model::stats() const noexcept {
  return impl_->stats;
}

} // namespace banyan::net
