#pragma once
// Who the members are: their ids (sorted), what we know of each (address, incarnation),
// the incarnations that left (tombstones), and the newcomers we let in recently, who
// hear from us of members and moves for `sponsor_window`.

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "banyan/core/supervisor.hpp"
#include "member_table.hpp"

namespace banyan::sup {

struct parts;

class membership {
public:
  explicit membership(parts& s) : s_(s) {}

  bool is_member(proc_id p) const { return p < is_member_.size() && is_member_[p]; }
  const std::vector<proc_id>& list() const noexcept { return table_.ids(); }
  std::size_t size() const noexcept { return table_.size(); }
  /// Empty when p is not a member.
  std::optional<wire::member> info(proc_id p) const;
  /// Ours: id, address, incarnation.
  wire::member& me() noexcept { return me_; }
  const wire::member& me() const noexcept { return me_; }
  /// What we know of every member (and of us), by id.
  const member_table& all_info() const noexcept { return table_; }
  const std::map<proc_id, std::set<std::uint64_t>>& tombstones() const noexcept {
    return tombstones_;
  }
  /// Changes whenever the members' information or the tombstones may have changed: each
  /// change takes a number no membership in this process has had (from 1), so a digest
  /// of the view computed at one version holds as long as the version does
  /// (prober::view_digest_now).
  std::uint64_t version() const noexcept { return version_; }
  /// Whether an incarnation of p ever left (p was a member before).
  bool has_left_before(proc_id p) const { return tombstones_.count(p) > 0; }
  /// No member, and its last incarnation we knew as a member departed by crash
  /// (supervisor::buried).
  bool buried(proc_id p) const { return !is_member(p) && buried_.count(p) != 0; }

  /// How a departure came to us.
  enum class departure : std::uint8_t {
    graceful, ///< the leaver's own `member_left`, or a relay of it
    crash,    ///< our verdict, or a crash notice (`member_left` with `crashed`)
    hearsay,  ///< a tombstone in a view, or an incarnation replaced by a newer one
  };

  /// Takes note of member m; true when it is news (a member we did not know, or a new
  /// incarnation of one). A tombstoned incarnation is never admitted again. `hearsay`: from
  /// a member list (a view, a join_accept), which may be older than what we know: it
  /// admits members we do not know, never replaces a known incarnation.
  /// `via`: who told us (supervisor's `member_returned` event, should m be buried here).
  bool admit(timestamp now, const wire::member& m, outbox& out, bool hearsay = false,
             proc_id via = no_proc);
  /// Adds m (or updates what we know of it), with its trees (where they are to exist:
  /// tree_set::wanted).
  void add(const wire::member& m);
  /// Creates the two trees rooted at p, with us taking part.
  void open_trees(proc_id p);
  /// Incarnation `inc` of `who` left: tombstone it, and forget it if it is the one we
  /// know (its vnodes become orphans, see crash_watch). Forgotten `why` = crash, it is
  /// buried (a `member_buried` event); a graceful departure of the incarnation buried
  /// lifts the burial (the leaver said it left). Returns whether this was news.
  bool depart(timestamp now, proc_id who, std::uint64_t inc, departure why, outbox& out);
  /// Incarnation `inc` of p, buried here, left gracefully (its own notice came after a
  /// crash notice about it): it is no longer buried.
  void left_gracefully(proc_id p, std::uint64_t inc);
  /// Incarnation `inc` of p did not leave after all (we were cut off from it): it may be
  /// admitted again, and is no longer buried (a `member_returned` event).
  void exhume(timestamp now, proc_id p, std::uint64_t inc, outbox& out);
  /// The member that adopts the vnodes a crashed processor `dead` left owning: the first
  /// member after `dead` in id order, wrapping around (see supervisor::adopter_of).
  proc_id adopter_of(proc_id dead) const;

  /// Starts relaying news to newcomer n (again).
  void sponsor(proc_id n, timestamp now);
  /// The newcomers still within their `sponsor_window`.
  std::vector<proc_id> sponsored(timestamp now);

  void on(timestamp now, proc_id from, const wire::member_joined& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::member_left& m, outbox& out);

  /// Forgets every member (tombstones and burials are kept: an incarnation that left
  /// never returns).
  void reset();

private:
  /// Drops p and everything every part holds about it.
  void remove(timestamp now, proc_id p, outbox& out);
  /// Reports p's burial (or its end) as a tree_event.
  void report(timestamp now, tree_event::kind what, proc_id p, proc_id via, outbox& out) const;

  parts& s_;
  std::vector<bool> is_member_;
  member_table table_; // every member, with us: its ids are list()
  std::map<proc_id, std::set<std::uint64_t>> tombstones_;
  /// Renewed (`changed`) by every function that writes table_ or tombstones_.
  std::uint64_t version_ = fresh_version();
  static std::uint64_t fresh_version() noexcept;
  void changed() noexcept { version_ = fresh_version(); }
  /// Departed by crash, and not back since: the incarnation buried.
  std::map<proc_id, std::uint64_t> buried_;
  wire::member me_;
  std::vector<std::pair<proc_id, timestamp>> sponsored_;
};

} // namespace banyan::sup
