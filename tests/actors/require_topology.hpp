#pragma once
// A builtin topology for the actors suites; the test fails at once if it is unknown.

#include <string>

#include <boost/test/unit_test.hpp>

#include "banyan/core/topology.hpp"

namespace banyan::testing {

inline topology require_topology(const std::string& name) {
  auto t = builtin_topology(name);
  BOOST_REQUIRE_MESSAGE(t.has_value(), name);
  return *t;
}

} // namespace banyan::testing
