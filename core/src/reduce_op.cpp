#include "banyan/core/reduce_op.hpp"

#include <algorithm>
#include <string>
#include <type_traits>

namespace banyan {

namespace {

// Integer arithmetic in the unsigned type of the same width: wraps, never undefined.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <class T>
T multiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <class T>
void builtin(reduce_kind k, std::uint8_t* acc, const std::uint8_t* in, std::size_t bytes) {
  switch (k) {
    case reduce_kind::sum:
      return elementwise<T>([](T a, T b) { return add(a, b); })(acc, in, bytes);
    case reduce_kind::product:
      return elementwise<T>([](T a, T b) { return multiply(a, b); })(acc, in, bytes);
    case reduce_kind::min:
      return elementwise<T>([](T a, T b) { return std::min(a, b); })(acc, in, bytes);
    case reduce_kind::max:
      return elementwise<T>([](T a, T b) { return std::max(a, b); })(acc, in, bytes);
    case reduce_kind::user:
      break;
  }
}

} // namespace

const char* to_string(reduce_kind k) {
  switch (k) {
    case reduce_kind::sum: return "sum";
    case reduce_kind::min: return "min";
    case reduce_kind::max: return "max";
    case reduce_kind::product: return "product";
    case reduce_kind::user: return "user";
  }
  return "unknown";
}

const char* to_string(element_type t) {
  switch (t) {
    case element_type::int32: return "int32";
    case element_type::int64: return "int64";
    case element_type::float32: return "float32";
    case element_type::float64: return "float64";
    case element_type::bytes: return "bytes";
  }
  return "unknown";
}

std::size_t element_size(element_type t) {
  switch (t) {
    case element_type::int32: return 4;
    case element_type::int64: return 8;
    case element_type::float32: return 4;
    case element_type::float64: return 8;
    case element_type::bytes: return 1;
  }
  return 1;
}

std::optional<error> reduce_op_table::check(const reduce_op& op, std::size_t bytes) const {
  if (op.kind == reduce_kind::user) {
    if (!has_user(op.user))
      return make_error(errc::not_found, "no user reduction operator " + std::to_string(op.user));
  } else if (op.type == element_type::bytes) {
    return make_error(errc::invalid_argument,
                      std::string("built-in operator ") + to_string(op.kind) +
                        " needs a numeric element type");
  }
  if (bytes % element_size(op.type) != 0)
    return make_error(errc::invalid_argument,
                      std::to_string(bytes) + " bytes is not a whole number of " +
                        to_string(op.type) + " elements");
  return std::nullopt;
}

std::optional<error> reduce_op_table::combine(const reduce_op& op, std::vector<std::uint8_t>& acc,
                                              const std::uint8_t* in, std::size_t bytes) const {
  if (auto e = check(op, bytes))
    return e;
  if (acc.size() != bytes)
    return make_error(errc::invalid_argument, "cannot combine arrays of " +
                                                std::to_string(acc.size()) + " and " +
                                                std::to_string(bytes) + " bytes");
  if (bytes == 0)
    return std::nullopt;
  if (op.kind == reduce_kind::user) {
    user_.at(op.user)(acc.data(), in, bytes);
    return std::nullopt;
  }
  switch (op.type) {
    case element_type::int32: builtin<std::int32_t>(op.kind, acc.data(), in, bytes); break;
    case element_type::int64: builtin<std::int64_t>(op.kind, acc.data(), in, bytes); break;
    case element_type::float32: builtin<float>(op.kind, acc.data(), in, bytes); break;
    case element_type::float64: builtin<double>(op.kind, acc.data(), in, bytes); break;
    case element_type::bytes: break; // rejected by check()
  }
  return std::nullopt;
}

} // namespace banyan
