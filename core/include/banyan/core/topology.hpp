#pragma once
/// A description of a wide-area computation's network: a hierarchy of groups (sites,
/// machines, clusters) whose leaves hold processors, with RTTs and bandwidths at every
/// level. It is what the emulated wide-area network is built from and what planning
/// tools read; the protocol itself never sees it (processors measure instead).
///
/// The text format is documented in docs/topology.md. Example:
///
///     topology tiny-2c8
///     send_overhead 20us
///     default nic 1Gbit
///     group A procs 4 rtt 0.2ms
///     group B procs 4 rtt 0.2ms
///     link A B rtt 2ms bw 100Mbit
///
/// The model, for a message a -> b whose lowest common group is L (the implicit root when
/// a and b share no group), and cA, cB the children of L that contain a and b:
///
///                             L        rtt: the link cA-cB's, else L's default
///                           /   \      bw:  the directed link cA -> cB
///                         cA     cB     uplink out (cA side), uplink in (cB side) of
///                         :       :     every group strictly below L
///                      leaf(a)  leaf(b)
///                         a       b     a's nic out, b's nic in
///
/// RTT(a, b) is the leaf's rtt when a and b share a leaf, else the rtt of the link between
/// cA and cB, else L's default rtt. The bandwidth resources a message uses are a's NIC
/// (egress), b's NIC (ingress), the uplinks of the groups below L on each side (out on
/// a's side, in on b's side), and the directed link cA -> cB.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/network_change.hpp"
#include "banyan/core/types.hpp"

namespace banyan {

/// A parsed topology: plain data, built by `parse_topology` (which validates it).
struct topology {
  /// A node of the hierarchy. A leaf group ("cluster") holds `procs` processors; an inner
  /// group holds subgroups. Indices refer to `topology::groups`.
  struct group {
    std::string name;
    int parent = -1;           ///< -1: a top-level group (a child of the implicit root)
    std::vector<int> children; ///< subgroups in declaration order; empty for a leaf
    std::uint32_t procs = 0;   ///< processors directly in this group (leaves only)
    /// Leaf: RTT between two of its processors. Inner group: default RTT between two of
    /// its children that have no explicit link.
    duration rtt{};
    rate nic = infinite_rate; ///< NIC bandwidth of each processor below (per direction)
    /// Shared limit on all traffic leaving (and, separately, entering) this group.
    rate uplink = infinite_rate;
    /// Inner groups: default bandwidth per direction between two children without an
    /// explicit link; each ordered pair of children gets its own capacity. Infinite means
    /// a non-blocking switch.
    rate link_bw = infinite_rate;
    proc_id first_proc = 0;       ///< processors below are [first_proc, first_proc + proc_count)
    std::uint32_t proc_count = 0; ///< all processors below, including in subgroups
    int depth = 0;                ///< 0 for top-level groups
    bool is_leaf() const noexcept { return children.empty(); }
  };

  /// An explicit link between two sibling groups `a` and `b` (indices into `groups`).
  struct link {
    int a = -1;
    int b = -1;
    duration rtt{};
    rate bw_ab = infinite_rate; ///< bandwidth a -> b
    rate bw_ba = infinite_rate; ///< bandwidth b -> a
  };

  std::string name;
  /// Per-message CPU cost at the sender; it serializes one sender's messages.
  duration send_overhead{};
  std::vector<group> groups; ///< in declaration order (parents before children)
  std::vector<link> links;
  /// The implicit root's defaults: RTT and bandwidth between top-level groups that have
  /// no explicit link (`default rtt`, `default bw`).
  duration root_rtt{};
  rate root_link_bw = infinite_rate;
  /// Scheduled changes (`at` lines, network_change.hpp), sorted by time. The rest of this
  /// struct is the network at time zero; `topology_at` gives it at a later time.
  std::vector<network_change> changes;

  std::size_t proc_count() const;
  /// Index of the group named `name`, or -1.
  int find_group(std::string_view name) const;
  /// Index into `links` of the link between sibling groups `a` and `b` (either order),
  /// or -1.
  int find_link(int a, int b) const;
  /// The leaf group ("cluster") holding processor `p`; `p` must be < proc_count() (a
  /// caller bug otherwise: asserts, or -1 when assertions are off).
  int leaf_of(proc_id p) const;
  /// `leaf_of(p)` for every processor, indexed by processor id.
  std::vector<int> cluster_of() const;
  /// Leaf group indices in processor id order.
  std::vector<int> clusters() const;
  /// Round-trip time between two processors; zero when a == b.
  duration rtt(proc_id a, proc_id b) const;
  /// One-way latency: rtt / 2 (rounded down to whole nanoseconds).
  duration one_way(proc_id a, proc_id b) const;
  /// The smallest capacity on the path a -> b when nothing else is sending (bytes per
  /// second); infinite when a == b or when nothing on the path is limited.
  rate path_bandwidth(proc_id a, proc_id b) const;
  /// A short human summary: clusters, sizes, id ranges, RTTs and links.
  std::string describe() const;

  /// Lowest common group of `a` and `b` (-1: the implicit root), and the children of it
  /// that contain a and b (both -1 when a and b share a leaf, which is then `common`).
  struct split {
    int common = -1;
    int side_a = -1;
    int side_b = -1;
  };
  split split_of(proc_id a, proc_id b) const;
};

/// Parses the text format of docs/topology.md. Errors are `errc::parse_error` with
/// messages such as "line 7: unknown keyword 'lnk'".
expected<topology> parse_topology(std::string_view text);

/// Names of the topologies built into the library, in a fixed order.
std::vector<std::string> builtin_topology_names();
/// The text of a builtin topology (empty when there is none of that name).
std::string_view builtin_topology_text(std::string_view name);
/// A builtin topology by name; `errc::not_found` when there is none.
expected<topology> builtin_topology(std::string_view name);
/// A builtin's name, or else the path of a file in the text format. Parse errors from a
/// file are prefixed with its path.
expected<topology> load_topology(const std::string& name_or_path);

/// N x N one-way latencies in milliseconds (zero on the diagonal), for planning tools.
std::vector<std::vector<double>> latency_matrix(const topology& topo);
/// N x N path bandwidths in bytes per second (`path_bandwidth`; zero on the diagonal),
/// for planning tools.
std::vector<std::vector<double>> bandwidth_matrix(const topology& topo);

/// "250us", "4ms", "1.5s": the format's own spelling of a duration.
std::string format_duration(duration d);
/// "1Gbit", "155Mbit", "inf": the format's own spelling of a rate (bytes per second).
std::string format_rate(rate r);

} // namespace banyan
