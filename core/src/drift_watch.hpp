#pragma once
// Re-examination on drift (supervisor_config::background_period, drift): the trees were
// built from figures measured once, and judge every later candidate by the best figure
// ever measured to it. When a parent edge no longer gives what the tree assumed, the
// trees with that parent take the new figure and re-examine their place.
//
//   active    a probe of a parent (a background probe, or any other) measures its RTT and
//             rate now. Drifted: rate < (1 - drift) x what the tree assumed for the edge
//             (min(bw_parent, sendable / children): est's terms for this edge), or, with
//             no stream from it lately (pings queue behind segments), RTT > (1 + drift)
//             x the RTT assumed. Twice in a row (the second probe follows at once).
//   passive   a child sees the rate its parent's segments arrive at (stream_sample):
//             windows of 250 ms of one broadcast's stream (a gap over 100 ms starts a new
//             window). Drifted: two windows in a row below (1 - drift) x est, the rate the
//             tree assumed to arrive, and the parent is remote. Only remote parents:
//             every processor below a slowed edge sees the same slow stream, and the one
//             to act is the one whose edge slowed; assumes LAN edges do not drift (the
//             background probes still find one that does).
//   then      the edge's figure becomes the one measured (the path memory forgets the
//             best it had), the trees with that parent take it (est, or dist, changes
//             and flows down the subtree by tree_update), and a round of measuring that
//             judges only those trees starts, the best alternatives probed first. At
//             most one such round per 2 s per processor: trees whose parent drifts
//             sooner wait for the next (resume); parents that drift while a round
//             re-examines join it.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class drift_watch {
public:
  explicit drift_watch(parts& s) : s_(s) {}

  void on_stream(timestamp now, proc_id from, tree_key k, std::size_t bytes, outbox& out);
  /// A probe of p measured `rtt` and `bw` now (the raw figures, not the best).
  /// An RTT sample of p now can be trusted: the stream from p lately was too small for a
  /// pong to wait noticeably behind it (rtt_watch).
  bool rtt_trusted(timestamp now, proc_id p) const;
  /// rtt_watch found p's edge `rtt` away, twice in a row: a drift of its RTT.
  void rtt_drifted(timestamp now, proc_id p, duration rtt, outbox& out) {
    drifted(now, p, rtt, std::nullopt, out);
  }
  void on_measured(timestamp now, proc_id p, duration rtt, rate bw, outbox& out);
  /// The trees a re-examination round judges (empty: every tree, an ordinary round).
  const std::set<tree_key>& reexamining() const noexcept { return reexam_; }
  /// The round of measuring ended (or a full one started): every tree is judged again.
  void round_ended() {
    reexam_.clear();
    far_figures_.clear();
  }
  /// The candidates a re-examination round probes first, each once: after an RTT drift,
  /// the remote members nearest by RTT figure that are no parent in the trees
  /// re-examined and whose
  /// figure is not within `same_path_share` (5%) or lan_margin of what a parent that
  /// drifted in this round measured before (presumed behind the same link: the members
  /// of one remote LAN share their figure to within that, and a link that slowed slows
  /// all of them); after a rate drift, background_probing::alternatives (widest first).
  std::vector<proc_id> alternatives(std::size_t count) const;
  std::uint64_t drifts() const noexcept { return drifts_; }
  /// Starts the re-examination of trees whose parent drifted too soon after the last
  /// round, once round_spacing has passed and nothing is measured (called on the
  /// background and RTT watch ticks).
  void resume(timestamp now, outbox& out);
  void forget(proc_id p);
  void reset();

private:
  /// p's edge drifted: new figures, the trees take them, re-examination.
  void drifted(timestamp now, proc_id p, std::optional<duration> rtt, std::optional<rate> bw,
               outbox& out);

  struct window {
    timestamp first{0};
    timestamp last{0};
    std::size_t bytes = 0;
    int low = 0; ///< windows in a row below the assumed rate
  };
  parts& s_;
  std::map<std::pair<proc_id, tree_key>, window> windows_;
  std::map<proc_id, timestamp> last_stream_; ///< when a stream frame last came from p
  /// Bytes of stream from p since `first` (a window of up to stream_quiet; rtt_trusted).
  struct recent {
    timestamp first{0};
    std::size_t bytes = 0;
  };
  std::map<proc_id, recent> recent_;
  std::map<proc_id, int> strikes_;           ///< drifted measurements in a row
  std::set<tree_key> reexam_;
  /// Trees whose parent drifted within round_spacing of the last round: re-examined by
  /// the next round (resume).
  std::set<tree_key> pending_;
  /// Figures, before the drift, of the parents whose RTT drifted in this round.
  std::vector<duration> far_figures_;
  timestamp last_round_{std::numeric_limits<timestamp::rep>::min() / 2};
  std::uint64_t drifts_ = 0;
};

} // namespace banyan::sup
