// tcp_transport's connections: connect and accept, the handshake (schema/handshake.hpp),
// reading frames, writing from the peers' queues, and closing. Loop thread only.
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
// Encrypted mode (docs/transport.md, "Security"): once established, the initiator seals
// what it writes into records (record_cipher.hpp) and the acceptor opens them before the
// frame decoder sees a byte. A large payload's records are read straight into the place
// the decoder gives (its own buffer or the payload sink's) and decrypted there.

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <utility>

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

namespace {

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

// Seals what is left of `f` (a frame `send` writes directly: at most direct_write_max
// bytes) into one buffer of records: the head, then the payload.
std::vector<std::uint8_t> seal_whole(record_sealer& s, const schema::frame_bytes& f) {
  const std::size_t n = f.size();
  std::size_t records = 0;
  for (std::size_t part : {f.head.size(), f.tail.size()})
    records += (part + sealed_record - 1) / sealed_record;
  std::vector<std::uint8_t> out(n + records * record_overhead);
  std::uint8_t* o = out.data();
  auto seal_part = [&](const std::uint8_t* p, std::size_t len) {
    while (len > 0) {
      const std::size_t k = std::min(len, sealed_record);
      s.seal(p, k, o);
      o += k + record_overhead;
      p += k;
      len -= k;
    }
  };
  seal_part(f.head.data(), f.head.size());
  seal_part(f.tail.data(), f.tail.size());
  return out;
}

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

void tcp_impl::on_timeout(connection* c) {
  switch (c->state) {
  case connection::phase::connecting:
    close_conn(c, transport_event::kind::error,
               "connect timed out after " + std::to_string(ms_of(cfg_.connect_timeout)) + " ms",
               connection_failure::connect_failed);
    break;
  case connection::phase::hello:
  case connection::phase::proof:
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

// Acceptor: Frames after the handshake.
void tcp_impl::on_frames(connection* c, const std::uint8_t* p, std::size_t n) {
  auto frames = c->decoder.feed_frames(p, n);
  if (!frames) {
    close_conn(c, transport_event::kind::error, frames.err().to_string(),
               connection_failure::malformed_input);
    return;
  }
  on_decoded(c, *frames);
}

// Acceptor, encrypted mode: the record layer between the socket and the frame decoder.
//
//   | len (4, clear) | ciphertext (len) | tag (16) |   -> open -> decoder
//
// A record's ciphertext goes to `staging`, or, when the decoder offers a place for the
// whole record (the rest of a large frame's body, or a payload sink's place), straight
// there; it is decrypted in place, and the decoder sees it only once authenticated.
void tcp_impl::on_records(connection* c, const std::uint8_t* p, std::size_t n) {
  auto& r = c->rec;
  while (n > 0 && c->state == connection::phase::established) {
    if (r.header_len < record_header_bytes) {
      const std::size_t take = std::min(record_header_bytes - r.header_len, n);
      std::memcpy(r.header + r.header_len, p, take);
      r.header_len += take;
      p += take;
      n -= take;
      if (r.header_len == record_header_bytes && !begin_record(c))
        return;
      continue;
    }
    if (r.got < r.len) {
      const std::size_t take = std::min(r.len - r.got, n);
      std::memcpy(r.dest + r.got, p, take);
      r.got += take;
      p += take;
      n -= take;
      continue;
    }
    const std::size_t take = std::min(record_tag_bytes - r.tag_len, n);
    std::memcpy(r.tag + r.tag_len, p, take);
    r.tag_len += take;
    p += take;
    n -= take;
    if (r.tag_len == record_tag_bytes)
      finish_record(c);
  }
}

bool tcp_impl::begin_record(connection* c) {
  auto& r = c->rec;
  const auto len = record_length(r.header);
  if (!len) {
    const std::size_t said = std::size_t{r.header[0]} | std::size_t{r.header[1]} << 8
                             | std::size_t{r.header[2]} << 16 | std::size_t{r.header[3]} << 24;
    close_conn(c, transport_event::kind::error,
               "bad record: length " + std::to_string(said) + " (1 to " + std::to_string(max_record)
                   + " allowed): not from a processor holding the "
                     "secret, or altered on the way",
               connection_failure::malformed_input);
    return false;
  }
  r.len = *len;
  r.got = 0;
  r.tag_len = 0;
  const auto [dp, dn] = c->decoder.direct_buffer();
  r.direct = r.len >= min_direct_read && dn >= r.len;
  if (r.direct) {
    r.dest = dp;
  } else {
    if (r.staging_size < r.len) {
      r.staging_size = std::max(r.len, std::size_t{4096});
      r.staging.reset(new std::uint8_t[r.staging_size]);
    }
    r.dest = r.staging.get();
  }
  return true;
}

void tcp_impl::finish_record(connection* c) {
  auto& r = c->rec;
  const bool direct = r.direct;
  const std::size_t len = r.len;
  std::uint8_t* dest = r.dest;
  r.header_len = 0;
  r.exact_tail = direct ? 2 : std::max(r.exact_tail, 1) - 1;
  if (!c->opener->open(r.header, dest, len, r.tag)) {
    close_conn(c, transport_event::kind::error,
               "record " + std::to_string(c->opener->count() - 1)
                   + " failed authentication (forged, altered, replayed or out of order)",
               connection_failure::malformed_input);
    return;
  }
  auto frames = direct ? c->decoder.commit_direct(len) : c->decoder.feed_frames(dest, len);
  if (!frames) {
    close_conn(c, transport_event::kind::error, frames.err().to_string(),
               connection_failure::malformed_input);
    return;
  }
  on_decoded(c, *frames);
}

bool tcp_impl::record_read_buffer(connection* c, uv_buf_t* buf) {
  auto& r = c->rec;
  if (c->side != connection::role::acceptor)
    return false;
  if (r.header_len == record_header_bytes && r.got < r.len) {
    if (!r.direct && r.exact_tail > 0) {
      // A frame's head between two payloads: it, its tag and the next header, no more.
      *buf = uv_buf_init(
          c->read_buf.data(),
          static_cast<unsigned>(std::min(c->read_buf.size(),
                                         r.len - r.got + record_tag_bytes + record_header_bytes)));
      return true;
    }
    if (!r.direct || r.len - r.got < min_direct_read / 4)
      return false;
    c->direct_read = true;
    *buf = uv_buf_init(reinterpret_cast<char*>(r.dest + r.got),
                       static_cast<unsigned>(std::min(r.len - r.got, max_direct_read)));
    return true;
  }
  if ((r.direct || r.exact_tail > 0) && r.header_len == record_header_bytes && r.got == r.len) {
    // The tag of a record read into place, and the next record's header: alone.
    *buf = uv_buf_init(c->read_buf.data(),
                       static_cast<unsigned>(record_tag_bytes - r.tag_len + record_header_bytes));
    return true;
  }
  if (r.exact_tail > 0 && r.header_len < record_header_bytes) {
    *buf =
        uv_buf_init(c->read_buf.data(), static_cast<unsigned>(record_header_bytes - r.header_len));
    return true;
  }
  return false;
}

void tcp_impl::on_decoded(connection* c, std::vector<schema::frame>& frames) {
  for (auto& f : frames) {
    auto& e = f.envelope;
    stats_.frames_received.fetch_add(1, std::memory_order_relaxed);
    if (e.from != c->peer || e.to != cfg_.self) {
      close_conn(c, transport_event::kind::error,
                 "protocol error: frame from " + std::to_string(e.from) + " to "
                     + std::to_string(e.to) + " on this connection",
                 connection_failure::malformed_input);
      return;
    }
    if (f.returned) {
      // Handed back: as we sent it, to the peer that gave it back.
      transport_event ev{transport_event::kind::undeliverable, c->peer,
                         describe(c) + ": 1 frame handed back"};
      ev.returned.push_back(wire::envelope{cfg_.self, c->peer, std::move(e.body)});
      emit(std::move(ev));
      if (c->state == connection::phase::closing)
        return;
      continue;
    }
    deliver(std::move(e));
  }
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

// Records cut at the head/payload boundary, at most max_record each, so that a receiver
// can read a payload's records straight into the payload's place:
//
//   frame:    | prefix + head (owned) |            payload (shared, never modified)            |
//   records:  [ head                  ][ <= 1 MiB ][ <= 1 MiB ] ... sealed while the window has
//   room
//
// The payload is shared (a forwarded broadcast segment), so it is sealed into new buffers,
// not in place; each holds at most a window's worth, so a 64 MiB frame is sealed and
// written 1 MiB at a time and its ciphertext never exists whole.
bool tcp_impl::seal_frame(connection* c, out_frame& f, write_req& w) {
  const std::size_t head = f.bytes.head.size();
  const std::size_t total = f.bytes.size();
  const std::size_t start = f.sent;
  std::size_t end = start;
  std::size_t records = 0;
  while (end < head) {
    end += std::min(sealed_record, head - end);
    ++records;
  }
  while (end < total && (end == start || c->in_flight + w.bytes + (end - start) < write_window)) {
    end += std::min(sealed_record, total - end);
    ++records;
  }
  const std::size_t size = end - start + records * record_overhead;
  std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[size]);
  std::uint8_t* o = buf.get();
  for (std::size_t at = start; at < end;) {
    const bool in_head = at < head;
    const std::size_t k = std::min(sealed_record, (in_head ? head : end) - at);
    const std::uint8_t* src =
        in_head ? f.bytes.head.data() + at : f.bytes.tail.data() + (at - head);
    c->sealer->seal(src, k, o);
    o += k + record_overhead;
    at += k;
  }
  assert(o == buf.get() + size);
  w.bufs.push_back(uv_buf_init(reinterpret_cast<char*>(buf.get()), static_cast<unsigned>(size)));
  w.sealed.emplace_back(std::move(buf), size);
  w.bytes += end - start;
  f.sent = end;
  return end == total;
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

void tcp_impl::on_handle_closed(connection* c) {
  if (--c->open_handles > 0)
    return;
  conns_.erase(c);
  delete c;
}

} // namespace detail
} // namespace banyan::net
