#pragma once
/// Reduction operators: what a reduction computes, element-wise over arrays.
///
/// Built in: sum, min, max and product over int32, int64, float and double arrays in
/// host byte order. Integer sums and products wrap modulo 2^32 / 2^64 (computed unsigned,
/// so overflow is defined and the result does not depend on the order of combination).
/// Floating-point sums and products depend on the order in which partial results meet,
/// as in any tree reduction; the result is exact when every partial sum is representable.
///
/// User operators are registered by number in a `reduce_op_table` that every processor
/// of a computation builds the same way (there is no global registry). A user operator
/// must be associative and commutative: partial results are combined in whatever order
/// the trees deliver them.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "banyan/core/error.hpp"

namespace banyan {

/// Which operation.
enum class reduce_kind : std::uint8_t { sum = 0, min = 1, max = 2, product = 3, user = 4 };

/// The elements of the arrays being reduced.
enum class element_type : std::uint8_t {
  int32 = 0,
  int64 = 1,
  float32 = 2,
  float64 = 3,
  bytes = 4, ///< opaque bytes: user operators only
};

const char* to_string(reduce_kind k);
const char* to_string(element_type t);
/// Bytes per element (1 for `bytes`).
std::size_t element_size(element_type t);

/// A reduction operator as it travels on the wire.
struct reduce_op {
  reduce_kind kind = reduce_kind::sum;
  element_type type = element_type::int32;
  std::uint32_t user = 0; ///< for `reduce_kind::user`: the operator's number in the table
  friend bool operator==(const reduce_op& a, const reduce_op& b) {
    return a.kind == b.kind && a.type == b.type && a.user == b.user;
  }
  friend bool operator!=(const reduce_op& a, const reduce_op& b) { return !(a == b); }
};

/// `acc := acc (+) in`, element-wise; both are `n` bytes long, a multiple of the element
/// size, and need not be aligned.
using combine_fn = std::function<void(std::uint8_t* acc, const std::uint8_t* in, std::size_t n)>;

/// A user operator over elements of T from a binary function `T f(T acc, T in)`.
///
///   table.add(7, elementwise<std::int64_t>([](auto a, auto b) { return a ^ b; }));
template <class T, class F>
combine_fn elementwise(F f) {
  return [f](std::uint8_t* acc, const std::uint8_t* in, std::size_t n) {
    for (std::size_t at = 0; at + sizeof(T) <= n; at += sizeof(T)) {
      T a, b;
      std::memcpy(&a, acc + at, sizeof(T));
      std::memcpy(&b, in + at, sizeof(T));
      const T r = f(a, b);
      std::memcpy(acc + at, &r, sizeof(T));
    }
  };
}

/// The operators a reduction engine knows: the built-in ones, and user operators added
/// by number.
class reduce_op_table {
public:
  /// Registers (or replaces) user operator `id`.
  void add(std::uint32_t id, combine_fn f) { user_[id] = std::move(f); }
  bool has_user(std::uint32_t id) const { return user_.count(id) != 0; }

  /// Whether `op` can combine arrays of `n` bytes: a known operator, a built-in one
  /// over a numeric type, and a whole number of elements.
  std::optional<error> check(const reduce_op& op, std::size_t n) const;

  /// `acc := acc (+) in` over `n` bytes. Errors (nothing changed): those of `check`, or
  /// `acc` is not `n` bytes long.
  std::optional<error> combine(const reduce_op& op, std::vector<std::uint8_t>& acc,
                               const std::uint8_t* in, std::size_t n) const;

private:
  std::map<std::uint32_t, combine_fn> user_;
};

} // namespace banyan
