#pragma once
// Measuring (paper IV-A): when to probe (the schedule), whom (candidate choice), and one
// probe at a time through its phases:
//
//   prober p                         candidate c
//     | ping (1 byte)  ------------------> |
//     | <------------------------------ pong     RTT(p,c)
//     | bw_request (p's view digest,  ---> |
//     |   and its bucket digests)          |
//     | <------------------------ pong     the mark, right before the reply
//     | <------------- bw_reply (128 KiB: c's tree_info for every tree, and c's view
//     |                          unless it has p's digest: view_digest.hpp; only
//     |                          the buckets that differ: view_buckets.hpp)
//     |    bw(p,c) = bytes / (reply - mark); the rules decide per tree
//     | adopt_request(trees, subtrees) --> |
//     | <------------------- adopt_reply   |
//     | release -> each old parent
//
// Probing serves the others too: it answers their bw_requests with our view.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "banyan/core/measurement_schedule.hpp"
#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class prober {
public:
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
    /// Spent from the background budget (background_probing.hpp): its candidate's
    /// figures are checked for drift, it moves a tree only for `adapt_margin`, and an
    /// unanswered one is no strike.
    bool background = false;
  };

  prober(parts& s, int extra) : s_(s), schedule_(extra) {}

  bool measuring() const noexcept { return schedule_.active() || probe_.has_value(); }
  bool probing(proc_id p) const noexcept { return probe_ && probe_->cand == p; }
  const std::optional<probe>& current() const noexcept { return probe_; }
  std::uint64_t completed() const noexcept { return completed_; }
  std::uint64_t abandoned() const noexcept { return abandoned_; }
  /// The schedule and probe, for logs.
  std::string describe() const;

  /// Something calls for measuring (start, join, orphaned, new trees): a round starts
  /// (or restarts its count of extra probes).
  void trigger(timestamp now, outbox& out);
  /// Starts the next probe if the schedule calls for one and none runs.
  void maybe_probe(timestamp now, outbox& out);
  void finish_probe(timestamp now, bool completed, outbox& out);
  /// A parent changed by adoption: the variant decides whether the extra probes count
  /// again from here (not in a joiner's settling round).
  void progress();
  /// p adopted us without a measurement: probe it next.
  void remeasure(proc_id p);
  /// This round: placed by our giver (settling) or by step-parents (repair); once every
  /// tree has a parent, its probes stay in the LAN.
  void settling() noexcept { settling_ = true; }
  void repair_round() noexcept { repair_round_ = true; }
  /// A background probe of `cand` (background_probing), if no probe and no round runs.
  bool start_background(timestamp now, proc_id cand, outbox& out);
  /// Probe p again as soon as this probe ends, from the background budget (drift_watch:
  /// a second figure confirms a drift).
  void confirm(proc_id p) { confirm_ = p; }
  /// A round of measuring that judges only the trees drift_watch re-examines.
  void reexamine(timestamp now, outbox& out);
  /// A round of measuring runs (rather than single background probes).
  bool round_active() const noexcept { return schedule_.active(); }
  /// We leave: the probe in flight is dropped.
  void abandon() { probe_.reset(); }

  void on(timestamp now, proc_id from, const wire::ping& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::pong& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::bw_request& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out);
  /// The adopt_reply to our probe's adopt_request.
  void on_adopt_reply(timestamp now, proc_id from, const wire::adopt_reply& m, outbox& out);
  void on_start_timer(timestamp now, std::uint64_t seq, outbox& out);
  void on_reply_timer(timestamp now, std::uint64_t seq, outbox& out);

  /// p is gone: not to be measured again.
  void forget(proc_id p);
  /// The trees rooted at p were dropped here: the probe in flight no longer asks to be
  /// adopted in them (a verdict for them is undone, even if p's trees exist again by
  /// then: a later incarnation's, or reopened, are other trees under the same key).
  void drop_root(proc_id p);
  void forget_strikes(proc_id p) { strikes_.erase(p); }
  /// A new round of life: no schedule, probe or strikes, nothing to remeasure.
  void reset();

private:
  /// A member to probe: with `local_only`, one known to be in this LAN (if any).
  proc_id pick_candidate(bool local_only);
  /// On demand: this processor has searched long enough for its LAN (lan_search.hpp).
  bool lan_searched() const;
  void start_probe(timestamp now, outbox& out);
  /// Anti-entropy: takes in the members, departures and routes candidate `from` knows.
  void merge_view(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out);
  /// Our view's digest (view_digest.hpp), computed again only when the members'
  /// information (membership::version) or the routing table (routing_table::version)
  /// changed: a probe's request and its reply each need it, and it is O(N) to compute.
  std::uint64_t view_digest_now();
  /// Our view's digest and its `n` bucket digests (view_buckets.hpp), the latter
  /// computed again only when the view's digest or `n` changed.
  const std::vector<std::uint32_t>& bucket_digests(std::uint64_t view, std::size_t n);

  parts& s_;
  measurement_schedule schedule_;
  std::optional<probe> probe_;
  std::map<proc_id, int> strikes_; ///< consecutive unanswered probes per candidate
  /// Peers adopted without a measurement: probed next, so the edge gets real figures.
  std::vector<proc_id> remeasure_;
  /// Candidates probed in this round: a joiner's LAN round draws each once before any again.
  std::vector<proc_id> round_probed_;
  proc_id confirm_ = no_proc; ///< to probe again once the current probe ends
  bool settling_ = false;     ///< placed by our giver: extra probes counted from parented
  bool repair_round_ = false; ///< repaired by step-parents in this round
  std::uint64_t completed_ = 0;
  std::uint64_t abandoned_ = 0;
  /// Our view's digest (`view_digest_now`) and the versions of the members' information
  /// and of the routing table it was computed at.
  std::uint64_t digest_ = 0;
  std::uint64_t digest_members_ = 0;
  std::uint64_t digest_routes_ = 0;
  std::uint64_t buckets_view_ = 0; ///< the view digest `buckets_` were computed for
  std::vector<std::uint32_t> buckets_;
  /// Where our next request asks the candidate to start among the differing buckets
  /// (`bw_request::buckets_from`): after the last one a reply cut by its budget carried.
  std::uint16_t buckets_from_ = 0;
};

} // namespace banyan::sup
