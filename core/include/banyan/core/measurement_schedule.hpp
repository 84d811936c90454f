#pragma once
/// When a processor measures (paper IV-A): after start, a join, a leave that
/// orphaned it or the loss of a parent, it probes randomly chosen processors until
/// every tree has a parent, then `extra` more; otherwise it measures nothing.

namespace banyan {

class measurement_schedule {
public:
  explicit measurement_schedule(int extra = 10) : extra_(extra) {}

  /// Something happened that calls for measuring (start, join, orphaned).
  /// Restarts the count of extra measurements.
  void trigger() noexcept {
    active_ = true;
    extra_left_ = extra_;
  }

  /// Asks whether to start another probe now. `all_parented` tells whether every
  /// tree currently has a parent. Probes after that point count as extra ones.
  bool next(bool all_parented) noexcept {
    if (!active_)
      return false;
    if (!all_parented)
      return true;
    if (extra_left_ > 0) {
      --extra_left_;
      return true;
    }
    active_ = false;
    return false;
  }

  /// A probe changed a parent: with `from_last_change`, the extra measurements count
  /// again from here, so measuring ends after `extra` probes in a row that changed
  /// nothing (rather than `extra` probes after the last tree found a parent).
  void progress(bool from_last_change) noexcept {
    if (active_ && from_last_change)
      extra_left_ = extra_;
  }

  bool active() const noexcept { return active_; }
  int extra_left() const noexcept { return extra_left_; }
  int extra() const noexcept { return extra_; }

private:
  int extra_;
  int extra_left_ = 0;
  bool active_ = false;
};

} // namespace banyan
