#include "update_batching.hpp"

#include <map>

#include "supervisor_parts.hpp"

namespace banyan::sup {

void update_batching::make_room(std::size_t slots) {
  if (is_dirty_info_.size() < slots) {
    is_dirty_info_.resize(slots, false);
    is_dirty_subtree_.resize(slots, false);
    is_dirty_summary_.resize(slots, false);
  }
}

void update_batching::mark_info(const tree_state& t) {
  auto i = tree_table::index_of(t.key());
  if (!is_dirty_info_[i]) {
    is_dirty_info_[i] = true;
    dirty_info_.push_back(i);
  }
  mark_summary(t); // our place changed: our own hop's figures may have too
}

void update_batching::mark_subtree(const tree_state& t) {
  auto i = tree_table::index_of(t.key());
  if (!is_dirty_subtree_[i]) {
    is_dirty_subtree_[i] = true;
    dirty_subtree_.push_back(i);
  }
  mark_summary(t);
}

void update_batching::mark_summary(const tree_state& t) {
  if (!s_.decision.subtree_summaries)
    return;
  auto i = tree_table::index_of(t.key());
  if (!is_dirty_summary_[i]) {
    is_dirty_summary_[i] = true;
    dirty_summary_.push_back(i);
  }
}

void update_batching::mark_all_summaries() {
  for (auto& t : s_.trees.all())
    if (t)
      mark_summary(*t);
}

void update_batching::mark_all_subtrees() {
  for (auto& t : s_.trees.all())
    if (t)
      mark_subtree(*t);
}

void update_batching::flush(outbox& out) {
  if (dirty_info_.empty() && dirty_subtree_.empty() && dirty_summary_.empty())
    return;
  if (dirty_info_.empty() && dirty_subtree_.empty()) {
    flush_now(out); // only summaries: their own timer
    return;
  }
  if (s_.cfg.update_delay.count() == 0 || s_.status != supervisor::status::member) {
    flush_now(out);
    return;
  }
  if (!flush_pending_) {
    flush_pending_ = true;
    s_.start_timer(out, s_.cfg.update_delay, timer_token::flush());
  }
}

void update_batching::flush_now(outbox& out) {
  std::map<proc_id, wire::tree_update> updates;
  for (auto i : dirty_info_) {
    is_dirty_info_[i] = false;
    auto t = s_.trees.at(i);
    if (!t || t->children().empty())
      continue;
    auto info = t->info();
    for (auto& [c, vs] : t->children())
      updates[c].trees.push_back(info);
  }
  dirty_info_.clear();
  std::map<proc_id, wire::subtree_update> subtrees;
  for (auto i : dirty_subtree_) {
    is_dirty_subtree_[i] = false;
    auto t = s_.trees.at(i);
    if (!t || t->parent() == no_proc)
      continue;
    auto sub = t->subtree(s_.owners.reported_own());
    if (sub == t->reported())
      continue;
    t->set_reported(sub);
    subtrees[t->parent()].trees.push_back({t->key(), std::move(sub)});
  }
  dirty_subtree_.clear();
  for (auto& [c, m] : updates)
    s_.send(out, c, std::move(m));
  for (auto& [p, m] : subtrees)
    s_.send(out, p, std::move(m));
  if (!dirty_summary_.empty() && !summary_pending_) {
    summary_pending_ = true;
    s_.start_timer(out, summary_interval, timer_token::summary());
  }
}

void update_batching::on_summary_timer(outbox& out) {
  summary_pending_ = false;
  if (s_.status == supervisor::status::member || s_.status == supervisor::status::leaving)
    send_summaries(out);
}

void update_batching::send_summaries(outbox& out) {
  std::map<proc_id, wire::tree_summary> summaries;
  for (auto i : dirty_summary_) {
    is_dirty_summary_[i] = false;
    auto t = s_.trees.at(i);
    if (!t || t->parent() == no_proc)
      continue;
    // A latency tree keeps no sender capacity: the bandwidth tree's stands for the
    // parent's (as in supervisor_view::positions).
    auto b = s_.trees.find({t->key().root, tree_kind::bandwidth});
    auto sum = subtree_summary_of(*t, b ? b->sender_capacity() : 0);
    if (!sum || (t->summary_sent_to() == t->parent()
                 && !differs(t->summary_sent(), *sum, summary_hysteresis)))
      continue;
    t->set_summary_sent(t->parent(), *sum);
    summaries[t->parent()].trees.push_back({t->key(), *sum});
  }
  dirty_summary_.clear();
  for (auto& [p, m] : summaries)
    s_.send(out, p, std::move(m));
}

void update_batching::on_timer(outbox& out) {
  flush_pending_ = false;
  if (s_.status == supervisor::status::member || s_.status == supervisor::status::leaving)
    flush_now(out);
}

void update_batching::reset() {
  dirty_info_.clear();
  dirty_subtree_.clear();
  dirty_summary_.clear();
  is_dirty_info_.clear();
  is_dirty_subtree_.clear();
  is_dirty_summary_.clear();
  flush_pending_ = false;
  summary_pending_ = false;
}

} // namespace banyan::sup
