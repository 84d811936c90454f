#pragma once
/// Vocabulary types shared by every layer of banyan.

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>

namespace banyan {

/// Identifies a processor (a member of the computation). Dense, assigned at start
/// or join; never reused within one run.
using proc_id = std::uint32_t;
inline constexpr proc_id no_proc = std::numeric_limits<proc_id>::max();

/// Identifies a virtual node, the unit messages are addressed to.
using vnode_id = std::uint32_t;

/// Durations and instants are nanoseconds. Instants count from an arbitrary epoch
/// chosen by whoever owns the clock (virtual time starts near zero).
using duration = std::chrono::nanoseconds;
using timestamp = std::chrono::nanoseconds;

/// Rates are bytes per second.
using rate = double;
inline constexpr rate infinite_rate = std::numeric_limits<double>::infinity();

/// The two trees kept for every root.
enum class tree_kind : std::uint8_t {
  latency = 0,   ///< short messages: built from RTT by the latency rule
  bandwidth = 1, ///< long messages: built from bandwidth by the bandwidth rule
};
inline constexpr int tree_kind_count = 2;

inline const char* to_string(tree_kind k) {
  return k == tree_kind::latency ? "latency" : "bandwidth";
}

/// Names one tree: its root processor and its kind.
struct tree_key {
  proc_id root = no_proc;
  tree_kind kind = tree_kind::latency;
  friend bool operator==(tree_key a, tree_key b) {
    return a.root == b.root && a.kind == b.kind;
  }
  friend bool operator!=(tree_key a, tree_key b) { return !(a == b); }
  friend bool operator<(tree_key a, tree_key b) {
    return a.root != b.root ? a.root < b.root : a.kind < b.kind;
  }
};

inline double to_ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
inline duration from_ms(double ms) {
  return std::chrono::duration_cast<duration>(std::chrono::duration<double, std::milli>(ms));
}

} // namespace banyan

template <>
struct std::hash<banyan::tree_key> {
  size_t operator()(banyan::tree_key k) const noexcept {
    return (static_cast<size_t>(k.root) << 1) | static_cast<size_t>(k.kind);
  }
};
