#pragma once
// Internal: the CAF atoms and message types banyan's actors exchange in-process.
// Local messages only: these types are never serialized by CAF (the wire encoding
// is Cap'n Proto, done by the TCP transport), hence "unsafe" message types.

#include <memory>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "banyan/core/messages.hpp"
#include "banyan/core/network_change.hpp"
#include "banyan/core/routing_table.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan::actors {

using send_atom = caf::atom_constant<caf::atom("bsend")>;
using deliver_atom = caf::atom_constant<caf::atom("bdeliver")>;
using tick_atom = caf::atom_constant<caf::atom("btick")>;
using timer_atom = caf::atom_constant<caf::atom("btimer")>;
/// A collective engine's timer, routed by the engine's kind (core/engine_host.hpp).
using engine_timer_atom = caf::atom_constant<caf::atom("bengtimer")>;
using attach_atom = caf::atom_constant<caf::atom("battach")>;
using detach_atom = caf::atom_constant<caf::atom("bdetach")>;
using found_atom = caf::atom_constant<caf::atom("bfound")>;
using join_atom = caf::atom_constant<caf::atom("bjoin")>;
using leave_atom = caf::atom_constant<caf::atom("bleave")>;
/// Trees on demand: the processor's own trees are to be used (supervisor::prepare).
using prepare_atom = caf::atom_constant<caf::atom("bprepare")>;
using unreachable_atom = caf::atom_constant<caf::atom("bunreach")>;
/// A processor stops at once, as if its process were killed (emulation only).
using crash_atom = caf::atom_constant<caf::atom("bcrash")>;
/// A scheduled change of the emulated network (core/network_change.hpp), sent to it later.
using change_atom = caf::atom_constant<caf::atom("bchange")>;

/// What a founding member starts with.
struct found_args {
  std::vector<wire::member> members;
  routing_table routes;
};
using found_args_ptr = std::shared_ptr<const found_args>;
using envelope_batch = std::vector<wire::envelope>;

} // namespace banyan::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::wire::envelope)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::envelope_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::found_args_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::vnode_set)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::network_change)
