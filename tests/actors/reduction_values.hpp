#pragma once
// Shared by the suites that check reductions, allreduces and barriers end to end: each
// vnode's contribution (small integers, so that sums and products of any type are exact
// or wrap alike), the true result computed directly, and a comparison that allows
// floating-point rounding (the order in which partials meet changes the last bits).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "banyan/core/reduce_op.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan::test {

/// Element i of vnode v in reduction `salt`: a small integer in [-8, 8].
inline long element(vnode_id v, std::size_t i, std::uint64_t salt) {
  return static_cast<long>((v * 31 + i * 7 + salt) % 17) - 8;
}

/// Vnode v's contribution: `count` elements of type T.
template <class T>
std::vector<std::uint8_t> contribution(vnode_id v, std::size_t count, std::uint64_t salt) {
  std::vector<std::uint8_t> b(count * sizeof(T));
  for (std::size_t i = 0; i < count; ++i) {
    T x = static_cast<T>(element(v, i, salt));
    std::memcpy(b.data() + i * sizeof(T), &x, sizeof(T));
  }
  return b;
}

/// The true result over the vnodes of `all`, in increasing order, computed directly
/// (integers wrap, as unsigned).
template <class T>
std::vector<T> truth(reduce_kind k, const vnode_set& all, std::size_t count, std::uint64_t salt) {
  using U = std::conditional_t<std::is_integral_v<T>,
                               std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>,
                               T>;
  std::vector<T> acc(count);
  for (std::size_t i = 0; i < count; ++i) {
    bool first = true;
    U a{};
    all.for_each([&](vnode_id v) {
      const T x = static_cast<T>(element(v, i, salt));
      if (first) {
        a = static_cast<U>(x);
        first = false;
        return;
      }
      switch (k) {
      case reduce_kind::sum: a = static_cast<U>(a + static_cast<U>(x)); break;
      case reduce_kind::product: a = static_cast<U>(a * static_cast<U>(x)); break;
      case reduce_kind::min: a = static_cast<U>(std::min(static_cast<T>(a), x)); break;
      case reduce_kind::max: a = static_cast<U>(std::max(static_cast<T>(a), x)); break;
      default: break;
      }
    });
    acc[i] = static_cast<T>(a);
  }
  return acc;
}

/// The same over vnodes [0, n).
template <class T>
std::vector<T> truth(reduce_kind k, vnode_id n, std::size_t count, std::uint64_t salt) {
  return truth<T>(k, vnode_set::range(0, n), count, salt);
}

/// Whether the bytes `got` hold `want` (floating point within rounding).
template <class Bytes, class T> bool same(const Bytes& got, const std::vector<T>& want) {
  if (got.size() != want.size() * sizeof(T))
    return false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    T x;
    std::memcpy(&x, got.data() + i * sizeof(T), sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      if (std::fabs(x - want[i]) > 1e-5 * std::max<T>(1, std::fabs(want[i])))
        return false;
    } else if (x != want[i]) {
      return false;
    }
  }
  return true;
}

} // namespace banyan::test
