#pragma once
// A global operator new that counts every allocation of the program that includes this
// header (in exactly one of its source files: it replaces the global operators). For the
// allocation tests and the engine's CPU benchmark; `allocations_so_far()` reads the count.

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace banyan::test {
inline std::atomic<std::uint64_t> allocation_count{0};
inline std::uint64_t allocations_so_far() {
  return allocation_count.load(std::memory_order_relaxed);
}
} // namespace banyan::test

void* operator new(std::size_t n) {
  banyan::test::allocation_count.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1))
    return p;
  throw std::bad_alloc();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
