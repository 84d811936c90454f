#pragma once
/// The supervisor of one processor, as a pure state machine: it owns the
/// processor's vnodes and membership view and runs the parent-selection protocol
/// for every tree (a latency and a bandwidth tree per root). It is fed events (a
/// message arrived, a timer fired, the API asked to join or leave) together with
/// the current time, and answers with an `outbox`: messages to send, timers to
/// start, events to report. It never reads a clock or does I/O, so the same code
/// runs under virtual time in tests, in the emulated grid and over TCP.
///
/// One probe at a time (paper IV-A):
///
///   prober p                         candidate c
///     | ping (1 byte)  ------------------> |
///     | <------------------------------ pong     RTT(p,c)
///     | bw_request ----------------------> |
///     | <------------------------ pong     the mark, right before the reply
///     | <------------- bw_reply (128 KiB: c's tree_info for every tree)
///     |    bw(p,c) = bytes / (reply - mark); rules decide per tree
///     | adopt_request(trees, subtrees) --> |   c refuses trees where p is its
///     | <------------------- adopt_reply   |   ancestor or it is unconnected
///     | release -> each old parent
///
/// Trees stay true as they change: a parent pushes `tree_update` (dist, est,
/// path) to its children when its place changes; a child pushes `subtree_update`
/// (vnodes below it) to its parent when its subtree changes. A processor that
/// finds itself on its own path has been caught in a cycle made by concurrent
/// changes: it leaves its parent and measures again.

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/measurement_schedule.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/routing_table.hpp"
#include "banyan/core/rule_context.hpp"
#include "banyan/core/supervisor_test_hooks.hpp"
#include "banyan/core/tree_state.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/variant_decision.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

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
  /// How long after learning of a crash the adopter waits before it claims the crashed
  /// processor's vnodes, so that a handover already on its way lands first. Assumes
  /// routing news crosses the network within it. Default 100 ms.
  duration adopt_delay = std::chrono::milliseconds(100);
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
};

/// Something worth reporting to a monitor.
struct tree_event {
  enum class kind : std::uint8_t {
    parent_changed,    ///< tree, old_parent, new_parent
    busy, ///< started measuring, holding updates, joining or leaving
    idle, ///< nothing more to do until something happens
    cycle_broken,      ///< tree, old_parent: left a parent to break a cycle
    joined,            ///< became a member
    join_failed,       ///< the contact never answered: back to idle
    left,              ///< handed its vnodes over and stopped
    crash_detected,    ///< peer: taken to have crashed (unreachable, silent, strikes)
    adopted,           ///< vnodes: now owned here, adopted from the crashed `peer`
    disowned,          ///< vnodes: no longer ours, `peer` took us for crashed
  };
  kind what = kind::parent_changed;
  tree_key tree;
  proc_id old_parent = no_proc;
  proc_id new_parent = no_proc;
  timestamp at{0};
  proc_id peer = no_proc; ///< crash_detected, adopted, disowned
  vnode_set vnodes;       ///< adopted, disowned
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

class supervisor {
public:
  /// idle -> joining -> member -> leaving -> left (and a left processor may join again).
  enum class status : std::uint8_t { idle, joining, member, leaving, left };

  supervisor(proc_id self, supervisor_config cfg, std::uint64_t seed,
             supervisor_test_hooks hooks = {});

  /// The transport address ("host:port") other processors reach this one at; it travels
  /// in join requests and membership notices. Set it before `found` or `join` (empty in
  /// emulation).
  void set_address(std::string address) { me_.address = std::move(address); }

  /// Starts as a founding member that knows every member and the routing table.
  void found(timestamp now, const std::vector<wire::member>& members,
             const routing_table& routes, outbox& out);
  /// Asks `contact` to be let in with the vnodes `wanted` (empty: a share of the
  /// contact's own vnodes). Asks again after `probe_timeout`, three times in all;
  /// then gives up with a `join_failed` event.
  void join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out);
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
  /// A frame for another state machine (a collective engine) came from `p`: it shows p
  /// alive to the crash watch as much as a supervisor message would (its pongs may queue
  /// behind long streams). Produces nothing.
  void heard_from(timestamp now, proc_id p) {
    if (p == watched_)
      heard_ = now;
  }

  // --- inspection ----------------------------------------------------------
  proc_id self() const noexcept { return self_; }
  status state() const noexcept { return status_; }
  const tree_state* tree(tree_key k) const;
  proc_id parent(tree_key k) const;
  bool all_parented() const;
  bool measuring() const noexcept { return schedule_.active() || probe_.has_value(); }
  /// Measuring, holding tree updates to send, waiting for a newcomer's trees to be
  /// seeded, joining or leaving.
  bool busy() const noexcept;
  const vnode_set& own_vnodes() const noexcept { return own_; }
  const routing_table& routes() const noexcept { return routes_; }
  /// Where this processor's vnodes went when it last left (the accepted handover;
  /// empty if it owned none or never left). Kept after leaving, when `routes()` is
  /// forgotten: the engines of a processor that has left still pass on frames for
  /// those vnodes, and must send them to their new owner, not to a guess.
  const std::vector<wire::route_entry>& farewell_routes() const noexcept { return farewell_; }
  const std::vector<proc_id>& members() const noexcept { return members_; }
  bool is_member(proc_id p) const { return p < is_member_.size() && is_member_[p]; }
  /// What this processor knows of member `p` (address, incarnation); nullptr when `p`
  /// is not a member. Valid until the next event.
  const wire::member* member_info(proc_id p) const;
  /// Probes completed (answered to the end) and abandoned (timed out or candidate gone).
  std::uint64_t probes_completed() const noexcept { return probes_completed_; }
  std::uint64_t probes_abandoned() const noexcept { return probes_abandoned_; }
  /// Adoption requests sent to a step-parent without measuring first (see step_hint).
  std::uint64_t hinted_adoptions() const noexcept { return hinted_adoptions_; }
  /// Bandwidth-rule moves to a remote candidate not asked for because the figures of
  /// the path were marked reattaching (see reattach_hold).
  std::uint64_t held_moves() const noexcept { return held_moves_; }
  /// The step-parent this processor will ask (or is asking) in tree k, if any.
  proc_id step_parent(tree_key k) const {
    auto i = steps_.find(k);
    return i == steps_.end() ? no_proc : i->second.to;
  }
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
  struct probe {
    enum class phase : std::uint8_t { pause, ping, download, adopt };
    std::uint64_t seq = 0;
    proc_id cand = no_proc;
    phase at = phase::pause;
    timestamp sent{0};
    /// When the candidate's mark (the pong it sends right before its bw_reply) came.
    std::optional<timestamp> mark;
    duration rtt{0};
    rate bw = 0;
    std::vector<wire::subtree_entry> requested; // what the adopt_request offered
  };
  /// A step-parent to ask first for one tree (see step_hint), and the figures to
  /// assume for the edge until it is measured.
  struct step_hint {
    proc_id to = no_proc;
    duration rtt{0};
    rate bw = 0;
    bool measured = false; ///< the figures are the edge's own (a seed): nothing to remeasure
    int hops = 0; ///< redirects followed so far
    std::uint64_t asked = 0; ///< seq of the adopt_request in flight (0: not asked yet)
    std::vector<proc_id> next; ///< whom to ask should `to` refuse or be gone
  };
  /// An adoption request to a step-parent, in flight (one per candidate at a time,
  /// alongside any probe): the trees still unanswered.
  struct step_ask {
    proc_id cand = no_proc;
    std::vector<tree_key> trees;
    std::map<tree_key, vnode_set> offered; ///< the subtrees the request named
  };
  /// Trees of an adopt_request held until our own step-parent answers for them.
  struct held_request {
    proc_id from = no_proc;
    std::uint64_t seq = 0;
    std::vector<wire::subtree_entry> trees;
  };
  struct peer_figures {
    duration rtt = duration::max();
    rate bw = 0;
  };

  void do_found(timestamp now, const std::vector<wire::member>& members,
                const routing_table& routes, outbox& out);
  void do_join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out);
  std::optional<error> do_leave(timestamp now, proc_id recipient, outbox& out);
  void do_message(timestamp now, proc_id from, const wire::message& m, outbox& out);
  void do_timer(timestamp now, std::uint64_t token, outbox& out);

  static std::size_t index_of(tree_key k) {
    return static_cast<std::size_t>(k.root) * tree_kind_count + static_cast<std::size_t>(k.kind);
  }
  tree_state* find_tree(tree_key k);
  void add_member(const wire::member& m);
  /// Takes note of member m; true when it is news (a member we did not know, or a
  /// new incarnation of one). A tombstoned incarnation is never admitted again.
  /// `hearsay`: from a member list (a view, a join_accept), which may be older than what
  /// we know: it admits members we do not know, never replaces a known incarnation.
  bool admit(timestamp now, const wire::member& m, outbox& out, bool hearsay = false);
  /// Incarnation `inc` of `who` left: tombstone it, and forget it if it is the one
  /// we know. Returns whether this was news (not heard before).
  bool depart(timestamp now, proc_id who, std::uint64_t inc, outbox& out);
  void remove_member(timestamp now, proc_id p, outbox& out);
  void set_own(vnode_set own);
  /// Returns whether anything changed.
  bool apply_routes(const std::vector<wire::route_entry>& routes);
  /// `apply_routes` for routes another processor told us of (`by`; no_proc: a probe's
  /// view). A vnode of ours they name as another's, and not on offer by us, was claimed
  /// over us (we were taken for crashed, and the adopter's claim came before the
  /// notice): reported as `disowned`.
  bool apply_told_routes(timestamp now, proc_id by, const std::vector<wire::route_entry>& routes,
                         outbox& out);
  /// A `disowned` event for `lost` (none when empty): `by` told us.
  void report_disowned(timestamp now, proc_id by, vnode_set lost, outbox& out);
  /// Offers vnodes to a newcomer that asked for them (those not already on offer).
  void hand_over(const vnode_set& vnodes, proc_id to, outbox& out, bool share = false);
  void offer(const vnode_set& vnodes, proc_id to, bool leaving, outbox& out, bool share = false);
  vnode_set share_of_own() const;
  /// An offer was answered (or timed out: not accepted).
  void offer_resolved(timestamp now, std::uint64_t seq, bool accepted, outbox& out);
  void lose_parent(timestamp now, tree_state& t, outbox& out);
  /// Tree t's parent lost its own (its info `connected` false), or
  /// an ancestor did (`reattaching`): notes when the figures became those of a lost path.
  void note_reattaching(timestamp now, tree_state& t, bool was);
  /// Whether a bandwidth-rule move of tree t to a candidate at `rtt` waits (see
  /// reattach_hold).
  bool hold_move(timestamp now, const tree_state& t, duration rtt, const rule_context& ctx) const;
  /// Takes member p for crashed: tells every member, departs it (its vnodes become
  /// orphans, see depart).
  void declare_crashed(timestamp now, proc_id p, outbox& out);
  /// We were taken for crashed (a notice or a tombstone naming our incarnation): come
  /// back as a new incarnation, and give up our vnodes, which the adopter claims.
  void refute(timestamp now, proc_id by, outbox& out);
  /// Claims, as the adopter, the orphans whose `adopt_delay` has passed and whose
  /// entries still name the crashed owner at the recorded epoch; forgets resolved ones.
  void adopt_orphans(timestamp now, outbox& out);
  /// The epoch of a new move of `vnodes` by this processor (above all before it).
  std::uint64_t next_epoch(const vnode_set& vnodes);
  /// Pings the watched successor, or takes it for crashed (crash_timeout).
  void watch(timestamp now, outbox& out);
  /// Releases every parent and orphans every child (after being taken for gone).
  void leave_all_trees(timestamp now, outbox& out);
  void trigger(timestamp now, outbox& out);
  /// Emits busy/idle when that changed; called at the end of every entry point.
  void report_busy(timestamp now, outbox& out);

  // structure-preserving repair (step-parents)
  /// Records the step-parents to ask, in order, for unconnected tree t (the first that
  /// is a member now, the rest for later); returns whether one was taken.
  bool hint(tree_state& t, std::vector<proc_id> candidates, duration rtt, rate bw,
            int hops = 0, bool measured = false);
  /// Whether an adoption request in tree t waits for our own (step-parent or seed).
  bool awaiting(const tree_state& t) const;
  // seeding a newcomer's trees
  /// We heard of newcomer j: seed its trees once its giver is known, or measure after
  /// `seed_wait`.
  void expect_seed(timestamp now, proc_id j, outbox& out);
  /// Notes, before `routes` are applied, which members hand vnodes to whom.
  void note_givers(timestamp now, const std::vector<wire::route_entry>& routes, outbox& out);
  /// Member g gave vnodes to newcomer j: ask, in j's trees, our parent in g's.
  void seed(timestamp now, proc_id j, proc_id g, outbox& out);
  /// The step-parent of tree k failed (refused, silent or gone): the next one, or none.
  void next_step(tree_key k);
  /// Sends an adopt_request to every step-parent not asked yet (one per candidate).
  void ask_step_parents(outbox& out);
  /// A step-parent answered (or not, `m` null: timed out) for ask `seq`.
  void on_step_reply(timestamp now, std::uint64_t seq, const wire::adopt_reply* m, outbox& out);
  /// After step-parents answered or failed: measure now, or once all have answered.
  void after_steps(timestamp now, outbox& out);
  /// Our verdict on adopting `from` in one tree (the checks of on_adopt_request).
  wire::adopt_verdict judge(proc_id from, const wire::subtree_entry& e);
  /// Where this processor would send a child in tree t when it goes: its parent, or
  /// the step-parent it was told of.
  proc_id effective_parent(const tree_state& t) const;
  /// Its children in t ranked to take its place when it leaves, the heir first (see
  /// hand_over_trees).
  std::vector<proc_id> heirs(const tree_state& t) const;
  /// Sends the orphan messages with step-parents for every child of every tree.
  void hand_over_trees(outbox& out);
  /// Answers adoption requests held while a hinted adoption of ours was pending.
  void answer_deferred(outbox& out);
  void refuse_adoption(proc_id from, const wire::adopt_request& m, outbox& out);

  // probing
  void maybe_probe(timestamp now, outbox& out);
  /// A member to probe: with `local_only`, one known to be in this LAN (if any).
  proc_id pick_candidate(bool local_only = false);
  rule_context context() const;
  void start_probe(timestamp now, outbox& out);
  void finish_probe(timestamp now, bool completed, outbox& out);
  void on_pong(timestamp now, proc_id from, const wire::pong& m, outbox& out);
  void on_bw_reply(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out);
  /// Anti-entropy: takes in the members, departures and routes candidate `from` knows.
  void merge_view(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out);
  /// Routes from someone else's snapshot, with entries naming us made harmless.
  std::vector<wire::route_entry> foreign_routes(std::vector<wire::route_entry> routes) const;
  void on_adopt_reply(timestamp now, proc_id from, const wire::adopt_reply& m, outbox& out);

  // serving others
  void on_bw_request(proc_id from, const wire::bw_request& m, outbox& out);
  void on_adopt_request(proc_id from, const wire::adopt_request& m, outbox& out);
  void on_tree_update(timestamp now, proc_id from, const wire::tree_update& m, outbox& out);

  // membership
  void on_join_request(timestamp now, proc_id from, const wire::join_request& m, outbox& out);
  void on_join_accept(timestamp now, proc_id from, const wire::join_accept& m, outbox& out);
  void on_member_joined(timestamp now, proc_id from, const wire::member& who, outbox& out);
  void on_vnode_handover(timestamp now, proc_id from, const wire::vnode_handover& m,
                         outbox& out);
  void on_vnode_handover_ack(timestamp now, proc_id from, const wire::vnode_handover_ack& m,
                             outbox& out);
  /// Ranks the members for our vnodes as we leave, nearest first (nearest_).
  void rank_nearest();
  /// Offers our vnodes to the next recipient, or finishes leaving.
  void offer_vnodes(timestamp now, outbox& out);
  void finish_leave(timestamp now, std::vector<wire::route_entry> routes, outbox& out);

  void mark_info(const tree_state& t);
  void mark_subtree(const tree_state& t);
  void mark_all_subtrees();
  /// Sends the tree_update and subtree_update messages the changes call for: at
  /// once with `now`, else after `update_delay` (see flush_now).
  void flush(outbox& out);
  void flush_now(outbox& out);
  void send(outbox& out, proc_id to, wire::message m);
  void event(outbox& out, tree_event::kind what, timestamp now, tree_key k = {},
             proc_id old_parent = no_proc, proc_id new_parent = no_proc);

  proc_id self_;
  supervisor_config cfg_;
  supervisor_test_hooks hooks_;
  variant_decision decision_;
  std::mt19937_64 rng_;
  status status_ = status::idle;

  std::vector<proc_id> members_; // sorted
  std::vector<bool> is_member_;
  std::map<proc_id, wire::member> member_info_;
  std::map<proc_id, std::set<std::uint64_t>> tombstones_;
  wire::member me_;
  routing_table routes_;
  std::vector<wire::route_entry> farewell_; ///< see farewell_routes()
  vnode_set own_;

  std::vector<std::optional<tree_state>> trees_; // by index_of(key)
  std::vector<std::size_t> dirty_info_, dirty_subtree_;
  std::vector<bool> is_dirty_info_, is_dirty_subtree_;
  bool flush_pending_ = false;

  measurement_schedule schedule_;
  bool reported_busy_ = false;
  std::optional<probe> probe_;
  std::uint64_t next_seq_ = 1;
  std::map<proc_id, peer_figures> figures_;
  /// Figures of processors that are not members now (the memory of paths), with the address
  /// they were measured at; `remembered_from_` is our own address then.
  struct remembered_path {
    std::string address;
    peer_figures figures;
  };
  std::map<proc_id, remembered_path> remembered_;
  std::string remembered_from_;
  void remember_path(proc_id p, const std::string& address, const peer_figures& f);
  /// The widest bandwidth measured to anyone: the sender capacity of the bandwidth rule.
  rate widest_ = 0;
  std::map<proc_id, int> strikes_; ///< consecutive unanswered probes per candidate
  /// Newcomers this processor let in, and when: for `sponsor_window` they hear from
  /// it about members and vnode moves it learns of later, which closes the gap when
  /// processors join through different contacts at the same time.
  std::vector<std::pair<proc_id, timestamp>> sponsored_;
  std::vector<proc_id> sponsored(timestamp now);
  /// Vnodes on offer (vnode_handover sent, no answer yet), by offer number. Owners
  /// move vnodes only once the recipient has taken them.
  struct vnode_offer {
    vnode_set vnodes;
    proc_id to = no_proc;
    std::uint64_t epoch = 0;
    bool leaving = false; ///< all our vnodes, offered because we leave
    bool share = false;   ///< a share of ours to a newcomer that asked for none
  };
  std::map<std::uint64_t, vnode_offer> offers_;
  /// Newcomers we gave a share of our vnodes (they asked for none): not necessarily near
  /// us, so our edge under them in their seeded trees is measured (seed), rejoiners too.
  std::set<proc_id> shared_to_;
  std::uint64_t offer_seq_ = 0;
  std::uint64_t last_offer_epoch_ = 0;
  /// While leaving: the recipient we are trying, and those that refused.
  proc_id offered_to_ = no_proc;
  std::vector<proc_id> refused_;
  /// Leaving: the members nearest first, ranked when the leave began (our trees, which
  /// place the members we never measured, are gone after the first handover).
  std::vector<proc_id> nearest_;
  /// While joining: the contact, what we asked for, and how many times we asked.
  proc_id contact_ = no_proc;
  vnode_set wanted_;
  int join_attempts_ = 0;
  std::uint64_t probes_completed_ = 0;
  std::uint64_t probes_abandoned_ = 0;
  /// Route entries a crashed processor held when it departed, and when we learned of
  /// it: claimed by the adopter, forgotten once the entries have moved on.
  struct orphan_entry {
    wire::route_entry route;
    timestamp since{0};
  };
  std::vector<orphan_entry> orphans_;
  /// Crash detection of a silent successor (crash_timeout): who, when we last heard
  /// from it, and the generation of the watch timer.
  proc_id watched_ = no_proc;
  timestamp heard_{0};
  timestamp last_watch_{0}; ///< the last watch tick (a late one: we did not run)
  std::uint64_t watch_gen_ = 0;
  bool watching_ = false;
  void start_watch(outbox& out);
  /// Structure-preserving repair: per unconnected tree, the step-parent to ask for
  /// adoption before any probing (named by a leaving parent, or the giver of our vnodes
  /// when joining). Asked one candidate at a time, ahead of every measurement.
  std::map<tree_key, step_hint> steps_;
  /// Adoption requests held until our own hinted adoption in those trees is answered
  /// (we are the step-parent of a sibling while we wait for ours).
  std::vector<held_request> deferred_;
  std::map<std::uint64_t, step_ask> asks_;
  /// Peers adopted without a measurement: probed next, so the edge gets real figures.
  std::vector<proc_id> remeasure_;
  /// Candidates probed in this round of measuring: a joiner's round restricted to its
  /// LAN draws each known LAN peer once before any again.
  std::vector<proc_id> round_probed_;
  /// After leaving: per tree, where to send a processor that still asks us for
  /// adoption (our parent or step-parent when we left).
  std::map<tree_key, proc_id> farewell_trees_;
  /// While joining: the owners asked for vnodes; the first trees go under them.
  std::vector<proc_id> givers_;
  bool repaired_ = false; ///< a step-parent adopted us since measuring last started
  bool await_giver_ = false; ///< joined; measuring waits for the first giver's handover
  /// Placed by our giver in every tree: this round of measuring counts extra probes from
  /// the moment every tree had a parent, and stays in the LAN once it has.
  bool settling_ = false;
  /// Repaired by step-parents: this round's extra probes stay in the LAN.
  bool repair_round_ = false;
  /// Newcomers we handed vnodes to, and when; per bandwidth tree, the last of them placed
  /// below us (joiners of one giver hang in a chain in bandwidth trees).
  std::map<proc_id, timestamp> given_to_;
  /// Vnodes handed to newcomers, still reported as below us (lend_time), by timer number.
  std::map<std::uint64_t, vnode_set> lent_;
  std::uint64_t lend_seq_ = 0;
  /// What our subtrees report of our own: own_ and what is lent.
  vnode_set reported_own() const;
  std::map<tree_key, std::pair<proc_id, std::set<proc_id>>> chain_tail_; ///< tail, placed
  timestamp now_{0}; ///< of the message being handled
  /// Newcomers whose trees wait for their seed, and the givers of
  /// newcomers learnt from routing updates (which may arrive before the newcomer's notice).
  std::set<proc_id> unseeded_;
  std::map<proc_id, proc_id> giver_of_;
  std::uint64_t hinted_adoptions_ = 0;
  std::uint64_t held_moves_ = 0;
};

} // namespace banyan
