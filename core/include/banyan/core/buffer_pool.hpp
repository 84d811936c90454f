#pragma once
/// Large byte buffers used again instead of freed. A 64 MiB message received into fresh
/// memory page-faults on every page (and the allocator returns it to the kernel when it
/// is freed), every time; a buffer taken from the pool is already resident.
///
///   take(n) --> block (at least n bytes) --> last reference gone --> idle --> take(n)
///
/// A new block is not zeroed: its pages cost memory only once bytes are written to them
/// (for large blocks the allocator maps fresh pages that the kernel provides on first
/// touch). So a peer that announces a long message commits this node's memory only as
/// fast as it actually sends the bytes.
///
/// The blocks go back from whichever thread drops the last reference (a delivered
/// message may be released by the application), so the idle list has a mutex; `take`
/// may be called from any thread too.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "banyan/core/shared_bytes.hpp"

namespace banyan {

/// A writable block of `size` bytes from a `buffer_pool`; copies share it.
struct pooled_block {
  std::shared_ptr<std::uint8_t> bytes;
  std::size_t size = 0;

  std::uint8_t* data() const noexcept { return bytes.get(); }
  /// The bytes [offset, offset + n), read-only, keeping the block alive.
  shared_bytes slice(std::size_t offset, std::size_t n) const {
    return shared_bytes(std::shared_ptr<const std::uint8_t>(bytes), size).slice(offset, n);
  }
};

class buffer_pool {
public:
  /// Keeps at most `max_idle_bytes` of idle blocks; a block that would exceed it is
  /// freed instead.
  explicit buffer_pool(std::size_t max_idle_bytes);

  /// A block of at least `n` bytes: the smallest idle one that fits, with its old
  /// contents, else a new one whose contents are unspecified (not zeroed). It returns to
  /// the pool when the last copy goes, even after the pool itself is gone (then it is
  /// freed).
  pooled_block take(std::size_t n);

  struct stats {
    std::size_t allocated = 0; ///< `take` calls that allocated
    std::size_t reused = 0;    ///< `take` calls served by an idle block
    std::size_t idle_bytes = 0;
  };
  stats counters() const;

private:
  struct idle_block {
    std::unique_ptr<std::uint8_t[]> bytes;
    std::size_t size = 0;
  };
  struct state {
    std::mutex m;
    std::vector<idle_block> idle;
    std::size_t max_idle_bytes = 0;
    bool open = true;
    stats counts;
  };
  static void give_back(const std::shared_ptr<state>& st, std::uint8_t* p, std::size_t n);

  std::shared_ptr<state> st_;

public:
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;
};

} // namespace banyan
