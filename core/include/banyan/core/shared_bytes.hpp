#pragma once
/// Immutable bytes shared by reference. A broadcast segment forwarded to many children,
/// or a slice of a long message, costs a pointer and two integers, not a copy: every
/// frame that carries the same bytes points at one buffer, which lives as long as any
/// of them does.
///
///   buffer  [..................................................]
///   slice            [offset, offset + size)

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace banyan {

class shared_bytes {
public:
  /// No bytes.
  shared_bytes() = default;
  /// Takes `bytes` over (no copy).
  explicit shared_bytes(std::vector<std::uint8_t> bytes)
    : shared_bytes(std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes))) {}
  /// Shares `buf` (all of it). Null: no bytes.
  explicit shared_bytes(std::shared_ptr<const std::vector<std::uint8_t>> buf)
    : buf_(buf, buf ? buf->data() : nullptr), size_(buf ? buf->size() : 0) {}
  /// Shares the `n` bytes at `data`, whose owner (e.g. a `buffer_pool` block, which goes
  /// back to the pool when the last slice of it goes) `data` keeps alive.
  shared_bytes(std::shared_ptr<const std::uint8_t> data, std::size_t n)
    : buf_(n ? std::move(data) : nullptr), size_(buf_ ? n : 0) {}
  /// Copies `n` bytes from `p`.
  static shared_bytes copy_of(const std::uint8_t* p, std::size_t n) {
    return shared_bytes(std::vector<std::uint8_t>(p, p + n));
  }

  /// The bytes [offset, offset + n) of these, sharing the buffer. Both must lie within
  /// `size()` (a caller bug otherwise).
  shared_bytes slice(std::size_t offset, std::size_t n) const {
    assert(offset <= size_ && n <= size_ - offset);
    shared_bytes s;
    if (n == 0)
      return s;
    s.buf_ = buf_;
    s.offset_ = offset_ + offset;
    s.size_ = n;
    return s;
  }

  /// Appends `next` when it directly follows these bytes in the same buffer (so a
  /// message cut into slices is whole again without a copy); false, changing nothing,
  /// otherwise. Appending no bytes always succeeds.
  bool extend(const shared_bytes& next) noexcept {
    if (next.size_ == 0)
      return true;
    if (!buf_ || buf_ != next.buf_ || offset_ + size_ != next.offset_)
      return false;
    size_ += next.size_;
    return true;
  }

  const std::uint8_t* data() const noexcept { return buf_ ? buf_.get() + offset_ : nullptr; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const std::uint8_t* begin() const noexcept { return data(); }
  const std::uint8_t* end() const noexcept { return data() + size_; }

  std::vector<std::uint8_t> to_vector() const { return {begin(), end()}; }

  /// Equal contents (wherever they are stored).
  friend bool operator==(const shared_bytes& a, const shared_bytes& b) {
    return a.size_ == b.size_ && (a.size_ == 0 || std::equal(a.begin(), a.end(), b.begin()));
  }
  friend bool operator!=(const shared_bytes& a, const shared_bytes& b) { return !(a == b); }

private:
  std::shared_ptr<const std::uint8_t> buf_; ///< the buffer's first byte, owning the buffer
  std::size_t offset_ = 0;
  std::size_t size_ = 0;
};

} // namespace banyan
