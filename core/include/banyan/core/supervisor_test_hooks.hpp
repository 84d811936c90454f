#pragma once
/// Seams through which a test sees one mechanism of the supervisor alone. Not
/// configuration: runtimes never set them, and the defaults are the protocol.

namespace banyan {

struct supervisor_test_hooks {
  /// An orphan whose leaving parent named step-parents starts measuring at once,
  /// alongside asking them. false: it measures only once they have answered, so that a
  /// test sees what the repair alone made. Default true.
  bool measure_during_repair = true;
};

} // namespace banyan
