#pragma once
// What a processor knows of every member, by id: its incarnation and its transport
// address. Every processor holds one for all N members, so it is kept as columns sorted
// by id rather than a node per member: 12 bytes a member (id and incarnation) where
// addresses are empty (emulation), 44 where they are not (TCP), against 88 for a
// `std::map<proc_id, wire::member>` node. A lookup is a binary search over the ids.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "banyan/core/messages.hpp"
#include "banyan/core/types.hpp"

namespace banyan::sup {

class member_table {
public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  member_table() = default;
  /// The members of a map by id (a view written out by hand, as in tests).
  member_table(const std::map<proc_id, wire::member>& ms) { // NOLINT: implicit on purpose
    for (auto& [p, m] : ms)
      set(m);
  }

  std::size_t size() const noexcept { return ids_.size(); }
  bool empty() const noexcept { return ids_.empty(); }
  /// The ids, sorted.
  const std::vector<proc_id>& ids() const noexcept { return ids_; }
  proc_id id(std::size_t i) const { return ids_[i]; }
  std::uint64_t incarnation(std::size_t i) const { return incarnations_[i]; }
  const std::string& address(std::size_t i) const {
    return addresses_.empty() ? no_address() : addresses_[i];
  }
  wire::member member(std::size_t i) const { return {ids_[i], address(i), incarnations_[i]}; }

  /// Where p is, or npos.
  std::size_t find(proc_id p) const {
    auto it = std::lower_bound(ids_.begin(), ids_.end(), p);
    return it != ids_.end() && *it == p ? static_cast<std::size_t>(it - ids_.begin()) : npos;
  }
  bool contains(proc_id p) const { return find(p) != npos; }

  /// Adds m, or replaces what is known of m.id.
  void set(const wire::member& m) {
    auto it = std::lower_bound(ids_.begin(), ids_.end(), m.id);
    auto i = static_cast<std::size_t>(it - ids_.begin());
    if (it == ids_.end() || *it != m.id) {
      ids_.insert(it, m.id);
      incarnations_.insert(incarnations_.begin() + static_cast<std::ptrdiff_t>(i), m.incarnation);
      if (!addresses_.empty())
        addresses_.insert(addresses_.begin() + static_cast<std::ptrdiff_t>(i), std::string{});
    }
    incarnations_[i] = m.incarnation;
    if (!m.address.empty() && addresses_.empty())
      addresses_.resize(ids_.size()); // the first address: the column starts
    if (!addresses_.empty())
      addresses_[i] = m.address;
  }
  void erase(proc_id p) {
    auto i = find(p);
    if (i == npos)
      return;
    const auto at = static_cast<std::ptrdiff_t>(i);
    ids_.erase(ids_.begin() + at);
    incarnations_.erase(incarnations_.begin() + at);
    if (!addresses_.empty())
      addresses_.erase(addresses_.begin() + at);
  }
  void clear() {
    ids_.clear();
    incarnations_.clear();
    addresses_.clear();
  }

private:
  static const std::string& no_address() {
    static const std::string none;
    return none;
  }

  std::vector<proc_id> ids_; // sorted
  std::vector<std::uint64_t> incarnations_;
  std::vector<std::string> addresses_; // empty while every address is empty
};

} // namespace banyan::sup
