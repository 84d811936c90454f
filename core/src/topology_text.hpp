#pragma once
// The topology format's lexical pieces (core/src/topology.cpp), shared with the parser of
// `at` lines (core/src/network_change.cpp).

#include <string>
#include <string_view>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/types.hpp"

namespace banyan::detail {

/// "line N: msg" as `errc::parse_error`.
error topology_line_error(int line, const std::string& msg);
/// 'name'
std::string topology_quote(std::string_view s);
/// Splits a line into tokens, dropping a '#' comment.
std::vector<std::string_view> topology_tokenize(std::string_view line);
/// "0.25ms", "5s"
expected<duration> topology_time(int line, std::string_view tok);
/// "100Mbit", "12MB", "inf"
expected<rate> topology_rate(int line, std::string_view tok);

} // namespace banyan::detail
