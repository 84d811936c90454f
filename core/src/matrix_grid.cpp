#include "banyan/core/matrix_grid.hpp"

#include <algorithm>
#include <cassert>

#include "banyan/core/routing_table.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

matrix_grid::matrix_grid(std::vector<std::vector<double>> latency, std::uint64_t seed,
                         supervisor_config cfg)
  : seed_(seed), cfg_(cfg), sups_(latency.size()) {
  one_way_.resize(latency.size());
  for (std::size_t a = 0; a < latency.size(); ++a) {
    assert(latency[a].size() == latency.size());
    for (double ms : latency[a])
      one_way_[a].push_back(from_ms(ms));
  }
}

void matrix_grid::start() {
  const auto n = static_cast<proc_id>(sups_.size());
  std::vector<wire::member> members;
  routing_table routes;
  for (proc_id p = 0; p < n; ++p) {
    members.push_back({p, ""});
    routes.assign(vnode_set{p}, p, 0);
  }
  for (proc_id p = 0; p < n; ++p) {
    // The same seeding as the protocol tests' grid, so results can be compared.
    sups_[p] = std::make_unique<supervisor>(p, cfg_, seed_ * 1000003 + p);
    outbox out;
    sups_[p]->found(now_, members, routes, out);
    carry_out(p, out);
  }
}

std::size_t matrix_grid::run(std::size_t limit) {
  std::size_t done = 0;
  while (!queue_.empty() && done < limit) {
    auto ev = queue_.top();
    queue_.pop();
    now_ = ev.at;
    ++done;
    auto& s = sups_[ev.to];
    outbox out;
    if (ev.is_timer) {
      if (s)
        s->on_timer(now_, ev.token, out);
    } else {
      auto it = envelopes_.find(ev.token);
      if (s) {
        s->on_message(now_, it->second.from, it->second.body, out);
        ++delivered_;
      }
      envelopes_.erase(it);
    }
    carry_out(ev.to, out);
  }
  return done;
}

bool matrix_grid::busy() const {
  return std::any_of(sups_.begin(), sups_.end(),
                     [](const auto& s) { return s && s->measuring(); });
}

tree matrix_grid::tree_of(tree_key k) const {
  std::vector<proc_id> parents(sups_.size(), no_proc);
  for (proc_id p = 0; p < sups_.size(); ++p)
    if (sups_[p])
      parents[p] = sups_[p]->parent(k);
  return tree::from_parents(k.root, std::move(parents));
}

std::vector<tree> matrix_grid::trees(tree_kind kind) const {
  std::vector<tree> out;
  for (proc_id r = 0; r < sups_.size(); ++r)
    out.push_back(tree_of({r, kind}));
  return out;
}

void matrix_grid::carry_out(proc_id p, outbox& out) {
  for (auto& e : out.sends) {
    auto at = now_ + one_way_[e.from][e.to];
    auto& last = last_[{e.from, e.to}];
    at = std::max(at, last);
    last = at;
    auto id = next_msg_++;
    auto to = e.to;
    envelopes_.emplace(id, std::move(e));
    queue_.push({at, order_++, to, false, id});
  }
  for (auto& t : out.timers)
    queue_.push({now_ + t.after, order_++, p, true, t.token});
  out.clear();
}

} // namespace banyan
