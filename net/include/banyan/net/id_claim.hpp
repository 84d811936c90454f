#pragma once
/// One process per processor id: whether an acceptor lets an initiator that proved the
/// cluster's secret use the processor id it claims (docs/transport.md, "One process per
/// id"). A pure rule; the transport supplies what it knows of the process that answers
/// at the address it has for that id.
///
/// The rule: the id belongs to the process that answers at the address this processor has
/// for it (its own, for its own id). A claim by another process (another session) is
/// refused while that process answers there; a claim is accepted when the address is
/// unknown (no member of ours), when the process answering there is the claimant, or when
/// nobody answers there any more (the connection attempt fails: a crashed process's
/// successor may take its id). A claim the transport cannot judge yet waits for its own
/// connection to that address, which it opens if none is under way.

#include <cstdint>

#include "banyan/core/types.hpp"

namespace banyan::net {

/// What the acceptor knows of the process at the address it has for the claimed id.
struct id_holder {
  enum class kind : std::uint8_t {
    none,       ///< no address for the id: no peer of ours
    answered,   ///< our connection to the address is established; `session` answered it
    pending,    ///< a connection to the address is being made
    idle,       ///< an address, and no connection to it now
    unanswered, ///< the connection made to judge this claim failed: nobody holds the id
  } what = kind::none;
  std::uint64_t session = 0; ///< `answered`: the session of the process that answered
};

enum class claim_verdict : std::uint8_t {
  accept,  ///< the connection proceeds
  refuse,  ///< "id N is in use": refused, and closed
  wait,    ///< a connection to the holder's address is under way: judge again after it
  connect, ///< open a connection to the holder's address, then judge again
};

/// An initiator claims processor `id` for the process `session`; this processor is
/// `self`. A claim of `self` is always refused: this process holds that id (a Hello of
/// our own session would be this process connecting to itself, which never happens).
claim_verdict judge_claim(proc_id self, proc_id id, std::uint64_t session, id_holder holder);

const char* to_string(claim_verdict v);

} // namespace banyan::net
