#include "supervisor_parts.hpp"

namespace banyan::sup {

parts::parts(proc_id self_id, supervisor_config config, supervisor_test_hooks test_hooks,
             std::uint64_t seed)
  : self(self_id), cfg(config), hooks(test_hooks), decision(decide(config.rules, config.local_bias)),
    rng(seed), roots(*this), updates(*this), members(*this), paths(*this), owners(*this),
    probes(*this, config.extra_measurements), parents(*this), repairs(*this), seeding(*this),
    watch(*this), suspects(*this), merges(*this), life(*this), background(*this), drift(*this),
    rtts(*this), lease(*this) {}

void parts::send(outbox& out, proc_id to, wire::message m) const {
  out.sends.push_back(wire::envelope{self, to, std::move(m)});
}

void parts::start_timer(outbox& out, duration after, timer_token t) const {
  out.timers.push_back({after, t.encode()});
}

void parts::event(outbox& out, tree_event::kind what, timestamp at, tree_key k,
                  proc_id old_parent, proc_id new_parent) const {
  tree_event e;
  e.what = what;
  e.tree = k;
  e.old_parent = old_parent;
  e.new_parent = new_parent;
  e.at = at;
  out.events.push_back(std::move(e));
}

bool parts::busy() const {
  return probes.measuring() || updates.pending() || seeding.any_waiting() || owners.lending()
         || status == supervisor::status::leaving || status == supervisor::status::joining;
}

} // namespace banyan::sup
