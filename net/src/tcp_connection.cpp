// tcp_transport's connections: connect and accept, the handshake (schema/handshake.hpp),
// reading, writing from the peers' queues, and closing. Loop thread only.
//
//   initiator (sends)                                   acceptor (receives)
//   connecting --connect ok--> hello                    accept --> hello
//        hello --HelloAck ok--> established             hello --Hello ok--> proof
//   established --refusal--> closing                    proof --HelloAck ok, id free--> established
//                                                       proof --id to check--> claiming
//                                                       claiming --judged--> established / draining
//   any phase --error/EOF/timeout--> closing            hello --wrong version/mode, our id--> draining
//                                                       proof --id in use--> draining
//                                                       draining --answer written--> closing
//
// The record layer and frame decoding are in tcp_records.cpp, id claims (claiming,
// draining with a refusal) in tcp_id_claims.cpp.

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <utility>

#include <sys/ioctl.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "tcp_impl.hpp"

namespace banyan::net {

schema::proof hmac_sha256(std::string_view secret, const std::vector<std::uint8_t>& data) {
  static const unsigned char no_key = 0; // OpenSSL wants a non-null key pointer
  schema::proof out{};
  unsigned len = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&no_key) : secret.data();
  [[maybe_unused]] const unsigned char* r = HMAC(EVP_sha256(), key, static_cast<int>(secret.size()),
                                                 data.data(), data.size(), out.data(), &len);
  assert(r != nullptr && len == out.size());
  return out;
}

namespace detail {

std::optional<schema::nonce> random_nonce() {
  schema::nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    return std::nullopt;
  return n;
}

std::uint64_t random_session() {
  std::uint64_t v = 0;
  while (v == 0) {
    std::uint8_t b[8] = {};
    if (RAND_bytes(b, sizeof b) == 1) {
      for (auto x : b)
        v = v << 8 | x;
    } else {
      int local = 0;
      v = static_cast<std::uint64_t>(clock::now().time_since_epoch().count())
          ^ reinterpret_cast<std::uintptr_t>(&local) * 0x9e3779b97f4a7c15ull;
    }
  }
  return v;
}

bool proofs_equal(const schema::proof& a, const schema::proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

connection* conn_of(const void* handle) {
  return static_cast<connection*>(static_cast<const uv_handle_t*>(handle)->data);
}

uv_stream_t* stream_of(connection* c) {
  return reinterpret_cast<uv_stream_t*>(&c->tcp);
}

std::uint64_t ms_of(duration d) {
  return static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(d).count());
}

void on_timer(uv_timer_t* t) {
  conn_of(t)->owner->on_timeout(conn_of(t));
}

namespace {

void on_handle_close(uv_handle_t* h) {
  conn_of(h)->owner->on_handle_closed(conn_of(h));
}

void on_alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) {
  auto* c = conn_of(h);
  // In the middle of a large frame: receive straight into the buffer its envelope keeps
  // (unless only a little of it is left, which goes with what follows into read_buf).
  c->direct_read = false;
  if (c->opener && c->state == connection::phase::established) {
    if (!c->owner->record_read_buffer(c, buf))
      *buf = uv_buf_init(c->read_buf.data(), static_cast<unsigned>(c->read_buf.size()));
    return;
  }
  if (c->state == connection::phase::established && c->side == connection::role::acceptor) {
    auto [p, n] = c->decoder.direct_buffer();
    if (n >= min_direct_read) {
      c->direct_read = true;
      *buf = uv_buf_init(reinterpret_cast<char*>(p), static_cast<unsigned>(std::min(n, max_direct_read)));
      return;
    }
  }
  *buf = uv_buf_init(c->read_buf.data(), static_cast<unsigned>(c->read_buf.size()));
}

void on_read_cb(uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
  conn_of(s)->owner->on_read(conn_of(s), nread);
}

void on_write_cb(uv_write_t* req, int status) {
  auto* w = static_cast<write_req*>(req->data);
  w->conn->owner->on_write(w, status);
}

std::string version_mismatch(std::uint16_t theirs) {
  return "version mismatch: peer speaks protocol version " + std::to_string(theirs) + ", we speak "
         + std::to_string(schema::protocol_version);
}

std::string mode_mismatch(bool theirs_plain) {
  return theirs_plain
             ? std::string("mode mismatch: the peer sends plaintext frames "
                           "(tcp_config::plaintext, banyan node --plaintext), we encrypt")
             : std::string("mode mismatch: the peer encrypts its frames, we run in "
                           "plaintext mode (tcp_config::plaintext, banyan node --plaintext)");
}

std::uint64_t ms_of_accept(const tcp_config& cfg) {
  return ms_of(std::min(cfg.handshake_timeout, cfg.accept_timeout));
}

// Creates a connection with its TCP handle and timer initialized.
connection* new_connection(tcp_impl* owner, uv_loop_t* loop, connection::role r,
                           std::size_t max_frame) {
  auto* c = new connection(owner, r, max_frame);
  c->serial = ++owner->next_serial_;
  c->decoder.set_sink(owner->payload_sink());
  uv_tcp_init(loop, &c->tcp);
  c->tcp.data = c;
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 2;
  return c;
}

} // namespace

std::string tcp_impl::describe(const connection* c) const {
  if (c->side == connection::role::initiator)
    return "to " + std::to_string(c->peer) + " at " + c->remote;
  std::string s = "from " + c->remote;
  if (c->peer != no_proc)
    s += " (processor " + std::to_string(c->peer) + ")";
  return s;
}

// --- opening ----------------------------------------------------------------------------

void tcp_impl::connect_to(peer_state& p, const sockaddr* addr) {
  auto* c = new_connection(this, &loop_, connection::role::initiator, cfg_.max_frame);
  c->peer = p.id;
  c->remote = p.address;
  c->link = p.queued;
  conns_.insert(c);
  p.out = c;
  uv_tcp_nodelay(&c->tcp, 1);
  c->connect_req.data = c;
  const int r = uv_tcp_connect(&c->connect_req, &c->tcp, addr, [](uv_connect_t* req, int status) {
    auto* cc = static_cast<connection*>(req->data);
    cc->owner->on_connect(cc, status);
  });
  if (r < 0) { // the callback will not run
    c->unreachable = true;
    close_conn(c, transport_event::kind::error, std::string("cannot connect: ") + uv_strerror(r),
               connection_failure::connect_failed);
    return;
  }
  uv_timer_start(&c->timer, on_timer, ms_of(cfg_.connect_timeout), 0);
}

void tcp_impl::on_connect(connection* c, int status) {
  if (c->state != connection::phase::connecting)
    return; // closed meanwhile (status is UV_ECANCELED)
  if (status < 0) {
    c->unreachable = true;
    close_conn(c, transport_event::kind::error,
               std::string("cannot connect: ") + uv_strerror(status),
               connection_failure::connect_failed);
    return;
  }
  const auto n = random_nonce();
  if (!n) {
    close_conn(c, transport_event::kind::error, "no random numbers for a nonce",
               connection_failure::other);
    return;
  }
  c->hello_msg =
      schema::hello{schema::protocol_version, cfg_.self, *n, port_, cfg_.plaintext, session_};
  c->state = connection::phase::hello;
  uv_tcp_keepalive(&c->tcp, 1, 60);
  uv_read_start(stream_of(c), on_alloc, on_read_cb);
  uv_timer_start(&c->timer, on_timer, ms_of(cfg_.handshake_timeout), 0);
  write_raw(c, schema::encode(c->hello_msg), false);
}

void tcp_impl::on_turn() {
  accepts_this_turn_ = 0;
  if (accept_held_ && !shutting_down_) {
    accept_held_ = false;
    on_accept(0);
  }
}

void tcp_impl::on_accept(int status) {
  if (shutting_down_)
    return;
  if (status < 0) {
    count_failure(connection::role::acceptor, connection_failure::io_error);
    transport_event ev{transport_event::kind::error, no_proc,
                       std::string("accept failed: ") + uv_strerror(status)};
    ev.failure = connection_failure::io_error;
    emit(std::move(ev));
    return;
  }
  // A flood of connections must not starve the handshakes under way: at most
  // `max_accepts_per_turn` per turn of the loop. Not accepting leaves the connection with
  // libuv, which stops watching the listener until the next uv_accept (in on_turn).
  if (accepts_this_turn_ >= max_accepts_per_turn) {
    accept_held_ = true;
    return;
  }
  ++accepts_this_turn_;
  auto* c = new_connection(this, &loop_, connection::role::acceptor, cfg_.max_frame);
  conns_.insert(c);
  c->state = connection::phase::hello;
  if (int r = uv_accept(reinterpret_cast<uv_stream_t*>(&listener_), stream_of(c)); r < 0) {
    close_conn(c, transport_event::kind::error, std::string("accept failed: ") + uv_strerror(r),
               connection_failure::io_error);
    return;
  }
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(&c->tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    c->remote = format_address(reinterpret_cast<const sockaddr*>(&ss));
    c->remote_ip = c->remote.substr(0, c->remote.rfind(':'));
  } else {
    c->remote = "unknown address";
  }
  if (!admit_stranger(c))
    return;
  uv_tcp_nodelay(&c->tcp, 1);
  uv_tcp_keepalive(&c->tcp, 1, 60);
  uv_read_start(stream_of(c), on_alloc, on_read_cb);
  uv_timer_start(&c->timer, on_timer, ms_of_accept(cfg_), 0);
}

bool tcp_impl::admit_stranger(connection* c) {
  auto& mine = pending_by_address_[c->remote_ip];
  if (mine.size() >= cfg_.max_pending_per_address) {
    if (mine.empty())
      pending_by_address_.erase(c->remote_ip);
    reject(c, "too many connections in their handshake from " + c->remote_ip + " (at most "
                  + std::to_string(cfg_.max_pending_per_address) + ")",
           connection_failure::stranger_budget);
    return false;
  }
  if (pending_inbound_ >= cfg_.max_pending_inbound) {
    // Full: make room by closing the oldest stranger of the address holding the most,
    // so a newcomer (a member among floods from few addresses) still gets its chance.
    std::list<connection*>* most = nullptr;
    for (auto& [ip, l] : pending_by_address_)
      if (!l.empty() && (most == nullptr || l.size() > most->size()))
        most = &l;
    if (most == nullptr || cfg_.max_pending_inbound == 0) {
      if (mine.empty())
        pending_by_address_.erase(c->remote_ip);
      reject(c, "no handshake slots (max_pending_inbound is 0)", connection_failure::stranger_budget);
      return false;
    }
    reject(most->front(), "closed to make room: " + std::to_string(pending_inbound_)
                              + " connections in their handshake",
           connection_failure::stranger_budget);
  }
  auto& list = pending_by_address_[c->remote_ip]; // `mine` may have gone with an eviction
  c->pending_at = list.insert(list.end(), c);
  c->pending = true;
  ++pending_inbound_;
  return true;
}

void tcp_impl::leave_budget(connection* c) {
  if (!c->pending)
    return;
  c->pending = false;
  --pending_inbound_;
  auto it = pending_by_address_.find(c->remote_ip);
  assert(it != pending_by_address_.end());
  it->second.erase(c->pending_at);
  if (it->second.empty())
    pending_by_address_.erase(it);
}

namespace {
/// Bytes received on the connection's socket and not read yet (0 when unknown).
int unread_bytes(connection* c) {
  uv_os_fd_t fd{};
  int n = 0;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&c->tcp), &fd) != 0 || ::ioctl(fd, FIONREAD, &n) != 0)
    return 0;
  return n;
}
} // namespace

void tcp_impl::on_timeout(connection* c) {
  switch (c->state) {
  case connection::phase::connecting:
    close_conn(c, transport_event::kind::error,
               "connect timed out after " + std::to_string(ms_of(cfg_.connect_timeout)) + " ms",
               connection_failure::connect_failed);
    break;
  case connection::phase::hello:
  case connection::phase::proof:
    // libuv runs due timers before it polls the sockets, so after our own loop stalled
    // (busy with a burst of frames, or not scheduled: many processes on few cores) this
    // timer fires ahead of an answer that arrived in time and waits unread. Bytes in the
    // socket measure our stall, not the peer's slowness: the handshake gets one more
    // period, and the read that follows in this loop iteration takes them. Assumes one
    // extension suffices (the read comes right after the timers); a stranger that sends
    // a byte at the deadline holds its slot one period longer, no more.
    if (!c->stall_extended && unread_bytes(c) > 0) {
      c->stall_extended = true;
      stats_.handshake_stalls.fetch_add(1, std::memory_order_relaxed);
      uv_timer_start(&c->timer, on_timer,
                     c->side == connection::role::acceptor ? ms_of_accept(cfg_)
                                                           : ms_of(cfg_.handshake_timeout),
                     0);
      break;
    }
    reject(c, "handshake timed out after "
                  + std::to_string(c->side == connection::role::acceptor
                                       ? ms_of_accept(cfg_)
                                       : ms_of(cfg_.handshake_timeout))
                  + " ms",
           connection_failure::handshake_timeout);
    break;
  case connection::phase::draining:
    close_conn(c, transport_event::kind::rejected, "");
    break;
  case connection::phase::claiming:
    // Our connection to the holder's address got no answer in time: nobody holds the id.
    unpark(c);
    judge(c, true);
    break;
  case connection::phase::established:
  case connection::phase::closing:
    break;
  }
}

// --- reading ----------------------------------------------------------------------------

void tcp_impl::on_read(connection* c, ssize_t nread) {
  ++activity_;
  if (nread > 0)
    stats_.bytes_received.fetch_add(static_cast<std::uint64_t>(nread), std::memory_order_relaxed);
  if (c->state == connection::phase::closing || c->state == connection::phase::draining
      || nread == 0)
    return;
  if (nread > 0 && c->direct_read && c->opener) {
    c->direct_read = false; // ciphertext into its place; the tag follows
    c->rec.got += static_cast<std::size_t>(nread);
    return;
  }
  if (nread > 0 && c->direct_read) {
    c->direct_read = false;
    auto frames = c->decoder.commit_direct(static_cast<std::size_t>(nread));
    if (!frames)
      close_conn(c, transport_event::kind::error, frames.err().to_string(),
                 connection_failure::malformed_input);
    else
      on_decoded(c, *frames);
    return;
  }
  c->direct_read = false;
  if (nread > 0) {
    on_bytes(c, reinterpret_cast<const std::uint8_t*>(c->read_buf.data()),
             static_cast<std::size_t>(nread));
    return;
  }
  const std::string why = nread == UV_EOF
                              ? std::string("closed by the peer")
                              : std::string("read failed: ") + uv_strerror(static_cast<int>(nread));
  if (c->state != connection::phase::established)
    reject(c, why + " during the handshake",
           nread == UV_EOF ? connection_failure::handshake_closed : connection_failure::io_error);
  else if (c->side == connection::role::acceptor
           && (c->decoder.buffered() > 0 || c->rec.header_len > 0))
    close_conn(c, transport_event::kind::error,
               why + " in the middle of a frame (" + std::to_string(c->decoder.buffered())
                   + " bytes of it received)",
               connection_failure::closed_mid_frame);
  else
    close_conn(c, transport_event::kind::peer_down, why);
}

void tcp_impl::on_bytes(connection* c, const std::uint8_t* p, std::size_t n) {
  while (n > 0 && (c->state == connection::phase::hello || c->state == connection::phase::proof)) {
    const auto used = c->handshake.feed(p, n);
    if (!used) {
      reject(c, "bad handshake message: " + used.err().message,
             connection_failure::malformed_handshake);
      return;
    }
    p += *used;
    n -= *used;
    if (!c->handshake.complete())
      return;
    if (c->side == connection::role::initiator)
      on_acceptor_ack(c);
    else if (c->state == connection::phase::hello)
      on_hello(c);
    else
      on_initiator_ack(c);
    c->handshake.reset();
  }
  if (n > 0 && c->state == connection::phase::claiming) {
    c->held.insert(c->held.end(), p, p + n); // delivered once the claim is accepted
    return;
  }
  if (n == 0 || c->state != connection::phase::established)
    return; // nothing left, or the connection is going away
  if (c->side == connection::role::initiator) {
    on_refusal(c, p, n);
    return;
  }
  if (c->opener)
    on_records(c, p, n);
  else
    on_frames(c, p, n);
}

// Acceptor: the initiator's Hello.
void tcp_impl::on_hello(connection* c) {
  auto h = schema::decode_hello(c->handshake.body(), c->handshake.body_size());
  if (!h) {
    reject(c, h.err().message, connection_failure::malformed_handshake);
    return;
  }
  c->peer = h->id;
  if (h->version != schema::protocol_version || h->plaintext != cfg_.plaintext) {
    // Answer with our version and mode so the initiator can say what is wrong, then close.
    transport_event ev{transport_event::kind::rejected, c->peer,
                       describe(c) + ": "
                           + (h->version != schema::protocol_version ? version_mismatch(h->version)
                                                                     : mode_mismatch(h->plaintext))};
    ev.failure = h->version != schema::protocol_version ? connection_failure::version_mismatch
                                                         : connection_failure::mode_mismatch;
    count_failure(c->side, ev.failure);
    emit_hostile(c, std::move(ev));
    c->state = connection::phase::draining;
    uv_read_stop(stream_of(c));
    write_raw(c,
              schema::encode(
                  schema::hello_ack{schema::protocol_version, cfg_.self, {}, {}, cfg_.plaintext}),
              true);
    return;
  }
  if (h->id == no_proc) {
    reject(c, "claims processor id " + std::to_string(h->id),
           connection_failure::malformed_handshake);
    return;
  }
  const auto n = random_nonce();
  if (!n) {
    reject(c, "no random numbers for a nonce", connection_failure::other);
    return;
  }
  c->hello_msg = *h;
  c->acceptor_nonce = *n;
  if (h->id == cfg_.self) {
    refuse_id(c, false); // this process holds our id
    return;
  }
  const auto mac = hmac_sha256(cfg_.secret, schema::proof_transcript(schema::proof_role::acceptor,
                                                                     *h, cfg_.self, *n, session_));
  c->state = connection::phase::proof;
  write_raw(c,
            schema::encode(schema::hello_ack{schema::protocol_version, cfg_.self, *n, mac,
                                             cfg_.plaintext, session_}),
            false);
}

// Acceptor: the initiator's proof.
void tcp_impl::on_initiator_ack(connection* c) {
  auto a = schema::decode_hello_ack(c->handshake.body(), c->handshake.body_size());
  if (!a) {
    reject(c, a.err().message, connection_failure::malformed_handshake);
    return;
  }
  if (a->version != schema::protocol_version || a->id != c->peer || !a->mac) {
    reject(c, "malformed HelloAck: version, processor id or proof differ from the Hello",
           connection_failure::malformed_handshake);
    return;
  }
  const auto expected = hmac_sha256(
      cfg_.secret, schema::proof_transcript(schema::proof_role::initiator, c->hello_msg, cfg_.self,
                                            c->acceptor_nonce, session_));
  if (!proofs_equal(expected, *a->mac)) {
    reject(c, "wrong shared secret", connection_failure::wrong_secret);
    return;
  }
  uv_timer_stop(&c->timer);
  leave_budget(c);
  judge(c, false);
}

void tcp_impl::establish_inbound(connection* c) {
  const bool resumed = c->state == connection::phase::claiming;
  uv_timer_stop(&c->timer);
  c->state = connection::phase::established;
  c->up = true;
  stats_.accepted.fetch_add(1, std::memory_order_relaxed);
  if (!cfg_.plaintext)
    c->opener = std::make_unique<record_opener>(
        derive_record_key(cfg_.secret, c->hello_msg, cfg_.self, c->acceptor_nonce,
                          record_direction::initiator_to_acceptor));
  // The peer opened a new connection, so it gave up the old one: close that one now, so
  // nothing read from it later can overtake what arrives here (FIFO per pair).
  if (auto it = inbound_.find(c->peer); it != inbound_.end()) {
    connection* old = it->second;
    inbound_.erase(it);
    close_conn(old, transport_event::kind::peer_down, "replaced by a newer connection");
  }
  inbound_[c->peer] = c;
  emit(transport_event::kind::peer_up, c->peer, describe(c) + ": accepted");
  if (c->hello_msg.listen_port != 0 && !c->remote_ip.empty())
    learn_peer(c->peer, c->remote_ip + ":" + std::to_string(c->hello_msg.listen_port));
  if (!resumed)
    return; // on_bytes goes on with what followed the proof
  auto held = std::move(c->held);
  c->held.clear();
  if (!held.empty()) {
    if (c->opener)
      on_records(c, held.data(), held.size());
    else
      on_frames(c, held.data(), held.size());
  }
  if (c->state == connection::phase::established)
    uv_read_start(stream_of(c), on_alloc, on_read_cb);
}

// Initiator: the acceptor's answer to our Hello.
void tcp_impl::on_acceptor_ack(connection* c) {
  auto a = schema::decode_hello_ack(c->handshake.body(), c->handshake.body_size());
  if (!a) {
    reject(c, a.err().message, connection_failure::malformed_handshake);
    return;
  }
  if (a->version != schema::protocol_version) {
    reject(c, version_mismatch(a->version), connection_failure::version_mismatch);
    return;
  }
  if (a->verdict != schema::refusal::none) {
    // The acceptor runs under our id (it may not be the one we meant: a contact whose id
    // we are learning). Believed only under its proof.
    if (!a->challenge || !a->mac) {
      reject(c, "malformed HelloAck: a refusal without nonce or proof",
             connection_failure::malformed_handshake);
      return;
    }
    const auto expected = hmac_sha256(
        cfg_.secret, schema::proof_transcript(schema::proof_role::acceptor, c->hello_msg, a->id,
                                              *a->challenge, a->session, a->verdict));
    if (!proofs_equal(expected, *a->mac)) {
      reject(c, "wrong shared secret", connection_failure::wrong_secret);
      return;
    }
    c->refused_id = true;
    reject(c, "id " + std::to_string(cfg_.self) + " is in use: processor " + std::to_string(a->id)
                  + " answers at " + c->remote + " (another process runs under this id)",
           connection_failure::id_in_use);
    return;
  }
  if (a->id != c->peer) {
    c->unreachable = true;
    c->reached = a->id;
    reject(c,
           "reached processor " + std::to_string(a->id) + ", expected " + std::to_string(c->peer),
           connection_failure::wrong_processor);
    return;
  }
  if (a->plaintext != cfg_.plaintext) {
    reject(c, mode_mismatch(a->plaintext), connection_failure::mode_mismatch);
    return;
  }
  if (!a->challenge || !a->mac) {
    reject(c, "malformed HelloAck: no nonce or no proof", connection_failure::malformed_handshake);
    return;
  }
  const auto expected =
      hmac_sha256(cfg_.secret, schema::proof_transcript(schema::proof_role::acceptor, c->hello_msg,
                                                        c->peer, *a->challenge, a->session));
  if (!proofs_equal(expected, *a->mac)) {
    reject(c, "wrong shared secret", connection_failure::wrong_secret);
    return;
  }
  c->acceptor_nonce = *a->challenge;
  c->peer_session = a->session;
  const auto mine =
      hmac_sha256(cfg_.secret, schema::proof_transcript(schema::proof_role::initiator, c->hello_msg,
                                                        c->peer, *a->challenge, a->session));
  if (!write_raw(c,
                 schema::encode(schema::hello_ack{
                     schema::protocol_version, cfg_.self, {}, mine, cfg_.plaintext}),
                 false))
    return;
  if (!cfg_.plaintext)
    c->sealer = std::make_unique<record_sealer>(
        derive_record_key(cfg_.secret, c->hello_msg, c->peer, *a->challenge,
                          record_direction::initiator_to_acceptor));
  uv_timer_stop(&c->timer);
  c->state = connection::phase::established;
  c->up = true;
  stats_.opened.fetch_add(1, std::memory_order_relaxed);
  emit(transport_event::kind::peer_up, c->peer, describe(c) + ": connected");
  auto* p = find_peer(c->peer);
  assert(p != nullptr && p->out == c);
  p->backoff = cfg_.backoff_initial;
  pump(c, *p);
  update_direct(*p);
  // The process at the peer's address answered: claims to its id can be judged.
  if (c->state == connection::phase::established)
    settle_claims(c->peer, false);
}

// --- writing ----------------------------------------------------------------------------

bool tcp_impl::write_raw(connection* c, std::vector<std::uint8_t> bytes, bool close_after) {
  auto* w = new write_req;
  w->req.data = w;
  w->conn = c;
  w->close_after = close_after;
  w->bytes = bytes.size();
  w->frames.push_back({std::move(bytes), {}});
  w->bufs.push_back(uv_buf_init(reinterpret_cast<char*>(w->frames[0].head.data()),
                                static_cast<unsigned>(w->frames[0].head.size())));
  w->wire_bytes = w->bytes;
  c->in_flight += w->bytes;
  if (int r = uv_write(&w->req, stream_of(c), w->bufs.data(), 1, on_write_cb); r < 0) {
    c->in_flight -= w->bytes;
    delete w;
    close_conn(c, transport_event::kind::error, std::string("write failed: ") + uv_strerror(r),
               connection_failure::io_error);
    return false;
  }
  return true;
}

void tcp_impl::pump(connection* c, peer_state& p) {
  while (c->state == connection::phase::established && c->in_flight < write_window
         && !p.ready.empty()) {
    auto* w = new write_req;
    w->req.data = w;
    w->conn = c;
    w->counter = p.queued;
    std::size_t taken = 0; // frames in this write
    while (!p.ready.empty() && taken < max_batch_frames) {
      auto& f = p.ready.front();
      if (f.partial_on != 0 && f.partial_on != c->serial) {
        // The rest of a frame begun on an earlier connection: its start never reached
        // the receiver of this one, so it cannot follow here.
        release(p.queued, f.charged());
        p.ready.pop_front();
        continue;
      }
      if (taken > 0 && c->in_flight + w->bytes + f.charged() > write_window
          && (c->sealer == nullptr || c->in_flight + w->bytes >= write_window))
        break;
      ++taken;
      if (c->sealer != nullptr && f.partial_on == 0) {
        if (!seal_frame(c, f, *w))
          break; // the window is full in the middle of this frame
        ++w->whole_frames;
        p.ready.pop_front();
        continue;
      }
      w->bytes += f.charged();
      w->frames.push_back(std::move(f.bytes));
      ++w->whole_frames; // the whole frame, or the rest of one a direct write began
      p.ready.pop_front();
      auto& b = w->frames.back();
      if (!b.head.empty()) // empty: the rest of a frame `send` wrote part of
        w->bufs.push_back(uv_buf_init(reinterpret_cast<char*>(b.head.data()),
                                      static_cast<unsigned>(b.head.size())));
      if (!b.tail.empty()) // libuv only reads it: the cast drops a const it does not need
        w->bufs.push_back(
            uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(b.tail.data())),
                        static_cast<unsigned>(b.tail.size())));
    }
    if (w->bufs.empty()) { // only stale rests were dropped
      delete w;
      continue;
    }
    for (auto& b : w->bufs)
      w->wire_bytes += b.len;
    // Count before uv_write: libuv may write synchronously (the callback still comes later).
    c->in_flight += w->bytes;
    const int r = uv_write(&w->req, stream_of(c), w->bufs.data(),
                           static_cast<unsigned>(w->bufs.size()), on_write_cb);
    if (r < 0) {
      c->in_flight -= w->bytes;
      release(w->counter, w->bytes);
      delete w;
      close_conn(c, transport_event::kind::error, std::string("write failed: ") + uv_strerror(r),
                 connection_failure::io_error);
      return;
    }
  }
}

void tcp_impl::on_write(write_req* w, int status) {
  std::unique_ptr<write_req> own(w);
  connection* c = w->conn;
  c->in_flight -= w->bytes;
  if (status >= 0 && !w->close_after && c->side == connection::role::initiator
      && c->state == connection::phase::established)
    if (auto* p = find_peer(c->peer); p != nullptr && p->out == c) {
      pump(c, *p);
      update_direct(*p); // idle again: senders may write directly
    }
  // Released only now (handed to the kernel, or lost with the connection): a sender that
  // `drain` lets go on finds the direct path open again when the connection is idle.
  release(w->counter, w->bytes);
  if (status >= 0) {
    stats_.bytes_sent.fetch_add(w->wire_bytes, std::memory_order_relaxed);
    stats_.frames_sent.fetch_add(w->whole_frames, std::memory_order_relaxed);
  }
  if (status < 0) {
    if (status != UV_ECANCELED)
      close_conn(c, transport_event::kind::error,
                 std::string("write failed: ") + uv_strerror(status), connection_failure::io_error);
    return;
  }
  if (w->close_after)
    close_conn(c, transport_event::kind::rejected, ""); // the event was reported already
}

// --- closing ----------------------------------------------------------------------------

void tcp_impl::reject(connection* c, const std::string& why, connection_failure f) {
  close_conn(c, transport_event::kind::rejected, why, f);
}

void tcp_impl::count_failure(connection::role side, connection_failure f) {
  if (f == connection_failure::none || shutting_down_)
    return;
  auto& by = side == connection::role::acceptor ? stats_.inbound : stats_.outbound;
  by[static_cast<std::size_t>(f)].fetch_add(1, std::memory_order_relaxed);
}

void tcp_impl::close_conn(connection* c, transport_event::kind kind, const std::string& why,
                          connection_failure f) {
  if (c->state == connection::phase::closing)
    return;
  count_failure(c->side, f);
  const bool was_up = c->up;
  if (c->state == connection::phase::claiming)
    unpark(c);
  c->state = connection::phase::closing;
  c->up = false;
  leave_budget(c);
  uv_timer_stop(&c->timer);
  if (c->link) {
    // Nobody writes to this socket directly any more (the lock waits for one who does).
    std::lock_guard<std::mutex> dl(c->link->direct_mtx);
    if (c->link->serial == c->serial) {
      c->link->fd = -1;
      c->link->sealer = nullptr;
      c->link->serial = 0;
    }
  }
  // A reset drops what the socket still holds (and anything the peer sends on it later
  // is answered with one); a close would deliver it.
  if (!c->reset || uv_tcp_close_reset(&c->tcp, on_handle_close) != 0)
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_close);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), on_handle_close);

  std::string note;
  bool judged_by_it = false; // our connection to the peer's address, made or being made
  if (c->side == connection::role::initiator) {
    auto* p = find_peer(c->peer);
    if (p != nullptr && p->out == c) {
      judged_by_it = true;
      p->out = nullptr;
      // A frame partly written on this connection cannot be finished on another.
      if (!p->ready.empty() && (p->ready.front().sent > 0 || p->ready.front().partial_on != 0)) {
        release(p->queued, p->ready.front().charged());
        p->ready.pop_front();
      }
      // A refused id is no connection that worked: back off as after a failed attempt.
      const duration delay = after_outbound_closed(*p, was_up && !c->refused_id);
      if (!p->ready.empty() || !p->delay_line.empty())
        note = "; retrying in " + std::to_string(ms_of(delay)) + " ms";
    }
  } else if (auto it = inbound_.find(c->peer); it != inbound_.end() && it->second == c) {
    inbound_.erase(it);
  }
  if (shutting_down_)
    return;
  if (!why.empty() && (kind != transport_event::kind::peer_down || was_up)) {
    transport_event ev{kind, c->peer, describe(c) + ": " + why + note};
    ev.failure = f;
    ev.unreachable = c->unreachable;
    ev.reached = c->reached;
    ev.id_in_use = c->refused_id;
    if (c->side == connection::role::acceptor && kind != transport_event::kind::peer_down)
      emit_hostile(c, std::move(ev));
    else
      emit(std::move(ev));
  }
  if (c->unreachable && c->side == connection::role::initiator)
    if (auto* p = find_peer(c->peer); p != nullptr)
      return_frames(*p, c->reached != no_proc
                            ? "processor " + std::to_string(c->reached) + " answers at its address"
                            : "cannot connect");
  if (was_up && kind != transport_event::kind::peer_down)
    emit(transport_event::kind::peer_down, c->peer, describe(c) + ": closed" + note);
  // Our connection to the peer's address never came up: nobody there holds its id.
  if (judged_by_it && !was_up)
    settle_claims(c->peer, true);
}

void tcp_impl::emit_hostile(const connection* c, transport_event ev) {
  ev.hostile = true;
  // A peer hanging up in its handshake is what every join's first step looks like (it
  // learns the contact's id that way): limited apart, so that a join does not hold back
  // the next line about worse input from its address.
  const auto key = ev.failure == connection_failure::handshake_closed ? c->remote_ip + " (closed)"
                                                                      : c->remote_ip;
  const auto held = hostile_log_.admit(key, clock::now());
  if (!held)
    return;
  ev.detail += " (untrusted input";
  if (*held > 0)
    ev.detail += "; " + std::to_string(*held) + " more such line" + (*held == 1 ? "" : "s")
                 + " from " + c->remote_ip + " held back since the last one";
  ev.detail += ")";
  emit(std::move(ev));
}

void tcp_impl::on_handle_closed(connection* c) {
  if (--c->open_handles > 0)
    return;
  conns_.erase(c);
  delete c;
}

} // namespace detail
} // namespace banyan::net
