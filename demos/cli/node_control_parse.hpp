#pragma once
// Internal to `banyan node --control` (node_control.hpp): the pieces its command
// handlers share across files (parsing, the clock, names).

#include <array>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "banyan/core/messages.hpp"
#include "banyan/core/reduce_op.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan::cli::control_detail {

/// The largest payload a command may ask for.
inline constexpr std::uint64_t max_payload = std::uint64_t{1} << 32; // 4 GiB

/// The pattern's first 256 bytes for operation `seq` (it repeats with that period).
std::array<std::uint8_t, 256> pattern_period(std::uint64_t seq);
/// Microseconds on the steady clock: the "t_us" of every line.
std::int64_t now_us();
/// "origin:seq".
std::string op_name(const wire::collective_id& id);
/// `v` without its braces, e.g. "0-9".
std::string vnodes_text(const vnode_set& v);
/// sum | min | max | prod.
std::optional<reduce_kind> parse_kind(const std::string& s);
/// int32 | int64 | float | double.
std::optional<element_type> parse_type(const std::string& s);
/// Whether there is more on the command line.
bool trailing(std::istringstream& in);

/// A reduction's arguments, "SEQ ROOT COUNT sum|min|max|prod int32|int64|float|double".
struct reduction_args {
  std::uint64_t seq = 0;
  vnode_id root = 0;
  std::uint64_t count = 0;
  reduce_kind kind = reduce_kind::sum;
  element_type type = element_type::int32;
};
/// The rest of the command line as a reduction's arguments, all of them and nothing more;
/// nothing otherwise.
std::optional<reduction_args> parse_reduction(std::istringstream& in);

} // namespace banyan::cli::control_detail
