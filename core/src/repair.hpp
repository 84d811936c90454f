#pragma once
// Structure-preserving repair: a tree without parent asks a step-parent for adoption
// before any probing. A leaving parent names them (its heir goes to the leaver's parent,
// the other children under the heir), a giver places its joiner, a seed names the
// newcomer's. Asked one candidate at a time, ahead of every measurement; a refusal may
// point on (a redirect). A processor asked while its own step-parent has not answered
// holds the request until it has.
//
//   before:   up -> L -> {h, c1, c2}         L leaves: h is the heir
//   after:    up -> h -> {c1, c2}            (orphan messages name the step-parents)

#include <cstdint>
#include <map>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class repair {
public:
  explicit repair(parts& s) : s_(s) {}

  /// Records the step-parents to ask, in order, for unconnected tree t (the first that
  /// is a member now, the rest for later); returns whether one was taken. `measured`:
  /// the figures are the edge's own (a seed), nothing to remeasure.
  bool hint(tree_state& t, std::vector<proc_id> candidates, duration rtt, rate bw,
            int hops = 0, bool measured = false);
  bool has_step(tree_key k) const { return steps_.count(k) > 0; }
  bool any_steps() const noexcept { return !steps_.empty(); }
  /// The step-parent we will ask (or are asking) in tree k, if any.
  proc_id step_parent(tree_key k) const;
  /// Whether an adoption request in tree t waits for our own (step-parent or seed).
  bool awaiting(const tree_state& t) const;
  /// Whether `seq` is an adoption request of ours to step-parent `from` in flight.
  bool asked(std::uint64_t seq, proc_id from) const;
  bool asked(std::uint64_t seq) const { return asks_.count(seq) > 0; }
  std::uint64_t hinted_adoptions() const noexcept { return hinted_adoptions_; }

  /// Sends an adopt_request to every step-parent not asked yet (one per candidate).
  void ask_step_parents(outbox& out);
  /// After step-parents answered or failed: measure now, or once all have answered.
  void after_steps(timestamp now, outbox& out);
  /// Holds trees of an adoption request until our own step-parent answers for them.
  void defer(proc_id from, std::uint64_t seq, std::vector<wire::subtree_entry> trees);
  /// A newer adoption request `seq` from `from` names `trees`: whatever we still hold of
  /// its earlier requests for those trees is refused now (the newer one is answered).
  void supersede(proc_id from, std::uint64_t seq, const std::vector<wire::subtree_entry>& trees,
                 outbox& out);
  /// Answers the held adoption requests that can be answered now.
  void answer_deferred(outbox& out);
  /// Refuses, pointing on, as a leaving or left processor (never adopts).
  void refuse_adoption(proc_id from, const wire::adopt_request& m, outbox& out);
  /// Sends the orphan messages with step-parents for every child of every tree, and
  /// records where to point those who still ask after we left.
  void hand_over_trees(outbox& out);

  /// A leaving parent's orphan message, while we are a member (or joining, leaving).
  void on(timestamp now, proc_id from, const wire::orphan& m, outbox& out);
  /// An orphan message after we left: a child names where it goes instead of us.
  void on_after_leaving(proc_id from, const wire::orphan& m);
  /// A step-parent answered.
  void on_step_reply(timestamp now, const wire::adopt_reply& m, outbox& out);
  /// A step-parent did not answer in time.
  void on_reply_timer(timestamp now, std::uint64_t seq, outbox& out);

  /// p is gone: hints naming it move on to the next step-parent, hints in its trees go;
  /// returns whether any hint changed.
  bool forget_steps(proc_id p);
  /// p is gone: its held requests and our requests to it go.
  void forget_requests(proc_id p);
  /// We left: no step-parents to ask (held requests and where to point remain).
  void end_life();
  /// A new life: nothing asked, held or pointed to.
  void reset();

private:
  struct step_hint {
    proc_id to = no_proc;
    duration rtt{0};
    rate bw = 0;
    bool measured = false; ///< the figures are the edge's own (a seed): nothing to remeasure
    int hops = 0;          ///< redirects followed so far
    std::uint64_t asked = 0; ///< seq of the adopt_request in flight (0: not asked yet)
    std::vector<proc_id> next; ///< whom to ask should `to` refuse or be gone
  };
  /// An adoption request to a step-parent, in flight: the trees still unanswered.
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

  /// The step-parent of tree k failed (refused, silent or gone): the next one, or none.
  void next_step(tree_key k);
  /// A step-parent answered (`m` null: timed out) for ask `seq`.
  void step_reply(timestamp now, std::uint64_t seq, const wire::adopt_reply* m, outbox& out);
  /// Where we would send a child in tree t when we go: our parent, or our step-parent.
  proc_id effective_parent(const tree_state& t) const;
  /// Our children in t ranked to take our place when we leave, the heir first.
  std::vector<proc_id> heirs(const tree_state& t) const;

  parts& s_;
  std::map<tree_key, step_hint> steps_;
  std::vector<held_request> deferred_;
  std::map<std::uint64_t, step_ask> asks_;
  /// After leaving: per tree, where to send a processor that still asks us for adoption.
  std::map<tree_key, proc_id> farewell_trees_;
  /// A step-parent adopted us since measuring last started: measure once all answered.
  /// Cleared only when that measuring starts (after_steps).
  bool repaired_ = false;
  std::uint64_t hinted_adoptions_ = 0;
};

} // namespace banyan::sup
