#pragma once
/// Large byte buffers used again instead of freed. A 64 MiB message received into fresh
/// memory page-faults on every page (and the allocator returns it to the kernel when it
/// is freed), every time; a buffer taken from the pool is already resident.
///
///   take(n) --> shared_ptr (at least n bytes) --> last reference gone --> idle --> take(n)
///
/// The buffers go back from whichever thread drops the last reference (a delivered
/// message may be released by the application), so the idle list has a mutex; `take`
/// may be called from any thread too.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace banyan {

class buffer_pool {
public:
  /// Keeps at most `max_idle_bytes` of idle buffers; a buffer that would exceed it is
  /// freed instead.
  explicit buffer_pool(std::size_t max_idle_bytes);

  /// A buffer of at least `n` bytes (the smallest idle one that fits, else a new one of
  /// exactly `n` zero bytes). A reused buffer keeps its old contents. It returns to the
  /// pool when the last copy of the pointer goes, even after the pool itself is gone
  /// (then it is freed).
  std::shared_ptr<std::vector<std::uint8_t>> take(std::size_t n);

  struct stats {
    std::size_t allocated = 0; ///< `take` calls that allocated
    std::size_t reused = 0;    ///< `take` calls served by an idle buffer
    std::size_t idle_bytes = 0;
  };
  stats counters() const;

private:
  struct state {
    std::mutex m;
    std::vector<std::unique_ptr<std::vector<std::uint8_t>>> idle;
    std::size_t max_idle_bytes = 0;
    bool open = true;
    stats counts;
  };
  static void give_back(const std::shared_ptr<state>& st, std::vector<std::uint8_t>* v);

  std::shared_ptr<state> st_;

public:
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;
};

} // namespace banyan
