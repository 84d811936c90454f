#pragma once
/// A discrete-event model of the emulated wide-area network. It never reads a clock: its
/// owner hands it the current time, asks when the next thing happens, and advances it, so
/// the same model runs in virtual time (tests, simulator) and in real time (an actor
/// driving it from timers). Deterministic: the same calls give the same deliveries.
///
/// The life of one message a -> b of n bytes submitted at `now`:
///
///     now           start                       sent          delivered
///      |--overhead--|==== transmitting ========|---one_way---|
///       a's CPU,     shares every resource on   latency of the topology (rtt / 2)
///       one message  its path with the other
///       at a time    transmitting messages
///
///   1. Sender CPU. Each message costs `send_overhead`; a sender's messages are processed
///      one after another: start = max(now, cpu_free[a]) + overhead.
///   2. Per-pair stream. Messages a -> b leave in submission order, one at a time, like
///      bytes in one TCP connection: a message starts transmitting at `start`, or when
///      the previous message a -> b has been sent, whichever is later. This is what keeps
///      delivery FIFO per ordered pair, and it makes one pair count as one flow for
///      fairness however many messages it has queued.
///   3. Transmission. The path's resources (topology.hpp) are a's NIC out, the uplinks
///      out of a's groups below the common group, the directed link between the two
///      sides, the uplinks into b's groups, b's NIC in. Every transmitting message gets a
///      max-min fair rate over all of them (progressive filling), recomputed whenever a
///      message starts or finishes transmitting:
///
///          a0 --\                        /--> b0     a0->b0 and a1->b1 share the link
///                >== A -> B link 100 ==<            (50 each); a0->a2 shares only a0's
///          a1 --/                        \--> b1     NIC with a0->b0
///
///   4. Latency. The message is delivered one_way(a, b) after its last byte was sent.
///
///   Small messages (wan_options::squeeze_bytes) on an idle pair skip step 3's sharing:
///   they take their uncontended transmission time.
///
/// A message to oneself is delivered at its start and uses no resources. Times are whole
/// nanoseconds; a transmission's end is rounded up to the next nanosecond.
///
/// Networks that change: the topology's scheduled changes (`topology::changes`,
/// core/network_change.hpp) take effect at their time, measured from time zero of the
/// owner's clock. A new capacity (bandwidth, or the share cross-traffic leaves) applies at
/// once to the messages transmitting then, whose rates are recomputed at that instant; a
/// new RTT applies to messages sent from then on (delivery stays FIFO per pair).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "banyan/core/topology.hpp"
#include "banyan/core/types.hpp"

namespace banyan::net {

/// Modelling choices of the wan_model.
struct wan_options {
  /// A message of at most this many bytes on an idle pair does not take part in
  /// bandwidth sharing: it is charged its uncontended transmission time (it would
  /// slip between the packets of bulk transfers). Control messages are that small;
  /// 0 makes every message share. Also the main cost saver: rates are recomputed
  /// only for bulk transfers.
  std::size_t squeeze_bytes = 4096;
  /// Time zero of the scheduled changes (`topology::changes`): a change `at 5s` takes
  /// effect at origin + 5 s of the owner's clock.
  timestamp origin{0};
  /// An approximation for large runs (0, the default: exact). When positive, the fair
  /// rates are recomputed only at whole multiples of this duration (counted from time
  /// zero of the owner's clock): a transmission that starts in between waits for the next
  /// multiple before it moves, and a transmission's end is rounded up to a multiple. All
  /// the starts and ends of one interval then cost one recomputation. Each bulk message
  /// can arrive up to twice this late; messages that slip between the bulk transfers
  /// (`squeeze_bytes`) are not affected.
  duration share_quantum{0};
};

/// A message that has arrived at its destination.
struct delivery {
  std::uint64_t id = 0; ///< as returned by `wan_model::submit`
  proc_id from = no_proc;
  proc_id to = no_proc;
  timestamp at{}; ///< arrival time
  std::size_t bytes = 0;
};

/// Counters kept by the model (all from messages already delivered unless noted).
struct wan_stats {
  std::uint64_t messages_submitted = 0;
  std::uint64_t bytes_submitted = 0;
  std::uint64_t messages_delivered = 0;
  std::uint64_t bytes_delivered = 0;
  /// Bytes delivered between processors of one leaf group.
  std::uint64_t local_bytes = 0;
  /// Bytes delivered across groups, keyed by the directed pair of sibling groups crossed
  /// (the children of the lowest common group on the sender's and receiver's side, as
  /// indices into `topology::groups`). For a flat topology, the inter-cluster links.
  std::map<std::pair<int, int>, std::uint64_t> crossing_bytes;
};

class wan_model {
public:
  /// `topo` must be a valid topology (as returned by `parse_topology`).
  explicit wan_model(topology topo, wan_options opts = {});
  ~wan_model();
  wan_model(wan_model&&) noexcept;
  wan_model& operator=(wan_model&&) noexcept;
  wan_model(const wan_model&) = delete;
  wan_model& operator=(const wan_model&) = delete;

  /// The network as it is now: the topology with the changes applied so far.
  const topology& topo() const noexcept;
  /// Adds a scheduled change (its `at` counts from wan_options::origin, like the
  /// topology's); one dated before the last `advance` takes effect at the next event.
  /// `c` must name a link or uplink of the topology (check_network_change).
  void schedule(const network_change& c);
  /// How many of the scheduled changes have taken effect.
  std::size_t changes_applied() const noexcept;

  /// Hands over a message of `bytes` from `from` to `to` at `now`. Both processors must
  /// exist, and `now` must not be earlier than the last `advance` (the model cannot
  /// change what it has already reported).
  /// Events earlier than `now` that have not been collected yet stay pending and come out
  /// of the next `advance`. Returns the message's id (1, 2, 3, ... in submission order).
  std::uint64_t submit(timestamp now, proc_id from, proc_id to, std::size_t bytes);

  /// The earliest time at which something is delivered or a transmission starts or ends;
  /// nothing when no message is in flight. Advancing to it always makes progress.
  std::optional<timestamp> next_event() const;

  /// Processes every event up to and including `now` and returns the deliveries that
  /// happened, ordered by time, then by id. `now` must not decrease.
  std::vector<delivery> advance(timestamp now);

  /// Messages submitted and not yet returned by `advance`.
  std::size_t in_flight() const noexcept;
  /// Messages transmitting right now (past their CPU overhead, not yet fully sent).
  std::size_t transmitting() const noexcept;
  /// The current max-min rate (bytes per second) of message `id` while it transmits.
  std::optional<rate> current_rate(std::uint64_t id) const;

  const wan_stats& stats() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace banyan::net
