#include <boost/test/unit_test.hpp>

#include "banyan/core/variant_decision.hpp"

using namespace banyan;

// The paper's variant is the paper throughout: uniform candidates whatever bias is
// configured, extra measurements counted from when every tree had a parent, and the
// bandwidth rule without a sender capacity.
BOOST_AUTO_TEST_CASE(the_paper_variant_is_the_paper_throughout) {
  auto d = decide(rule_variant::paper, 0.5);
  BOOST_TEST((d.rules == rule_variant::paper));
  BOOST_TEST(d.local_bias == 0.0);
  BOOST_TEST(!d.extra_from_last_change);
  BOOST_TEST(!d.sender_capacity);
  BOOST_TEST(!d.fan_out_updates);
}

// banyan's variant takes the configured bias and its locality terms.
BOOST_AUTO_TEST_CASE(the_banyan_variant_takes_the_configured_bias) {
  auto d = decide(rule_variant::banyan, 0.25);
  BOOST_TEST((d.rules == rule_variant::banyan));
  BOOST_TEST(d.local_bias == 0.25);
  BOOST_TEST(d.extra_from_last_change);
  BOOST_TEST(d.sender_capacity);
  BOOST_TEST(d.fan_out_updates);
}
