#pragma once
/// Scheduled changes of the emulated network (docs/topology.md, "Networks that change"):
/// at a given time, a link's or an uplink's bandwidth, a link's RTT, or the share of a
/// link or uplink that other users' traffic takes. They come from `at` lines of a topology
/// file (`topology::changes`) or from a file of such lines (`--events FILE`). The network
/// model applies them at their time (net/wan_model.hpp); `topology_at` gives the network
/// as it is at a moment, for the planning tools (stream_ceiling and the like).

#include <optional>
#include <string_view>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/types.hpp"

namespace banyan {

struct topology;

/// One `at` line: what changes on one link (both directions unless `bw X/Y`) or uplink.
struct network_change {
  enum class target { link, uplink };
  duration at{};            ///< emulated time since the network started
  target what = target::link;
  int link = -1;            ///< index into topology::links (target::link)
  int group = -1;           ///< index into topology::groups (target::uplink)
  /// New capacity a -> b and b -> a of the link (an uplink uses `bw_ab` both ways),
  /// before the share taken by cross-traffic.
  std::optional<rate> bw_ab, bw_ba;
  std::optional<duration> rtt; ///< new RTT of the link
  /// Share of the capacity, in [0, 1), that other users' traffic takes from now on: the
  /// emulated network leaves (1 - load) of it to banyan's flows (fluid, constant).
  std::optional<double> load;
  int line = 0; ///< where it was written (0: built in code)
};

/// Parses `at` lines (and comments and blank lines) against `topo`, whose links and
/// groups they name. Errors are `errc::parse_error` "line N: ...". The result is sorted
/// by time (stable: lines of one instant apply in the order written).
expected<std::vector<network_change>> parse_network_changes(const topology& topo,
                                                            std::string_view text);

/// Parses one `at` line, already split into tokens (`toks[0]` is "at").
expected<network_change> parse_network_change(const topology& topo, int line,
                                              const std::vector<std::string_view>& toks);

/// Checks that a change built in code names a link or uplink of `topo` whose capacity it
/// may change (a finite one), with values in range.
std::optional<error> check_network_change(const topology& topo, const network_change& c);

/// Capacity state of the changeable resources: the nominal capacity and the load share,
/// so that a later `bw` keeps the load and a later `load` keeps the bandwidth.
class network_state {
public:
  explicit network_state(const topology& topo);
  /// Applies `c` to `topo` (the effective capacities: nominal x (1 - load)).
  void apply(topology& topo, const network_change& c);

private:
  struct cap {
    rate nominal_ab = 0, nominal_ba = 0;
    double load = 0;
  };
  std::vector<cap> links_;
  std::vector<cap> uplinks_;
};

/// `topo` as it is at time `t`: every change of `topo.changes` with `at <= t` applied.
topology topology_at(const topology& topo, duration t);

/// "at 5s link A B bw 50Mbit": the change in the file's own syntax.
std::string describe_change(const topology& topo, const network_change& c);

} // namespace banyan
