#include "banyan/core/error.hpp"

namespace banyan {

const char* to_string(errc e) {
  switch (e) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::parse_error: return "parse_error";
    case errc::not_found: return "not_found";
    case errc::malformed_frame: return "malformed_frame";
    case errc::oversized_frame: return "oversized_frame";
    case errc::version_mismatch: return "version_mismatch";
    case errc::unknown_peer: return "unknown_peer";
    case errc::auth_failed: return "auth_failed";
    case errc::timeout: return "timeout";
    case errc::io_error: return "io_error";
    case errc::stopped: return "stopped";
    case errc::cancelled: return "cancelled";
    case errc::id_in_use: return "id_in_use";
  }
  return "unknown_error";
}

std::string error::to_string() const {
  return std::string(banyan::to_string(code)) + ": " + message;
}

} // namespace banyan
