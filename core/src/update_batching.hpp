#pragma once
// Tree changes told to the neighbours in batches: a parent tells its children its new
// place (tree_update), a child tells its parent its new subtree (subtree_update) and, in
// the banyan variant, its subtree's summary when it moved by more than the hysteresis or
// the parent is new (tree_summary, subtree_summary.hpp). Summaries are held for
// `summary_interval` (one timer for all), so that while trees form, the changes of many
// events cost one message per parent. Other changes
// are marked as they happen and sent together, at once or after `update_delay`, so that
// a burst of them costs one message per neighbour.

#include <cstddef>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

/// How long changed subtree summaries are held before they are sent.
inline constexpr duration summary_interval = std::chrono::milliseconds(100);

class update_batching {
public:
  explicit update_batching(parts& s) : s_(s) {}

  /// Room for the trees of a table of `slots` slots.
  void make_room(std::size_t slots);
  void mark_info(const tree_state& t);
  /// Our vnodes below changed, or our parent did (the summary may have too).
  void mark_subtree(const tree_state& t);
  void mark_all_subtrees();
  /// What a broadcast costs below us in `t` may have changed: a child's summary, our own
  /// hop's figures, our parent. Nothing in the paper variant.
  void mark_summary(const tree_state& t);
  void mark_all_summaries();
  /// Sends what the marks call for: at once when not a member or without a delay, else
  /// after `update_delay` (one timer for all).
  void flush(outbox& out);
  void flush_now(outbox& out);
  /// The flush timer fired.
  void on_timer(outbox& out);
  /// The summary timer fired: sends the summaries that changed enough.
  void on_summary_timer(outbox& out);
  /// Tree or subtree updates are held (summaries are not counted: they only inform the
  /// choice of tree, which goes by other figures until they come).
  bool pending() const noexcept { return flush_pending_; }
  void reset();

private:
  parts& s_;
  std::vector<std::size_t> dirty_info_, dirty_subtree_, dirty_summary_; // tree slots, in marking order
  std::vector<bool> is_dirty_info_, is_dirty_subtree_, is_dirty_summary_;
  bool flush_pending_ = false;
  bool summary_pending_ = false;
  void send_summaries(outbox& out);
};

} // namespace banyan::sup
