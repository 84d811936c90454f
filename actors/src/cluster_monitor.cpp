#include "banyan/actors/cluster_monitor.hpp"

#include <algorithm>

namespace banyan::actors {

cluster_monitor::cluster_monitor(std::size_t procs)
  : procs_(procs), live_(procs, false), measuring_(procs, false) {
}

void cluster_monitor::on_event(proc_id who, const tree_event& e) {
  take(who, e);
  if (listener_)
    listener_(who, e);
}

void cluster_monitor::take(proc_id who, const tree_event& e) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (who >= procs_)
    return;
  using k = tree_event::kind;
  switch (e.what) {
    case k::joined:
      live_[who] = true;
      for (auto kind : {tree_kind::latency, tree_kind::bandwidth})
        parents_[{who, kind}].clear(); // no parent yet: the list comes with the first
      break;
    case k::left:
      live_[who] = false;
      if (measuring_[who]) {
        measuring_[who] = false;
        --measuring_count_;
      }
      for (auto kind : {tree_kind::latency, tree_kind::bandwidth})
        parents_.erase({who, kind});
      for (auto& [key, ps] : parents_)
        if (!ps.empty())
          ps[who] = no_proc;
      last_change_ = std::max(last_change_, e.at);
      break;
    case k::parent_changed: {
      auto i = parents_.find(e.tree);
      if (i == parents_.end())
        break; // a tree whose root has left
      if (i->second.empty())
        i->second.assign(procs_, no_proc);
      i->second[who] = e.new_parent;
      last_change_ = std::max(last_change_, e.at);
      ++changes_;
      break;
    }
    case k::join_failed:
      ++join_failures_;
      break;
    case k::cycle_broken:
      ++cycles_;
      break;
    case k::busy:
      if (!measuring_[who]) {
        measuring_[who] = true;
        ++measuring_count_;
      }
      break;
    case k::idle:
      if (measuring_[who]) {
        measuring_[who] = false;
        --measuring_count_;
      }
      break;
    case k::crash_detected:
    case k::adopted:
    case k::disowned:
    case k::gained:
    case k::released:
    case k::member_buried:
    case k::member_returned:
    case k::suspected:
    case k::suspicion_cleared:
      break; // membership and ownership are not the monitor's
  }
}

banyan::tree cluster_monitor::tree_of(tree_key k) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = parents_.find(k);
  if (i == parents_.end() || i->second.empty())
    return banyan::tree{k.root, std::vector<proc_id>(procs_, no_proc)};
  return banyan::tree{k.root, i->second};
}

std::vector<proc_id> cluster_monitor::roots() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<proc_id> result;
  for (auto& [key, ps] : parents_)
    if (key.kind == tree_kind::latency)
      result.push_back(key.root);
  return result;
}

std::vector<bool> cluster_monitor::live() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return live_;
}

std::size_t cluster_monitor::live_count() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::size_t n = 0;
  for (bool b : live_)
    n += b ? 1 : 0;
  return n;
}

std::size_t cluster_monitor::measuring() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return measuring_count_;
}

timestamp cluster_monitor::last_change() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return last_change_;
}

std::uint64_t cluster_monitor::parent_changes() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return changes_;
}

std::uint64_t cluster_monitor::cycles_broken() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return cycles_;
}

std::uint64_t cluster_monitor::join_failures() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return join_failures_;
}

std::size_t cluster_monitor::complete_trees(const std::vector<proc_id>& roots) const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::size_t n = 0;
  for (auto& [key, ps] : parents_) {
    if (!roots.empty() && std::find(roots.begin(), roots.end(), key.root) == roots.end())
      continue;
    bool complete = true;
    for (std::size_t p = 0; p < procs_ && complete; ++p)
      if (live_[p] && p != key.root && (ps.empty() || ps[p] == no_proc))
        complete = false;
    n += complete ? 1 : 0;
  }
  return n;
}

} // namespace banyan::actors
