#pragma once
/// Reduction of data held by every vnode to one vnode (paper IV-E), as a pure state
/// machine: events in (the application starts a reduction, a partial or a handoff
/// arrived, a timer fired, a frame bounced, the view changed), frames, timers and
/// results out. It reads trees and ownership through a `tree_view`.
///
/// Partial results flow up the tree rooted at the owner of the root vnode (the latency
/// tree, or the bandwidth tree for arrays of `long_threshold` bytes and more). Each
/// processor pre-reduces its own vnodes, combines the first partial of each child, and
/// sends one partial to its parent once every child has reported or the timeout fired
/// (factor x the largest distance to a root, the paper's estimate); partials that come
/// later, or from processors that are not its children, go on as they arrive. Every
/// partial names the vnodes it covers, and only disjoint ones are combined (an overlap
/// is reported as a bug). The result is complete at the root vnode's owner once every
/// vnode is covered.
///
///            root owner R: covers {0..7} -> result
///             |               |
///     A: {1,2,5}      B: {3,4,6,7}       each partial covers its subtree's vnodes,
///       |      |          |              those whose contributions have reached it
///   C: {2}  D: {5}     E: {6,7}
///
/// Exactly once under churn: reductions are numbered 1, 2, 3, ... in the order every
/// processor starts them (MPI's order of collective calls). A vnode's history is a
/// single number, `done`: its contributions are accounted for up to reduction `done`.
/// A vnode contributes to reduction k only at the processor where it is *settled* (owned,
/// with its history at hand) and only if done < k, after which done >= k. Founders hold
/// their vnodes settled at done 0. When a vnode moves away, its old owner sends its
/// history in a `reduce_handoff`, routed to the owner like a point-to-point message; the
/// new owner holds the vnode unsettled, contributing nothing for it, until the handoff
/// arrives. So at any moment a vnode's history is in exactly one place (a settled owner
/// or one handoff in flight), and no reduction counts it twice; and since every
/// processor that stays starts every reduction, each one counts it once. A processor
/// keeps a reduction open (its contribution function at hand) for `op_linger` after its
/// part is done, for vnodes that settle later; a vnode that settles after that, still
/// owing the reduction, is reported lost (never seen when processors start reductions
/// within `op_linger` of each other). See docs/collectives.md.
///
/// Through crashes (docs/collectives.md, "Reductions through crashes"): a processor keeps
/// each partial it sent up the tree until its parent acknowledges (`reduce_ack`) that
/// what covers it has gone up from there (in the parent's own partial, or gathered at the
/// root's owner). Should its parent in that tree change first (the parent crashed, and
/// the tree healed around it) and no acknowledgement come within `resend_grace`, it
/// sends the partial again, *tentatively*, point-to-point to the root's owner. The root's owner holds tentative partials apart from what it
/// gathered: one whose vnodes are covered already is dropped, one that a partial arriving
/// later covers is replaced by it, and they are counted only once the result is complete
/// with them (every vnode covered exactly once). The crashed processor's own vnodes:
/// when the owner of vnodes still missing at the root changes, the root's owner asks the
/// new owner (`reduce_ask`); an adopter whose history for them died with the crashed
/// processor (adopted after it started the reduction) contributes them, tentatively.
/// So a reduction through a crashed relay completes, each vnode counted once, when the
/// data still exists; two crashes on one path (a partial acknowledged to its sender and
/// lost with the relay above) still fail it, naming the vnodes. A copy can outlive the
/// result: when the root vnode moves, the handoff to its new owner names the reductions
/// completed at the old one (`wire::reduce_done`), and the new owner drops their
/// partials instead of holding them as for a reduction in progress.
///
/// Leaving: a processor whose supervisor has left flushes everything at once (partials
/// to the root's owner, histories to the vnodes' new owners) and must stay reachable
/// until `drained(now, fates)` (core/send_fates.hpp).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "banyan/core/collective_engine.hpp"
#include "banyan/core/error.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/reduce_op.hpp"
#include "banyan/core/send_fates.hpp"
#include "banyan/core/shared_bytes.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/tree_view.hpp"

namespace banyan {

struct reduce_config {
  /// Arrays of at least this many bytes go up the bandwidth trees.
  std::size_t long_threshold = 256 * 1024;
  /// Small reductions gather in a star within the root's LAN: a processor whose own
  /// partial (its vnodes' contributions, or blocks) is at most `star_bytes`, that is in
  /// the LAN of the root vnode's owner and of its parent in the latency tree, and whose
  /// LAN has at most `star_max_procs` processors, sends its partial straight to the
  /// root's owner instead of to its parent (which then does not wait for it); partials
  /// from other LANs still come up the tree. It assumes that in one LAN the partials of
  /// a reduction arrive at once, and that receiving a few small partials costs the
  /// root's owner less than one more hop (a wake-up and the LAN's latency): a latency
  /// tree deepened by the forwarding overhead it charges per child (which suits a
  /// broadcast, whose sender pays it) costs a reduction hops for nothing. The star is
  /// the tree of depth one under the root's owner: acknowledgements, resends when the
  /// owner changes and exactly-once counting are the tree's. 0: never.
  std::size_t star_bytes = 4096;
  std::size_t star_max_procs = 8;
  /// A processor waits for its children at most `min_timeout` + `timeout_factor` x (the
  /// largest distance to a root (paper IV-E) + the array's transfer time at the lowest
  /// rate of its bandwidth trees), then sends what it has. The transfer term is banyan's:
  /// the paper's distance is all latency, and long arrays would time out on a stable tree.
  double timeout_factor = 2.0;
  duration min_timeout = std::chrono::milliseconds(1);
  /// A frame that has passed this many processors since it was last held is held for
  /// `retry_delay`, then sent point-to-point afresh.
  std::uint32_t max_hops = 32;
  duration retry_delay = std::chrono::milliseconds(5);
  /// See broadcast_config (the blind rule of `drained(now)`).
  duration drain_linger = std::chrono::seconds(2);
  duration unreachable_memory = std::chrono::seconds(1);
  /// How long a reduction stays open here after this processor's part of it is done,
  /// for vnodes that settle here later and still owe it.
  duration op_linger = std::chrono::seconds(60);
  /// The number of the first reduction: founders' vnodes are settled with `done` one
  /// below it.
  std::uint64_t first_op = 1;
  /// Numbers come in groups of `stride`: one operation of the runtime is the reductions
  /// first_op + k x stride + g, g < stride, all started here in one go (an all-to-all cut
  /// into ranges, core/alltoall.hpp), and the next operation starts at the next multiple.
  /// Reductions owed and skipped are counted in operations, and `next_op` is the next
  /// operation's first number. 1: every number is one operation.
  std::uint64_t stride = 1;
  /// The kind this engine's frames carry (`reduce`, or `static_reduce` over fixed
  /// trees): the runtime's engine host routes frames to the engine by it.
  collective_kind kind = collective_kind::reduce;
  /// A partial whose parent changed before acknowledging it is sent again this long
  /// after the change, if still unacknowledged then: a parent that left gracefully passes
  /// on what it held and acknowledges it meanwhile (a copy would be dropped at the root's
  /// owner anyway, but costs a frame and can outlive the result there).
  duration resend_grace = std::chrono::milliseconds(200);
  /// Per-vnode blocks instead of combined values (the gather engine, core/gather.hpp):
  /// a contribution is its vnode's block of `count` bytes, and partials are the blocks
  /// of the vnodes they cover side by side in vnode order (core/vnode_blocks.hpp),
  /// merged, not combined, as they meet. The operator is not used.
  bool blocks = false;
};

/// One reduction, the same at every processor.
struct reduce_spec {
  std::uint64_t op = 0;  ///< its number: 1, 2, 3, ... in the order processors start them
  vnode_id root = 0;     ///< the vnode that receives the result
  reduce_op fn;
  std::size_t count = 0; ///< elements in every array
  /// A runtime that cuts one long array into several reductions (segments, pipelined up
  /// the tree) sets, for each: the whole array's bytes (picks the tree, as for the whole
  /// array; 0: this reduction's own), and the number of the segment before it (0: none).
  /// A segment's data queues behind that of the segments before it on every link, so its
  /// timeout does not fire while the one before has not gone up from here, and starts
  /// afresh when that one goes.
  std::size_t whole_bytes = 0;
  std::uint64_t after = 0;
};

/// The contribution of one vnode: `count` elements of the operator's type.
using contribution_fn = std::function<std::vector<std::uint8_t>(vnode_id)>;

/// The result, at the processor owning the root vnode when it completed.
struct reduce_result {
  std::uint64_t op = 0;
  vnode_id root = 0;
  vnode_set vnodes; ///< every vnode, each counted once
  shared_bytes value;
};

/// Something that must not happen; tests assert there are none.
struct reduce_problem {
  enum class kind : std::uint8_t {
    overlap,           ///< partials covering the same vnode met: a vnode counted twice
    bad_data,          ///< a contribution or partial the operator cannot combine
    lost_contribution, ///< a vnode settled here still owing a reduction closed here
    double_history,    ///< a handoff for a vnode already settled here
  };
  kind what = kind::overlap;
  std::uint64_t op = 0;
  vnode_set vnodes;
  std::string detail;
};

/// What a reduction had come to at a processor that gave it up (`reduce_engine::abandon`),
/// for the error its runtime reports.
struct reduce_abandoned {
  std::uint64_t op = 0;
  vnode_id root = 0;
  bool known = false;   ///< the engine held state for it (else the fields below are empty)
  bool at_root = false; ///< this processor gathered the result (it owns the root vnode)
  /// At the root: the vnodes whose contributions had arrived.
  vnode_set gathered;
  /// At the root: every other vnode. Elsewhere, before this processor's part went up:
  /// what that part still waited for (its own vnodes whose history had not arrived, and
  /// the subtrees of the children in `waiting_for`).
  vnode_set missing;
  /// `missing` by owner, as this processor knows the owners now (`no_proc`: unknown).
  std::map<proc_id, vnode_set> missing_owners;
  /// Elsewhere: the children in the root's tree whose partials had not arrived.
  std::vector<proc_id> waiting_for;
  bool part_sent = false; ///< elsewhere: this processor's own partial had gone up
};

/// "{512-1023} (processor 3), {7} (owner unknown)".
std::string describe_owners(const std::map<proc_id, vnode_set>& by_owner);

/// What handling one event produced.
struct reduce_outbox : engine_outbox {
  std::vector<reduce_result> results;
  std::vector<reduce_problem> problems;
  void clear() {
    sends.clear();
    timers.clear();
    results.clear();
    problems.clear();
  }
};

struct reduce_stats {
  std::uint64_t started = 0;     ///< reductions started here
  std::uint64_t contributed = 0; ///< vnode contributions taken here
  std::uint64_t tree_partials = 0;   ///< partials sent to a parent
  std::uint64_t direct_partials = 0; ///< partials sent point-to-point to the root's owner
  std::uint64_t passed_on = 0;   ///< late or non-child partials forwarded as they came
  /// Partials of its own a processor in a star sent straight to the root's owner, and
  /// the empty ones it sent its tree parent meanwhile (`star_bytes`).
  std::uint64_t star_partials = 0;
  std::uint64_t star_notices = 0;
  std::uint64_t timeouts = 0;    ///< partials sent because the timeout fired
  std::uint64_t handoffs = 0;    ///< handoffs sent (forwarded ones included)
  std::uint64_t holds = 0;       ///< frames held for `retry_delay`
  std::uint64_t bounces = 0;     ///< frames that came back undeliverable
  std::uint64_t results = 0;     ///< reductions completed here
  std::uint64_t abandoned = 0;   ///< reductions given up here (`abandon`)
  std::uint64_t dropped = 0;     ///< partials of reductions given up here, dropped at the root
  std::uint64_t acks = 0;        ///< acknowledgements sent to children (`reduce_ack`)
  std::uint64_t resent = 0;      ///< partials sent again, tentatively, after a parent changed
  std::uint64_t asks = 0;        ///< asks sent for missing vnodes whose owner changed
  std::uint64_t adopted_tentative = 0; ///< tentative contributions for adopted vnodes
  std::uint64_t tentative_counted = 0; ///< tentative partials counted in a result here
  /// Tentative or late partials dropped: covered otherwise (also those held at an owner
  /// of the root vnode when it learns that the result completed at an earlier owner).
  std::uint64_t superseded = 0;
  std::uint64_t done_told = 0;   ///< completions passed on to a later owner of the root vnode
};

class reduce_engine {
public:
  /// `view` and `ops` must outlive the engine. `settled`: the vnodes whose history
  /// starts here (a founding member's own vnodes; empty for a processor that joins:
  /// its vnodes settle when their handoffs arrive).
  reduce_engine(tree_view& view, const reduce_op_table& ops, reduce_config cfg,
                vnode_set settled);

  /// The application starts reduction `spec.op`; `values` gives the contribution of any
  /// vnode (called once for each vnode counted here, now or when it settles here later;
  /// kept for `op_linger` after this processor's part is done). Reductions start in
  /// increasing order; a processor that joins starts at the first one not completed
  /// (`next_op`). Errors: not taking part (`stopped`); out of order, a root vnode outside
  /// the namespace, an operator or count the operator table refuses, or a contribution of
  /// the wrong size (`invalid_argument`; an unknown user operator: `not_found`). A start
  /// that fails changes nothing: the same number may be started again. Reductions before
  /// `spec.op` that reached this processor (partials of children) but were never started
  /// here pass what they gathered on now.
  std::optional<error> start(timestamp now, const reduce_spec& spec, contribution_fn values,
                             reduce_outbox& out);

  /// Gives reduction `op` up at this processor (a runtime's timeout, or the application
  /// cancelled it): its state here is dropped, what it had gathered with it (the root
  /// then never completes it; elsewhere the part not yet sent never goes up), and the
  /// report says what it had come to. Histories are not touched: the vnodes counted here
  /// stay accounted for up to `op`, and later reductions count them as usual. Partials
  /// of `op` that come later are dropped at the root's owner and passed on elsewhere,
  /// as for a reduction closed here (for `op_linger`).
  reduce_abandoned abandon(timestamp now, std::uint64_t op, reduce_outbox& out);

  /// The number the next reduction started here should carry: one above the last one
  /// started here; before any, one above the lowest history settled here (the first
  /// reduction a vnode here still owes: a founder's `first_op`); with none settled, the
  /// lowest reduction whose partials reached this processor, else `first_op`.
  std::uint64_t next_op() const;
  /// At the root vnode's owner: the vnodes whose contributions to reduction `op` have
  /// arrived so far; nothing elsewhere, or when `op` is not open here.
  std::optional<vnode_set> gathered_at_root(std::uint64_t op) const;

  /// Whether `m` is for this engine (a `reduce_partial`, `reduce_handoff`, `reduce_ack`
  /// or `reduce_ask`).
  static bool handles(const wire::message& m) {
    return std::holds_alternative<wire::reduce_partial>(m) ||
           std::holds_alternative<wire::reduce_handoff>(m) ||
           std::holds_alternative<wire::reduce_ack>(m) ||
           std::holds_alternative<wire::reduce_ask>(m);
  }
  /// A frame for this engine arrived. Returns false when the engine does not take it
  /// (a processor that no longer takes part takes no new work; it still takes a
  /// `reduce_ack`): the runtime must hand it back to its sender as undeliverable.
  bool on_message(timestamp now, proc_id from, const wire::message& m, reduce_outbox& out);
  void on_timer(timestamp now, std::uint64_t token, reduce_outbox& out);
  /// `m`, sent by this engine to `to`, could not be delivered there.
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m, reduce_outbox& out);
  /// The view may have changed (call after every event of the processor's supervisor):
  /// hands the histories of vnodes that moved away on, sends what waited for children
  /// that are gone, and flushes everything once the processor no longer takes part.
  void on_view_change(timestamp now, reduce_outbox& out);

  /// `vnodes` (owned here now) were adopted from a crashed processor: their history went
  /// down with it and no handoff will come. They settle here as accounted for up to the
  /// last reduction started here, so they count in every reduction started after this,
  /// exactly once. For a reduction already under way (started here) they are contributed
  /// only tentatively, when the root's owner asks for them (`reduce_ask`; at once when
  /// this processor is the root's owner): the root counts them only if the crashed
  /// processor's own partial does not cover them. Should the old owner have been alive
  /// after all, the history it hands over later wins where it is ahead (the later `done`
  /// is kept).
  void adopt(timestamp now, const vnode_set& vnodes, reduce_outbox& out);

  /// Holds partial results or frames that must still go somewhere.
  bool holding() const;
  /// Holds nothing and none of the frames it sent can come back, by what the runtime
  /// knows of their fates (core/send_fates.hpp).
  bool drained(timestamp now, const send_fates& fates) const {
    return !holding() && fates.none_can_return(frames_sent_, last_send_, now);
  }
  /// The blind rule: holds nothing and has sent nothing for `drain_linger`.
  bool drained(timestamp now) const {
    return drained(now, send_fates::blind(cfg_.drain_linger));
  }
  /// Frames sent so far (what `send_fates::settled` counts against).
  std::uint64_t frames_sent() const noexcept { return frames_sent_; }
  /// When the last frame was sent.
  timestamp last_send() const noexcept { return last_send_; }
  /// The vnodes settled here (owned, history at hand).
  vnode_set settled() const;
  /// The highest reduction started here (0: none).
  std::uint64_t last_started() const noexcept { return last_started_; }
  const reduce_stats& stats() const noexcept { return stats_; }
  /// Open reductions and held frames, one per line, for logs.
  std::string describe() const;

private:
  struct op_state {
    reduce_spec spec;
    tree_kind kind = tree_kind::latency;
    bool started = false;
    contribution_fn values;
    duration wait{0};        ///< its timeout
    std::uint64_t timeout_token = 0; ///< the timeout timer that counts (segments restart it)
    bool main_sent = false;  ///< this processor's own partial went to its parent
    bool rooted = false;     ///< accumulating as the root vnode's owner
    /// The result was delivered here, or at an earlier owner of the root vnode (that
    /// owner's `reduce_handoff` said so: `take_done`).
    bool complete = false;
    /// Complete, and the owner of the root vnode, which is no longer this processor, was
    /// sent a `reduce_done` for it (`sync`).
    bool told = false;
    /// Opened by a `reduce_done` before anything else reached this processor: its
    /// operator and count are unknown (`start` fills them in).
    bool opened_done = false;
    /// Small: partials within the root's LAN go straight to its owner (`star_bytes`).
    bool star = false;
    std::vector<std::uint8_t> acc;
    vnode_set covered;       ///< what `acc` covers
    bool has_acc = false;
    std::set<proc_id> reported; ///< children whose first partial arrived
    /// Partials sent up the tree here, kept until their parent acknowledges them.
    struct sent_part {
      proc_id to = no_proc;
      vnode_set vnodes;
      shared_bytes data;
      bool orphaned = false; ///< its parent changed: sent again after `resend_grace`
    };
    std::vector<sent_part> unacked;
    std::map<proc_id, vnode_set> to_ack; ///< children's partials in `acc`, acked when it goes
    /// At the root's owner: tentative partials, held apart until the result completes.
    std::vector<std::pair<vnode_set, shared_bytes>> tentative;
    vnode_set tentative_cover;   ///< what `tentative` covers (disjoint from `covered`)
    vnode_set counted_tentatively; ///< vnodes a result here took from tentative partials
    bool owners_noted = false;   ///< `owners` holds the owners of the missing vnodes
    std::map<proc_id, vnode_set> owners; ///< at the root's owner: owners known or asked
    vnode_set given;             ///< adopted vnodes contributed here tentatively
  };
  enum class timer_kind : std::uint8_t { timeout, linger, retry, forget, resend };
  struct timer_entry {
    timer_kind what = timer_kind::timeout;
    std::uint64_t op = 0;
  };

  /// Hands the histories of vnodes no longer owned here on (every event starts here).
  void sync(timestamp now, reduce_outbox& out);
  tree_kind kind_of(const reduce_spec& spec) const;
  bool is_root_owner(const op_state& st) const;
  /// The contributions of `vs` to `spec`, combined, or why one cannot be taken.
  expected<std::vector<std::uint8_t>> gather(const reduce_spec& spec,
                                             const contribution_fn& values,
                                             const vnode_set& vs) const;
  /// Drops reduction `op`'s state; its late partials are dropped or passed on.
  void forget_op(std::uint64_t op, reduce_outbox& out);
  bool is_child(const op_state& st, proc_id p) const;
  /// The children this processor waits for in `st`: its children in the tree of the
  /// root's owner `owner`; none in a star (`star_bytes`).
  std::vector<tree_child> children_of(const op_state& st, proc_id owner) const;
  /// Where this processor's partials of `st` go up: its parent in the tree of the root's
  /// owner `owner`, or `owner` itself in a star (`star_bytes`).
  proc_id parent_of(const op_state& st, proc_id owner) const;
  /// Whether `spec` is small enough, and this processor's LAN small enough, for a star.
  bool star_rule(const reduce_spec& spec, tree_kind kind) const;
  /// Whether this processor sends its partials of `st` straight to the root's owner
  /// `owner` (a star: `star_bytes`, `owner` in this processor's LAN, and a place in
  /// `owner`'s tree here).
  bool in_star(const op_state& st, proc_id owner) const;
  /// In a star, tells this processor's parent in the tree "nothing here" (an empty
  /// partial) unless that parent is the root's owner: it need not wait for it.
  void tell_tree_parent(timestamp now, const op_state& st, reduce_outbox& out);
  /// Takes in a contribution or partial covering `vs`: accumulated at the root's owner,
  /// combined into this processor's pending partial when `combine`, else passed on.
  /// True when it went into this processor's pending partial (not on, not at the root).
  bool take_in(timestamp now, op_state& st, const vnode_set& vs, const shared_bytes& data,
               bool combine, bool direct, std::uint32_t hops, reduce_outbox& out,
               bool tentative = false);
  /// At the root's owner: a tentative partial, held apart unless something covers it.
  void take_tentative(op_state& st, const vnode_set& vs, const shared_bytes& data);
  void ack(timestamp now, proc_id to, std::uint64_t op, const vnode_set& vs,
           reduce_outbox& out);
  /// Acknowledges the children's partials in `st.acc` (`to_ack`): it went up, or it is
  /// gathered at the root's owner (this processor owns the root vnode now).
  void ack_taken(timestamp now, op_state& st, reduce_outbox& out);
  /// Partials kept for a parent that is no longer the parent go again, tentatively,
  /// `resend_grace` after the change was seen (`due`: the grace is over).
  void resend_orphaned(timestamp now, op_state& st, bool due, reduce_outbox& out);
  /// At the root's owner: asks the new owners of missing vnodes for them.
  void ask_new_owners(timestamp now, op_state& st, reduce_outbox& out);
  /// Contributes `vs` (those adopted after reduction `st` started here) tentatively.
  void give_adopted(timestamp now, op_state& st, const vnode_set& vs, reduce_outbox& out);
  bool accumulate(op_state& st, const vnode_set& vs, const shared_bytes& data,
                  reduce_outbox& out);
  void check_complete(op_state& st, reduce_outbox& out);
  void contribute(timestamp now, op_state& st, const vnode_set& vs, reduce_outbox& out);
  void settle(timestamp now, const vnode_set& vs, std::uint64_t done, reduce_outbox& out);
  void maybe_send_main(timestamp now, op_state& st, bool force, reduce_outbox& out);
  /// Sends a partial of `st` (kept in `st.unacked` when it goes up the tree).
  /// A partial of `st` with its operation's fields and nothing in it yet.
  wire::reduce_partial partial_of(const op_state& st) const;
  void send_partial(timestamp now, op_state& st, const vnode_set& vs, shared_bytes data,
                    bool direct, std::uint32_t hops, reduce_outbox& out,
                    bool tentative = false);
  /// Returns where it went up the tree (`no_proc`: point-to-point, or held).
  proc_id send_partial(timestamp now, wire::reduce_partial p, reduce_outbox& out);
  /// Routes histories, and the completions of reductions rooted at the vnodes they
  /// name (`done`, by their root vnodes), to the owners of their vnodes.
  void route_handoff(timestamp now, const std::vector<wire::reduce_record>& records,
                     std::uint32_t hops, reduce_outbox& out,
                     const std::vector<wire::reduce_done>& done = {});
  /// At the owner of `d.root`: reduction `d.op` completed at an earlier owner of the root
  /// vnode. What it held of it here is dropped (`superseded`), and so are its partials
  /// that still arrive (copies sent after a crash), as at the owner where it completed.
  void take_done(timestamp now, const wire::reduce_done& d, reduce_outbox& out);
  void handle_partial(timestamp now, proc_id from, const wire::reduce_partial& m,
                      reduce_outbox& out);
  void handle_handoff(timestamp now, const wire::reduce_handoff& m, reduce_outbox& out);
  void handle_ack(const wire::reduce_ack& m, proc_id from);
  void handle_ask(timestamp now, const wire::reduce_ask& m, reduce_outbox& out);
  void hold(wire::message m, reduce_outbox& out);
  void linger(op_state& st, reduce_outbox& out);
  std::uint64_t timer(reduce_outbox& out, duration after, timer_entry e);
  bool unusable(timestamp now, proc_id p) const;
  void send(timestamp now, proc_id to, wire::message m, reduce_outbox& out);

  tree_view& view_;
  const reduce_op_table& ops_table_;
  reduce_config cfg_;
  std::map<std::uint64_t, vnode_set> done_; ///< done -> vnodes settled here with it
  /// Settled by `adopt`: a history that turns up for them later (their owner was alive
  /// after all) is reconciled, not reported as a double history.
  vnode_set adopted_;
  /// `adopted_` by the last reduction started here when they were adopted: they owe a
  /// tentative contribution to that one and those before it that are still open here.
  std::map<std::uint64_t, vnode_set> adopted_at_;
  std::map<std::uint64_t, op_state> ops_;
  /// Reductions given up here (`abandon`, or never started and rooted here), for
  /// `op_linger`: their late partials are not gathered again.
  std::set<std::uint64_t> abandoned_;
  /// Which operation (`reduce_config::stride`) number `k` belongs to: k itself with
  /// stride 1; else 0 below `first_op`, then 1, 2, ...
  std::uint64_t operation_of(std::uint64_t k) const {
    if (cfg_.stride <= 1)
      return k;
    return k < cfg_.first_op ? 0 : (k - cfg_.first_op) / cfg_.stride + 1;
  }
  /// What was owned here when `sync` last looked for complete reductions whose root
  /// vnode moved away, and whether one completed since (it looks again when either moved).
  vnode_set done_own_;
  bool done_dirty_ = false;
  std::uint64_t last_started_ = 0;
  std::uint64_t next_token_ = 1;
  std::map<std::uint64_t, timer_entry> timers_;
  std::map<std::uint64_t, wire::message> held_; ///< retry token -> frame to route again
  std::map<proc_id, timestamp> unreachable_;
  timestamp last_send_{timestamp::min() / 2};
  std::uint64_t frames_sent_ = 0;
  reduce_stats stats_;
};

} // namespace banyan
