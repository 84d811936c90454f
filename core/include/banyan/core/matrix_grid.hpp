#pragma once
/// A minimal discrete-event loop that runs one `supervisor` per processor over an N x N
/// matrix of one-way latencies, in virtual time: what planning tools use to predict the
/// trees banyan's protocol forms, without a topology, actors or sockets.
///
/// The network it models is deliberately simple:
///   - a message from a to b arrives latency[a][b] ms after it is sent, so
///     RTT(a, b) = latency[a][b] + latency[b][a];
///   - no send overhead and infinite bandwidth: message size never matters;
///   - contention-free: messages never wait for each other, except that messages from a
///     to b are delivered in the order they were sent (as TCP would).
/// Bandwidth probes therefore all look equally fast (the supervisor clamps each transfer
/// to 1 us), so the bandwidth trees it forms carry no information; latency trees do.
///
/// Deterministic: events are ordered by time, then by the order they were scheduled;
/// processor p's supervisor is seeded from `seed` and p.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <queue>
#include <utility>
#include <vector>

#include "banyan/core/supervisor.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/types.hpp"

namespace banyan {

class matrix_grid {
public:
  /// `latency[a][b]` is the one-way latency a -> b in milliseconds (square, one row per
  /// processor; the diagonal is not read).
  matrix_grid(std::vector<std::vector<double>> latency, std::uint64_t seed,
              supervisor_config cfg = {});

  /// Founds every processor as a member, processor p owning vnode p.
  void start();
  /// Processes events until none is left or `limit` were processed; returns how many
  /// were processed. Without churn the supervisors stop measuring after their extra
  /// measurements, so the queue runs dry.
  std::size_t run(std::size_t limit = 10'000'000);
  /// Whether no event is pending.
  bool quiet() const noexcept { return queue_.empty(); }
  /// Whether any supervisor is still measuring.
  bool busy() const;

  /// The tree `k` as the supervisors currently see it (each one's parent link).
  tree tree_of(tree_key k) const;
  /// Every root's tree of `kind`, indexed by root.
  std::vector<tree> trees(tree_kind kind) const;

  std::size_t size() const noexcept { return sups_.size(); }
  const supervisor& sup(proc_id p) const { return *sups_[p]; }
  timestamp now() const noexcept { return now_; }
  /// Messages delivered so far.
  std::uint64_t messages() const noexcept { return delivered_; }

private:
  struct event {
    timestamp at;
    std::uint64_t order;
    proc_id to;
    bool is_timer;
    std::uint64_t token; ///< timers: the supervisor's token; messages: key in envelopes_
    bool operator<(const event& o) const { // for a min-heap on (at, order)
      return at != o.at ? at > o.at : order > o.order;
    }
  };

  void carry_out(proc_id p, outbox& out);

  std::vector<std::vector<duration>> one_way_;
  std::uint64_t seed_;
  supervisor_config cfg_;
  std::vector<std::unique_ptr<supervisor>> sups_;
  std::priority_queue<event> queue_;
  std::map<std::uint64_t, wire::envelope> envelopes_;
  std::map<std::pair<proc_id, proc_id>, timestamp> last_; // FIFO per ordered pair
  std::uint64_t next_msg_ = 0, order_ = 0, delivered_ = 0;
  timestamp now_{0};
};

} // namespace banyan
