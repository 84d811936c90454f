// tcp_transport's connections: one process per id (id_claim.hpp, docs/transport.md "One
// process per id"). An acceptor judges the id an authenticated initiator claims, holds the
// claim while it asks the address it knows for that id, and refuses a live member's id
// with a signed answer; an initiator reads such a refusal. Loop thread only.

#include <algorithm>
#include <string>

#include "tcp_impl.hpp"

namespace banyan::net {
namespace detail {

// Acceptor: whether the authenticated initiator may use the id it claims (id_claim.hpp).
void tcp_impl::judge(connection* c, bool unanswered) {
  const id_holder holder =
      unanswered ? id_holder{id_holder::kind::unanswered, 0} : holder_of(c->peer);
  switch (judge_claim(cfg_.self, c->peer, c->hello_msg.session, holder)) {
  case claim_verdict::accept:
    establish_inbound(c);
    return;
  case claim_verdict::refuse:
    refuse_id(c, true);
    return;
  case claim_verdict::wait:
  case claim_verdict::connect:
    break;
  }
  // Wait for our connection to the address we have for the id, reading nothing meanwhile;
  // its own timeouts end it, and this timer (the longest it may take) backs them up.
  if (c->state != connection::phase::claiming) {
    c->state = connection::phase::claiming;
    uv_read_stop(stream_of(c));
    uv_timer_start(&c->timer, on_timer,
                   ms_of(cfg_.connect_timeout + cfg_.handshake_timeout) + 1000, 0);
    claims_[c->peer].push_back(c);
  }
  if (auto* p = find_peer(c->peer); p != nullptr && p->out == nullptr && !p->resolving)
    maybe_connect(*p, true); // may judge `c` at once, if the connection cannot even begin
}

id_holder tcp_impl::holder_of(proc_id id) const {
  auto it = peers_.find(id);
  if (it == peers_.end())
    return {id_holder::kind::none, 0};
  const peer_state& p = *it->second;
  if (p.out != nullptr && p.out->up)
    return {id_holder::kind::answered, p.out->peer_session};
  if (p.out != nullptr || p.resolving)
    return {id_holder::kind::pending, 0};
  return {id_holder::kind::idle, 0};
}

void tcp_impl::settle_claims(proc_id id, bool unanswered) {
  if (shutting_down_)
    return;
  auto it = claims_.find(id);
  if (it == claims_.end())
    return;
  auto waiting = std::move(it->second);
  claims_.erase(it);
  for (auto* c : waiting)
    if (c->state == connection::phase::claiming)
      judge(c, unanswered);
}

void tcp_impl::unpark(connection* c) {
  auto it = claims_.find(c->peer);
  if (it == claims_.end())
    return;
  auto& v = it->second;
  v.erase(std::remove(v.begin(), v.end(), c), v.end());
  if (v.empty())
    claims_.erase(it);
}

// Acceptor: "id N is in use". Answered with a HelloAck that says so under our proof (role
// acceptor in the answer to a Hello, role refusal after the initiator's proof), then closed.
void tcp_impl::refuse_id(connection* c, bool after_proof) {
  const auto& h = c->hello_msg;
  const auto role = after_proof ? schema::proof_role::refusal : schema::proof_role::acceptor;
  const auto mac =
      hmac_sha256(cfg_.secret, schema::proof_transcript(role, h, cfg_.self, c->acceptor_nonce,
                                                        session_, schema::refusal::id_in_use));
  schema::hello_ack answer{schema::protocol_version,
                           cfg_.self,
                           after_proof ? std::nullopt : std::optional<schema::nonce>(c->acceptor_nonce),
                           mac,
                           cfg_.plaintext,
                           session_,
                           schema::refusal::id_in_use};
  std::string why = "id " + std::to_string(h.id) + " is in use: ";
  if (h.id == cfg_.self) {
    why += "it is this processor's";
  } else {
    auto* p = find_peer(h.id);
    why += "processor " + std::to_string(h.id) + " answers at "
           + (p != nullptr ? p->address : std::string("its address")) + " as another process";
  }
  uv_timer_stop(&c->timer);
  c->held.clear();
  c->state = connection::phase::draining;
  uv_read_stop(stream_of(c));
  uv_timer_start(&c->timer, on_timer, ms_of(cfg_.handshake_timeout), 0);
  transport_event ev{transport_event::kind::rejected, h.id, describe(c) + ": " + why + " (refused)"};
  ev.failure = connection_failure::id_in_use;
  count_failure(c->side, ev.failure);
  emit_refusal(c, std::move(ev));
  write_raw(c, schema::encode(answer), true);
}

// Initiator, established: the acceptor sends nothing after the handshake but a refusal
// (a further HelloAck, refusal::id_in_use, proof of role refusal).
void tcp_impl::on_refusal(connection* c, const std::uint8_t* p, std::size_t n) {
  while (n > 0 && c->state == connection::phase::established) {
    const auto used = c->handshake.feed(p, n);
    if (!used) {
      close_conn(c, transport_event::kind::error,
                 "protocol error: unexpected bytes from the acceptor (" + used.err().message + ")",
                 connection_failure::malformed_input);
      return;
    }
    p += *used;
    n -= *used;
    if (!c->handshake.complete())
      return;
    auto a = schema::decode_hello_ack(c->handshake.body(), c->handshake.body_size());
    c->handshake.reset();
    if (!a || a->verdict == schema::refusal::none || !a->mac || a->challenge || a->id != c->peer
        || a->session != c->peer_session) {
      close_conn(c, transport_event::kind::error,
                 "protocol error: unexpected message from the acceptor"
                     + (a ? std::string() : " (" + a.err().message + ")"),
                 connection_failure::malformed_input);
      return;
    }
    const auto expected = hmac_sha256(
        cfg_.secret, schema::proof_transcript(schema::proof_role::refusal, c->hello_msg, c->peer,
                                              c->acceptor_nonce, c->peer_session, a->verdict));
    if (!proofs_equal(expected, *a->mac)) {
      close_conn(c, transport_event::kind::error,
                 "protocol error: a refusal without a valid proof from the acceptor",
                 connection_failure::malformed_input);
      return;
    }
    c->refused_id = true;
    close_conn(c, transport_event::kind::rejected,
               "id " + std::to_string(cfg_.self) + " is in use: processor "
                   + std::to_string(c->peer)
                   + " refused it (another process runs under this id)",
               connection_failure::id_in_use);
  }
}

void tcp_impl::emit_refusal(const connection* c, transport_event ev) {
  const std::string key = c->remote_ip + " " + std::to_string(ev.peer);
  const auto held = refusal_log_.admit(key, clock::now());
  if (!held)
    return;
  if (*held > 0)
    ev.detail += "; " + std::to_string(*held) + " more such line" + (*held == 1 ? "" : "s")
                 + " from " + c->remote_ip + " held back since the last one";
  emit(std::move(ev));
}

} // namespace detail
} // namespace banyan::net
