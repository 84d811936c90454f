#pragma once
/// Errors as values: banyan's own error codes and a small `expected<T>`.
/// Failures that cross a layer or node boundary travel as these, not as exceptions.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace banyan {

enum class errc {
  invalid_argument = 1, ///< bad configuration or command-line input
  parse_error,          ///< a topology, matrix or config file could not be parsed
  not_found,            ///< a named thing (topology, processor, file) does not exist
  malformed_frame,      ///< bytes on the wire are not a valid frame
  oversized_frame,      ///< a frame exceeds the size limit
  version_mismatch,     ///< the peer speaks another protocol version
  unknown_peer,         ///< a message from or to a processor that is not a member
  auth_failed,          ///< wrong shared secret
  timeout,              ///< a wait ran out
  io_error,             ///< a system call failed
  stopped,              ///< the processor or system is shutting down
  cancelled,            ///< the caller gave the operation up (`node::cancel_reduction`, ...)
  id_in_use,            ///< another process runs under this processor id
};

const char* to_string(errc e);

struct error {
  errc code = errc::invalid_argument;
  std::string message;
  /// "parse_error: line 3: unknown keyword 'lnk'"
  std::string to_string() const;
};

/// Either a value or an error. Minimal on purpose (C++17 has no std::expected).
template <class T>
class expected {
public:
  expected(T value) : v_(std::move(value)) {}
  expected(error e) : v_(std::move(e)) {}

  explicit operator bool() const noexcept { return v_.index() == 0; }
  bool has_value() const noexcept { return v_.index() == 0; }

  T& value() & { assert(has_value()); return std::get<0>(v_); }
  const T& value() const& { assert(has_value()); return std::get<0>(v_); }
  T&& value() && { assert(has_value()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const error& err() const { assert(!has_value()); return std::get<1>(v_); }

private:
  std::variant<T, error> v_;
};

inline error make_error(errc code, std::string message) {
  return error{code, std::move(message)};
}

} // namespace banyan
