#pragma once
/// The supervisor of one processor, as a pure state machine: it owns the
/// processor's vnodes and membership view and runs the parent-selection protocol
/// for every tree (a latency and a bandwidth tree per root). It is fed events (a
/// message arrived, a timer fired, the API asked to join or leave) together with
/// the current time, and answers with an `outbox`: messages to send, timers to
/// start, events to report. It never reads a clock or does I/O, so the same code
/// runs under virtual time in tests, in the emulated grid and over TCP.
///
/// It is a facade over parts, one per concept (core/src/supervisor_parts.hpp lists
/// them): membership, path memory, ownership of vnodes, probing, parent selection,
/// repair by step-parents, newcomer seeding, crash watch, update batching, join and
/// leave. Each message goes to one handler; each timer token names its part.
///
/// Trees stay true as they change: a parent pushes `tree_update` (dist, est, path) to
/// its children when its place changes; a child pushes `subtree_update` (vnodes below
/// it) to its parent when its subtree changes. A processor that finds itself on its own
/// path has been caught in a cycle made by concurrent changes: it leaves its parent and
/// measures again.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/routing_table.hpp"
#include "banyan/core/rule_context.hpp"
#include "banyan/core/supervisor_test_hooks.hpp"
#include "banyan/core/tree_state.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/variant_decision.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

/// Which roots have trees (supervisor_config::tree_set).
enum class tree_set_mode : std::uint8_t {
  all_roots, ///< every member roots a latency and a bandwidth tree, from its join on
  on_demand, ///< only the roots whose trees are open (supervisor::prepare)
};

/// How one supervisor behaves. Every field has a default (stated with it). What a rule
/// variant implies beyond its parent rules is decided in one place
/// (core/variant_decision.hpp), not by further fields here; seams for tests are in
/// supervisor_test_hooks, not here.
struct supervisor_config {
  /// Probes made after every tree has a parent (paper IV-A: 10); counted as the rule
  /// variant decides (variant_decision::extra_from_last_change). Default 10.
  int extra_measurements = 10;
  /// A probe whose candidate has not answered by then is abandoned; also how long an
  /// offer, a join request and an adoption request to a step-parent wait. Default 1 s.
  duration probe_timeout = std::chrono::seconds(1);
  /// Each probe starts after a random pause in [0, probe_jitter], so that processors do
  /// not probe in lock-step and contend for the same NICs. Default 2 ms.
  duration probe_jitter = std::chrono::milliseconds(2);
  /// The rule variant: the paper's exact algorithm, or banyan's with locality terms
  /// (see variant_decision.hpp for all it implies). Default banyan.
  rule_variant rules = rule_variant::banyan;
  /// A peer is local (same LAN) when its RTT is at most this multiple of the smallest RTT
  /// measured. Assumes LAN RTTs lie within 2x of one another and wide-area RTTs above
  /// that (the grids: 0.1-0.3 ms against 2 ms and more). Default 2.0.
  double local_factor = 2.0;
  /// Forwarding cost per child when the latency rule compares two LAN parents (a parent
  /// sends to its children one after another). Assumes one message's send cost on the
  /// host, about 20 us. Default 20 us.
  duration forward_overhead = std::chrono::microseconds(20);
  /// How much sooner a LAN parent must deliver before the latency rule moves to it.
  /// Assumes LAN RTTs of a few hundred us, so that smaller gains are noise. Default 120 us.
  duration lan_margin = std::chrono::microseconds(120);
  /// One LAN: when the RTTs measured to at least `one_lan_peers` members (or to all) are
  /// alike (spread under 4x) and all below this, every peer is local. Assumes every
  /// wide-area RTT is above it and every LAN RTT below. Default 1 ms.
  duration one_lan_rtt = std::chrono::milliseconds(1);
  /// How many members must be measured before `one_lan_rtt` may apply. Default 4.
  std::size_t one_lan_peers = 4;
  /// The bandwidth rule moves only when the estimate improves by this fraction. Assumes
  /// repeated measurements of one path vary by less. Default 0.05.
  double bw_margin = 0.05;
  /// Chance that a probe goes to a peer known to be in this LAN rather than to a
  /// uniformly random member (the paper's "hints", Section VI). Ignored by the paper
  /// variant (uniform). Default 0.5.
  double local_bias = 0.5;
  /// Mixed into every incarnation this supervisor draws, so that two lives of one
  /// processor id with the same seed draw different ones. A runtime whose processors
  /// restart sets it anew for every life (banyan::node does); 0 keeps emulations
  /// deterministic. Default 0.
  std::uint64_t incarnation_salt = 0;
  /// tree_update and subtree_update messages are held this long, so that a burst of
  /// changes costs one message per neighbour; 0 sends them at the end of every event.
  /// Default 1 ms.
  duration update_delay = std::chrono::milliseconds(1);
  /// A candidate that leaves this many probes in a row unanswered is taken to have left
  /// (0: never). A backstop for networks that do not report refused connections.
  /// Default 3.
  int probe_strikes = 3;
  /// How long a contact relays membership and routing news to a newcomer it let in.
  /// Assumes concurrent joins through different contacts settle within it. Default 5 s.
  duration sponsor_window = std::chrono::seconds(5);
  /// Crash detection of a silent peer (0: off): every member pings its successor in id
  /// order every `crash_timeout / 4` and takes it for crashed after `crash_timeout` of
  /// silence. Assumes no live peer is silent that long. Default 0.
  duration crash_timeout{0};
  /// Suspicion (SWIM's indirect probes): a member found unreachable (a refused
  /// connection, `probe_strikes`, or the watch's silence) is only suspected at first. The
  /// suspector pings it again and asks `indirect_probes` other members (ping_req) to ping
  /// it; an answer to any of these pings within `suspect_timeout` clears the suspicion,
  /// and only without one is the member declared crashed. Assumes that a live member
  /// answers the suspector or one of those helpers, through it, within the timeout (no
  /// partition cuts it off from all of them for that long). 0 helpers: the suspector's own
  /// ping only. Default 3.
  int indirect_probes = 3;
  /// How long a suspicion waits for an answer before the suspect is declared crashed
  /// (0: no suspicion, the first evidence declares it). Default 1 s.
  duration suspect_timeout = std::chrono::seconds(1);
  /// How long a member that declared a processor crashed keeps sending it `merge_offer`s
  /// (one per watch period, so only with `crash_timeout` > 0), so that the two sides of a
  /// partition that heals find each other and merge (0: never). Default 5 min.
  duration merge_window = std::chrono::minutes(5);
  /// How long after learning of a crash the adopter waits before it claims the crashed
  /// processor's vnodes, so that a handover already on its way lands first. Assumes
  /// routing news crosses the network within it. Default 100 ms.
  duration adopt_delay = std::chrono::milliseconds(100);
  /// The delivery lease (docs/architecture.md, "Delivery lease"; 0: off). A member pings
  /// its successor in id order (the member that would adopt its vnodes) every
  /// `lease / 4`; the answer to a ping sent at t lets it deliver to its vnodes until
  /// t + lease - lease / 8 (`may_deliver`), and the successor, should it take them as a
  /// crashed processor's orphans, claims them no earlier than its last answer + lease.
  /// So a processor taken for crashed while alive, however long it lags, delivers
  /// nothing after its adopter claimed. Costs two small frames per member per
  /// `lease / 4`, and delays an adoption by at most `lease` after the crashed
  /// processor's last ping arrived. Assumes clock rates differ by less than an eighth.
  /// Default 0 (quiet emulated clusters stay quiet).
  duration lease{0};
  /// Trees of a newcomer still without a parent this long after hearing of it (no seed
  /// came from its giver) are measured for. Default 1 s.
  duration seed_wait = std::chrono::seconds(1);
  /// Vnodes handed to a newcomer stay in the subtrees the giver reports this long (0: not
  /// at all), so that broadcasts route them via the giver until the newcomer's place has
  /// climbed to the roots. Assumes subtree updates reach the roots within it. Default 500 ms.
  duration lend_time = std::chrono::milliseconds(500);
  /// How long, at most, a processor whose bandwidth-tree figures are those of a lost path
  /// (`reattaching`) refuses bandwidth-rule moves to candidates outside its LAN.
  /// Assumes a parent that lost its path finds one again within it. Default 200 ms.
  duration reattach_hold = std::chrono::milliseconds(200);
  /// Measurement that never quite stops (docs/tree-protocol.md, "Trees that keep
  /// learning"; 0: off). Once no round of measuring runs, one background probe every
  /// `background_period` (jittered by up to a quarter), to a current parent first (in
  /// turn), every third to one of the best alternatives. Assumes the network may change
  /// while nobody measures, slowly enough that one probe per period finds it: a probe is
  /// 128 KiB, so with period T a processor's background traffic is 128 KiB / T (26 KB/s
  /// at 5 s). Off by default: the emulated runs that wait for quiet trees, and their
  /// figures, are those of trees measured once. Default 0.
  duration background_period{0};
  /// A path drifted when a measurement of a parent edge falls below (1 - drift) of the
  /// rate the tree assumed for it (or an RTT rises above (1 + drift) of the assumed one),
  /// twice in a row; the trees with that parent re-examine. Assumes measurements of an
  /// unchanged path vary by less than this (the bandwidth rule's own margin is 5%).
  /// Default 0.3.
  double drift = 0.3;
  /// A background probe moves a tree only when the estimate improves by this much, or a
  /// latency tree's RTT to its parent and distance to the root shrink by this much (the rules' own margins
  /// apply to rounds of measuring): hysteresis, so that trees do not flap under noise on
  /// a network that has not changed (the locality tie-break keeps bw_margin). Default 0.2.
  double adapt_margin = 0.2;
  /// With `background_period` set: every `rtt_watch_period` (jittered by up to a quarter)
  /// a processor pings each remote parent of its trees, and an RTT above what a tree
  /// assumed (by `drift`) twice in a row is a drift of that edge: the latency trees with
  /// that parent re-examine (core/src/rtt_watch.hpp). Assumes a small frame per remote
  /// parent per period is negligible traffic. 0: no pings (the default: with them on,
  /// the stability tests of background measurement, tests/actors/adaptive_trees_test.cpp,
  /// fail on one seed each; docs/results.md, "An RTT that grows"). `bench adapt` sets
  /// 500 ms for dynamic (`--rtt-watch`).
  duration rtt_watch_period{0};
  /// Which roots have trees (docs/tree-protocol.md, "Trees on demand"). all_roots: every
  /// member's two trees exist while it is a member, and every processor takes part in
  /// all 2N. on_demand: a root's trees exist from its `prepare` (the first collective it
  /// starts, or a call of its own) until they retire; a probe reply carries only those.
  /// Default all_roots.
  tree_set_mode tree_set = tree_set_mode::all_roots;
  /// On demand: a root closes its trees this long after it last used them (0: never).
  /// Assumes a root that has not started a collective for this long will not soon again;
  /// a collective started meanwhile reopens them, and runs without trees until they
  /// form. Default 60 s.
  duration retire_after = std::chrono::seconds(60);
  /// A probe request carries the digests of the prober's view cut into this many
  /// buckets by processor id, and the reply carries only the candidate's buckets whose
  /// digests differ (core/src/view_buckets.hpp); 0: only the whole view's digest, and
  /// the whole view whenever it differs. At most 4096. Default 128.
  std::size_t view_buckets = 128;
  /// On demand: a round of measuring counts its extra probes only once the processor
  /// has searched for its LAN (lan_search.hpp: about (N - 1) / L distinct members
  /// measured, L the LAN's size estimated from the local peers met). false: the extra
  /// probes count from the start, as in all-roots mode. Default true.
  bool lan_search = true;
  /// The most bytes a probe reply takes on the wire without its padding (the frame as
  /// `wire::wire_size` counts it): a candidate adds the buckets of its view that differ
  /// from the prober's (view_buckets) only while the reply stays within this, always at
  /// least one, and says how many it left out; the prober gets them from its next
  /// probes (core/src/view_buckets.hpp). A reply without buckets (trees, open roots, the
  /// whole view the prober asked for without bucket digests) is not cut. 0: no budget.
  /// Default 4096.
  std::size_t reply_budget = 4096;
};

/// Something worth reporting to a monitor.
struct tree_event {
  enum class kind : std::uint8_t {
    parent_changed,    ///< tree, old_parent, new_parent
    busy, ///< started measuring, holding updates, joining or leaving
    idle, ///< nothing more to do until something happens
    cycle_broken,      ///< tree, old_parent: left a parent to break a cycle
    joined,            ///< became a member (peer: the contact that let us in; none: founded)
    join_failed,       ///< the contact never answered: back to idle
    left,              ///< handed its vnodes over and stopped
    crash_detected,    ///< peer: taken to have crashed (unreachable, silent, strikes)
    adopted,           ///< vnodes: now owned here, adopted from the crashed `peer`
    disowned,          ///< vnodes: no longer ours, `peer` took us for crashed
    gained,            ///< vnodes: handed to us by `peer` (our join share, or its leave)
    released,          ///< vnodes: handed over to `peer` (a newcomer's share, or our leave)
    member_buried,     ///< peer: a member departed by crash (our verdict or a crash notice)
    member_returned,   ///< peer: a processor buried here is a member again (or was exhumed);
                       ///< via: who told us of its new incarnation
    suspected,         ///< peer: a member suspected (unreachable, silent, strikes), not yet declared
    suspicion_cleared, ///< peer: a suspect answered (it, or a member asked to ping it)
  };
  kind what = kind::parent_changed;
  tree_key tree;
  proc_id old_parent = no_proc;
  proc_id new_parent = no_proc;
  timestamp at{0};
  proc_id peer = no_proc; ///< crash_detected, adopted, disowned, gained, released,
                          ///< member_buried, member_returned, suspected, suspicion_cleared
  vnode_set vnodes;       ///< adopted, disowned, gained, released
  /// member_returned: the member whose `member_joined` told us of the new incarnation (the
  /// processor itself when it announced it, or asked us to let it in); no_proc when a
  /// member list (a join accept, a probe's view) or a merge of partitions brought it back.
  proc_id via = no_proc;
};

struct timer_request {
  duration after{0};
  std::uint64_t token = 0;
};

/// What handling one event produced.
struct outbox {
  std::vector<wire::envelope> sends;
  std::vector<timer_request> timers;
  std::vector<tree_event> events;
  void clear() {
    sends.clear();
    timers.clear();
    events.clear();
  }
};

namespace sup {
struct parts;
}

class supervisor {
public:
  /// idle -> joining -> member -> leaving -> left (and a left processor may join again).
  enum class status : std::uint8_t { idle, joining, member, leaving, left };

  /// `hooks`: seams for tests only (supervisor_test_hooks.hpp).
  supervisor(proc_id self, supervisor_config cfg, std::uint64_t seed,
             supervisor_test_hooks hooks = {});
  ~supervisor();
  supervisor(supervisor&&) noexcept;
  supervisor& operator=(supervisor&&) noexcept;

  /// The transport address ("host:port") other processors reach this one at; it travels
  /// in join requests and membership notices. Set it before `found` or `join` (empty in
  /// emulation).
  void set_address(std::string address);

  /// Starts as a founding member that knows every member and the routing table.
  void found(timestamp now, const std::vector<wire::member>& members,
             const routing_table& routes, outbox& out);
  /// Asks `contact` to be let in with the vnodes `wanted` (empty: a share of the
  /// contact's own vnodes). Asks again after `probe_timeout`, three times in all;
  /// then gives up with a `join_failed` event.
  void join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out);
  /// Gives a join under way up at once, without a `join_failed` event: the runtime
  /// learned that it cannot succeed (the contact refused us because another process
  /// runs under our id). Nothing happens unless joining.
  void abandon_join(timestamp now, outbox& out);
  /// Takes over what an earlier incarnation of this processor, one that left, had
  /// measured: its memory of paths and its sender capacity. A processor that leaves and
  /// joins again keeps its supervisor, and so both (banyan::node); a harness that makes a
  /// new supervisor for each incarnation (the emulated cluster) calls this before join().
  void recall_paths(const supervisor& earlier);
  /// Offers every vnode to `recipient` (no_proc: the nearest member measured so
  /// far); once a member that is not leaving itself has taken them, tells every
  /// member and stops (a `left` event). Returns an error when the processor is not
  /// a member or is the last one.
  std::optional<error> leave(timestamp now, proc_id recipient, outbox& out);

  void on_message(timestamp now, proc_id from, const wire::message& m, outbox& out);
  void on_timer(timestamp now, std::uint64_t token, outbox& out);
  /// The network could not deliver to `p`: no processor runs there (a refused
  /// connection, or the emulated network's equivalent). The incarnation of `p` we
  /// know is taken to have crashed: every member is told (a `member_left` sent by a
  /// third party, without routes), and its vnodes are adopted (see `adopter_of`).
  void on_unreachable(timestamp now, proc_id p, outbox& out);

  /// The member that adopts the vnodes a crashed processor `dead` left owning: the first
  /// member after `dead` in id order, wrapping around (not `dead` itself). Every member
  /// computes it from its own member list, so members that agree on the membership
  /// agree on the adopter; when they do not, each claimant issues a higher epoch than
  /// the crashed owner's, and the higher epoch wins everywhere (epochs carry the
  /// issuer's id in their low bits, so two claims never tie).
  proc_id adopter_of(proc_id dead) const;
  /// On demand (supervisor_config::tree_set): this processor's two trees are used now.
  /// They open if they were not (every member is told, and attaches by measuring), and
  /// stay open until `retire_after` passes without another call. The layer that starts
  /// collectives calls it for every broadcast or reduction this processor roots; a
  /// collective from a root whose trees have not formed yet runs without them (flat, to
  /// every owner). Nothing in all-roots mode, or when not a member.
  void prepare(timestamp now, outbox& out);
  /// A frame for another state machine (a collective engine) came from `p`: it shows p
  /// alive to the crash watch as much as a supervisor message would (its pongs may queue
  /// behind long streams). Produces nothing.
  void heard_from(timestamp now, proc_id p);
  /// Deliveries to this processor's own vnodes may be made now: the delivery lease
  /// (supervisor_config::lease) from its successor is valid, or the lease is off, or
  /// this processor is alone or no member.
  bool may_deliver(timestamp now) const;
  /// Until when the lease from the current successor is valid (timestamp::min(): none).
  timestamp lease_until() const;
  /// Lease pings sent so far (the lease's cost).
  std::uint64_t lease_pings() const noexcept;
  /// The local health score (0: healthy; core/src/local_health.hpp): suspicions of
  /// others last `suspect_timeout` x (1 + it).
  int local_health() const noexcept;
  /// A passive sample (only with `background_period`): `bytes` of a broadcast's segments
  /// following tree k arrived from `p` now. A child sees the rate its parent's segments
  /// arrive at; a rate well below what the tree assumed shows a path that drifted
  /// (docs/tree-protocol.md, "Re-examination on drift"). May start measuring.
  void stream_sample(timestamp now, proc_id p, tree_key k, std::size_t bytes, outbox& out);

  // --- inspection ----------------------------------------------------------
  proc_id self() const noexcept;
  status state() const noexcept;
  const tree_state* tree(tree_key k) const;
  proc_id parent(tree_key k) const;
  bool all_parented() const;
  /// The roots whose trees exist here (every member in all-roots mode).
  std::vector<proc_id> open_roots() const;
  bool measuring() const noexcept;
  /// Measuring, holding tree updates to send, waiting for a newcomer's trees to be
  /// seeded, lending vnodes, joining or leaving.
  bool busy() const noexcept;
  const vnode_set& own_vnodes() const noexcept;
  /// Joined, and an owner asked for vnodes (the contact, for a share of its own) has not
  /// handed them over yet; false once every one has, or `probe_timeout` after the join
  /// was accepted (an owner with nothing to give, e.g. a contact owning fewer than two
  /// vnodes, does not answer).
  bool awaiting_vnodes() const noexcept;
  const routing_table& routes() const noexcept;
  /// Where this processor's vnodes went when it last left (the accepted handover;
  /// empty if it owned none or never left). Kept after leaving, when `routes()` is
  /// forgotten: the engines of a processor that has left still pass on frames for
  /// those vnodes, and must send them to their new owner, not to a guess.
  const std::vector<wire::route_entry>& farewell_routes() const noexcept;
  const std::vector<proc_id>& members() const noexcept;
  /// Changes whenever the member list (or what is known of the members) may have
  /// changed; equal versions of one supervisor: the same `members()`. Lets a holder of
  /// a copy of the list see in O(1) that it is still current (`supervisor_view::refresh`).
  std::uint64_t members_version() const noexcept;
  bool is_member(proc_id p) const;
  /// `p` is no member and its last incarnation we knew as a member departed by crash:
  /// we took it for crashed, or a member's crash notice told us (`member_left` with
  /// `crashed`, first-hand or relayed). What it sends now was sent before it learnt it,
  /// or from the other side of a partition. A graceful leaver is never buried (it drains
  /// its streams after it left), nor a member that departed by hearsay only (a tombstone
  /// in a probe's view). It stops being buried when it is a member again, or when a merge
  /// of partitions exhumes it (a `member_returned` event), or when its own graceful
  /// `member_left` for the incarnation buried arrives after the crash notice.
  bool buried(proc_id p) const;
  /// What this processor knows of member `p` (address, incarnation); empty when `p` is
  /// not a member.
  std::optional<wire::member> member_info(proc_id p) const;
  /// Probes completed (answered to the end) and abandoned (timed out or candidate gone).
  std::uint64_t probes_completed() const noexcept;
  std::uint64_t probes_abandoned() const noexcept;
  /// Adoption requests sent to a step-parent without measuring first.
  std::uint64_t hinted_adoptions() const noexcept;
  /// Bandwidth-rule moves to a remote candidate not asked for because the figures of
  /// the path were marked reattaching (see reattach_hold).
  std::uint64_t held_moves() const noexcept;
  /// Background probes started (background_period), and parent edges found drifted
  /// (actively or passively), each followed by a re-examination of its trees.
  std::uint64_t background_probes() const noexcept;
  std::uint64_t drifts() const noexcept;
  /// The step-parent this processor will ask (or is asking) in tree k, if any.
  proc_id step_parent(tree_key k) const;
  /// One line on what the supervisor is doing (status, schedule, probe), for logs.
  std::string describe() const;
  /// Best RTT measured to p so far, if any. Measurements outlive a leave (the engines
  /// of a processor that has left still route by them), and a membership (the memory
  /// of paths).
  std::optional<duration> measured_rtt(proc_id p) const;
  /// The best bandwidth measured to p (bytes per second), if any.
  std::optional<rate> measured_bw(proc_id p) const;
  /// Whether p is in this processor's LAN by the RTTs measured (the rules' notion:
  /// within `local_factor` of the smallest RTT, once RTTs span two classes).
  bool is_local(proc_id p) const;
  /// The smallest RTT measured to a member outside this processor's LAN, if any.
  std::optional<duration> smallest_remote_rtt() const;

private:
  std::unique_ptr<sup::parts> p_;
};

} // namespace banyan
