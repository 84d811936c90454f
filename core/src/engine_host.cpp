#include "banyan/core/engine_host.hpp"

#include <algorithm>

namespace banyan {

void engine_host::insert(std::unique_ptr<collective_engine> e, bool follows_view) {
  auto kinds = e->kinds();
  slot fresh{std::move(e), kinds, follows_view};
  auto clashes = [&](const slot& s) {
    return std::any_of(s.kinds.begin(), s.kinds.end(), [&](collective_kind k) {
      return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
    });
  };
  auto first = std::find_if(slots_.begin(), slots_.end(), clashes);
  if (first == slots_.end()) {
    slots_.push_back(std::move(fresh));
    return;
  }
  *first = std::move(fresh);
  // Any other engine that had one of these kinds goes too.
  slots_.erase(std::remove_if(std::next(first), slots_.end(), clashes), slots_.end());
}

void engine_host::remove(collective_kind k) {
  slots_.erase(std::remove_if(slots_.begin(), slots_.end(),
                              [&](const slot& s) {
                                return std::find(s.kinds.begin(), s.kinds.end(), k) !=
                                       s.kinds.end();
                              }),
               slots_.end());
}

collective_engine* engine_host::find(collective_kind k) const {
  if (k == collective_kind::none)
    return nullptr;
  for (auto& s : slots_)
    if (std::find(s.kinds.begin(), s.kinds.end(), k) != s.kinds.end())
      return s.engine.get();
  return nullptr;
}

bool engine_host::on_message(timestamp now, proc_id from, const wire::message& m) {
  auto* e = find(wire::kind_of(m));
  if (!e)
    return false;
  const bool taken = e->on_message(now, from, m);
  carry_out(*e);
  return taken;
}

bool engine_host::on_undeliverable(timestamp now, proc_id to, const wire::message& m) {
  auto* e = find(wire::kind_of(m));
  if (!e)
    return false;
  e->on_undeliverable(now, to, m);
  carry_out(*e);
  return true;
}

bool engine_host::on_timer(timestamp now, collective_kind engine, std::uint64_t token) {
  auto* e = find(engine);
  if (!e)
    return false;
  e->on_timer(now, token);
  carry_out(*e);
  return true;
}

void engine_host::on_view_change(timestamp now, const view_change& change) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    // carry_out may register or remove engines: index, and look the slot up again.
    if (!slots_[i].follows_view)
      continue;
    auto& e = *slots_[i].engine;
    e.on_view_change(now, change);
    carry_out(e);
  }
}

bool engine_host::holding() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const slot& s) { return s.engine->holding(); });
}

bool engine_host::drained(timestamp now, const send_fates& fates) const {
  return std::all_of(slots_.begin(), slots_.end(),
                     [&](const slot& s) { return s.engine->drained(now, fates); });
}

engine_host::send_marks engine_host::frames_sent() const {
  send_marks marks;
  for (auto& s : slots_)
    marks.emplace_back(s.engine.get(), s.engine->frames_sent());
  return marks;
}

bool engine_host::drained_since(timestamp now, const send_marks& marks) const {
  for (auto& s : slots_) {
    std::uint64_t at = 0;
    for (auto& [e, n] : marks)
      if (e == s.engine.get())
        at = n;
    if (!s.engine->drained(now, send_fates::known(at)))
      return false;
  }
  return true;
}

timestamp engine_host::last_send() const {
  timestamp last = timestamp::min() / 2;
  for (auto& s : slots_)
    last = std::max(last, s.engine->last_send());
  return last;
}

} // namespace banyan
