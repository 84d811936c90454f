// tcp_transport's connections: connect and accept, the handshake (schema/handshake.hpp),
// reading frames, writing from the peers' queues, and closing. Loop thread only.
//
//   initiator (sends)                                   acceptor (receives)
//   connecting --connect ok--> hello                    accept --> hello
//        hello --HelloAck ok--> established             hello --Hello ok--> proof
//                                                       proof --HelloAck ok--> established
//   any phase --error/EOF/timeout--> closing            hello --wrong version--> draining
//                                                       draining --answer written--> closing

#include <cassert>
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

// Creates a connection with its TCP handle and timer initialized.
connection* new_connection(tcp_impl* owner, uv_loop_t* loop, connection::role r,
                           std::size_t max_frame) {
  auto* c = new connection(owner, r, max_frame);
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
    close_conn(c, transport_event::kind::error, std::string("cannot connect: ") + uv_strerror(r));
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
               std::string("cannot connect: ") + uv_strerror(status));
    return;
  }
  const auto n = random_nonce();
  if (!n) {
    close_conn(c, transport_event::kind::error, "no random numbers for a nonce");
    return;
  }
  c->hello_msg = schema::hello{schema::protocol_version, cfg_.self, *n, port_};
  c->state = connection::phase::hello;
  uv_tcp_keepalive(&c->tcp, 1, 60);
  uv_read_start(stream_of(c), on_alloc, on_read_cb);
  uv_timer_start(&c->timer, on_timer, ms_of(cfg_.handshake_timeout), 0);
  write_raw(c, schema::encode(c->hello_msg), false);
}

void tcp_impl::on_accept(int status) {
  if (shutting_down_)
    return;
  if (status < 0) {
    emit(transport_event::kind::error, no_proc,
         std::string("accept failed: ") + uv_strerror(status));
    return;
  }
  auto* c = new_connection(this, &loop_, connection::role::acceptor, cfg_.max_frame);
  conns_.insert(c);
  c->state = connection::phase::hello;
  if (int r = uv_accept(reinterpret_cast<uv_stream_t*>(&listener_), stream_of(c)); r < 0) {
    close_conn(c, transport_event::kind::error, std::string("accept failed: ") + uv_strerror(r));
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
  if (pending_inbound_ >= max_pending_inbound) {
    reject(c, "too many connections in their handshake");
    return;
  }
  ++pending_inbound_;
  c->pending = true;
  uv_tcp_nodelay(&c->tcp, 1);
  uv_tcp_keepalive(&c->tcp, 1, 60);
  uv_read_start(stream_of(c), on_alloc, on_read_cb);
  uv_timer_start(&c->timer, on_timer, ms_of(cfg_.handshake_timeout), 0);
}

void tcp_impl::on_timeout(connection* c) {
  switch (c->state) {
  case connection::phase::connecting:
    close_conn(c, transport_event::kind::error,
               "connect timed out after " + std::to_string(ms_of(cfg_.connect_timeout)) + " ms");
    break;
  case connection::phase::hello:
  case connection::phase::proof:
    reject(c, "handshake timed out after " + std::to_string(ms_of(cfg_.handshake_timeout)) + " ms");
    break;
  case connection::phase::draining:
    close_conn(c, transport_event::kind::rejected, "");
    break;
  case connection::phase::established:
  case connection::phase::closing:
    break;
  }
}

// --- reading ----------------------------------------------------------------------------

void tcp_impl::on_read(connection* c, ssize_t nread) {
  ++activity_;
  if (c->state == connection::phase::closing || c->state == connection::phase::draining
      || nread == 0)
    return;
  if (nread > 0 && c->direct_read) {
    c->direct_read = false;
    auto frames = c->decoder.commit_direct(static_cast<std::size_t>(nread));
    if (!frames)
      close_conn(c, transport_event::kind::error, frames.err().to_string());
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
    reject(c, why + " during the handshake");
  else if (c->side == connection::role::acceptor && c->decoder.buffered() > 0)
    close_conn(c, transport_event::kind::error,
               why + " in the middle of a frame (" + std::to_string(c->decoder.buffered())
                   + " bytes of it received)");
  else
    close_conn(c, transport_event::kind::peer_down, why);
}

void tcp_impl::on_bytes(connection* c, const std::uint8_t* p, std::size_t n) {
  while (n > 0 && (c->state == connection::phase::hello || c->state == connection::phase::proof)) {
    const auto used = c->handshake.feed(p, n);
    if (!used) {
      reject(c, "bad handshake message: " + used.err().message);
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
  if (n == 0 || c->state != connection::phase::established)
    return; // nothing left, or the connection is going away
  if (c->side == connection::role::initiator) {
    close_conn(c, transport_event::kind::error,
               "protocol error: " + std::to_string(n) + " unexpected bytes from the acceptor");
    return;
  }
  on_frames(c, p, n);
}

// Acceptor: the initiator's Hello.
void tcp_impl::on_hello(connection* c) {
  auto h = schema::decode_hello(c->handshake.body(), c->handshake.body_size());
  if (!h) {
    reject(c, h.err().message);
    return;
  }
  c->peer = h->id;
  if (h->version != schema::protocol_version) {
    // Answer with our version so the initiator can say what is wrong, then close.
    emit(transport_event::kind::rejected, c->peer,
         describe(c) + ": " + version_mismatch(h->version));
    c->state = connection::phase::draining;
    uv_read_stop(stream_of(c));
    write_raw(c, schema::encode(schema::hello_ack{schema::protocol_version, cfg_.self, {}, {}}),
              true);
    return;
  }
  if (h->id == no_proc || h->id == cfg_.self) {
    reject(c, "claims processor id " + std::to_string(h->id));
    return;
  }
  const auto n = random_nonce();
  if (!n) {
    reject(c, "no random numbers for a nonce");
    return;
  }
  c->hello_msg = *h;
  c->acceptor_nonce = *n;
  const auto mac = hmac_sha256(
      cfg_.secret, schema::proof_transcript(schema::proof_role::acceptor, *h, cfg_.self, *n));
  c->state = connection::phase::proof;
  write_raw(c, schema::encode(schema::hello_ack{schema::protocol_version, cfg_.self, *n, mac}),
            false);
}

// Acceptor: the initiator's proof.
void tcp_impl::on_initiator_ack(connection* c) {
  auto a = schema::decode_hello_ack(c->handshake.body(), c->handshake.body_size());
  if (!a) {
    reject(c, a.err().message);
    return;
  }
  if (a->version != schema::protocol_version || a->id != c->peer || !a->mac) {
    reject(c, "malformed HelloAck: version, processor id or proof differ from the Hello");
    return;
  }
  const auto expected =
      hmac_sha256(cfg_.secret, schema::proof_transcript(schema::proof_role::initiator, c->hello_msg,
                                                        cfg_.self, c->acceptor_nonce));
  if (!proofs_equal(expected, *a->mac)) {
    reject(c, "wrong shared secret");
    return;
  }
  uv_timer_stop(&c->timer);
  c->state = connection::phase::established;
  c->up = true;
  if (c->pending) {
    c->pending = false;
    --pending_inbound_;
  }
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
}

// Initiator: the acceptor's answer to our Hello.
void tcp_impl::on_acceptor_ack(connection* c) {
  auto a = schema::decode_hello_ack(c->handshake.body(), c->handshake.body_size());
  if (!a) {
    reject(c, a.err().message);
    return;
  }
  if (a->version != schema::protocol_version) {
    reject(c, version_mismatch(a->version));
    return;
  }
  if (a->id != c->peer) {
    c->unreachable = true;
    c->reached = a->id;
    reject(c,
           "reached processor " + std::to_string(a->id) + ", expected " + std::to_string(c->peer));
    return;
  }
  if (!a->challenge || !a->mac) {
    reject(c, "malformed HelloAck: no nonce or no proof");
    return;
  }
  const auto expected =
      hmac_sha256(cfg_.secret, schema::proof_transcript(schema::proof_role::acceptor, c->hello_msg,
                                                        c->peer, *a->challenge));
  if (!proofs_equal(expected, *a->mac)) {
    reject(c, "wrong shared secret");
    return;
  }
  const auto mine =
      hmac_sha256(cfg_.secret, schema::proof_transcript(schema::proof_role::initiator, c->hello_msg,
                                                        c->peer, *a->challenge));
  if (!write_raw(c,
                 schema::encode(schema::hello_ack{schema::protocol_version, cfg_.self, {}, mine}),
                 false))
    return;
  uv_timer_stop(&c->timer);
  c->state = connection::phase::established;
  c->up = true;
  emit(transport_event::kind::peer_up, c->peer, describe(c) + ": connected");
  auto* p = find_peer(c->peer);
  assert(p != nullptr && p->out == c);
  p->backoff = cfg_.backoff_initial;
  pump(c, *p);
  update_direct(*p);
}

// Acceptor: Frames after the handshake.
void tcp_impl::on_frames(connection* c, const std::uint8_t* p, std::size_t n) {
  auto frames = c->decoder.feed_frames(p, n);
  if (!frames) {
    close_conn(c, transport_event::kind::error, frames.err().to_string());
    return;
  }
  on_decoded(c, *frames);
}

void tcp_impl::on_decoded(connection* c, std::vector<schema::frame>& frames) {
  for (auto& f : frames) {
    auto& e = f.envelope;
    if (e.from != c->peer || e.to != cfg_.self) {
      close_conn(c, transport_event::kind::error,
                 "protocol error: frame from " + std::to_string(e.from) + " to "
                     + std::to_string(e.to) + " on this connection");
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
  c->in_flight += w->bytes;
  if (int r = uv_write(&w->req, stream_of(c), w->bufs.data(), 1, on_write_cb); r < 0) {
    c->in_flight -= w->bytes;
    delete w;
    close_conn(c, transport_event::kind::error, std::string("write failed: ") + uv_strerror(r));
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
    while (!p.ready.empty() && w->frames.size() < max_batch_frames) {
      auto& f = p.ready.front();
      if (!w->frames.empty() && c->in_flight + w->bytes + f.bytes.size() > write_window)
        break;
      w->bytes += f.bytes.size();
      w->frames.push_back(std::move(f.bytes));
      p.ready.pop_front();
    }
    for (auto& f : w->frames) {
      if (!f.head.empty()) // empty: the rest of a frame `send` wrote part of
        w->bufs.push_back(uv_buf_init(reinterpret_cast<char*>(f.head.data()),
                                      static_cast<unsigned>(f.head.size())));
      if (!f.tail.empty()) // libuv only reads it: the cast drops a const it does not need
        w->bufs.push_back(uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(f.tail.data())),
                                      static_cast<unsigned>(f.tail.size())));
    }
    // Count before uv_write: libuv may write synchronously (the callback still comes later).
    c->in_flight += w->bytes;
    const int r = uv_write(&w->req, stream_of(c), w->bufs.data(),
                           static_cast<unsigned>(w->bufs.size()), on_write_cb);
    if (r < 0) {
      c->in_flight -= w->bytes;
      release(w->counter, w->bytes);
      delete w;
      close_conn(c, transport_event::kind::error, std::string("write failed: ") + uv_strerror(r));
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
  if (status < 0) {
    if (status != UV_ECANCELED)
      close_conn(c, transport_event::kind::error,
                 std::string("write failed: ") + uv_strerror(status));
    return;
  }
  if (w->close_after)
    close_conn(c, transport_event::kind::rejected, ""); // the event was reported already
}

// --- closing ----------------------------------------------------------------------------

void tcp_impl::reject(connection* c, const std::string& why) {
  close_conn(c, transport_event::kind::rejected, why);
}

void tcp_impl::close_conn(connection* c, transport_event::kind kind, const std::string& why) {
  if (c->state == connection::phase::closing)
    return;
  const bool was_up = c->up;
  c->state = connection::phase::closing;
  c->up = false;
  if (c->pending) {
    c->pending = false;
    --pending_inbound_;
  }
  uv_timer_stop(&c->timer);
  if (c->link) {
    // Nobody writes to this socket directly any more (the lock waits for one who does).
    uv_os_fd_t fd = -1;
    uv_fileno(reinterpret_cast<const uv_handle_t*>(&c->tcp), &fd);
    std::lock_guard<std::mutex> dl(c->link->direct_mtx);
    if (fd >= 0 && c->link->fd == fd)
      c->link->fd = -1;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_close);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), on_handle_close);

  std::string note;
  if (c->side == connection::role::initiator) {
    auto* p = find_peer(c->peer);
    if (p != nullptr && p->out == c) {
      p->out = nullptr;
      const duration delay = after_outbound_closed(*p, was_up);
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
    ev.unreachable = c->unreachable;
    ev.reached = c->reached;
    emit(std::move(ev));
  }
  if (c->unreachable && c->side == connection::role::initiator)
    if (auto* p = find_peer(c->peer); p != nullptr)
      return_frames(*p, c->reached != no_proc
                            ? "processor " + std::to_string(c->reached) + " answers at its address"
                            : "cannot connect");
  if (was_up && kind != transport_event::kind::peer_down)
    emit(transport_event::kind::peer_down, c->peer, describe(c) + ": closed" + note);
}

void tcp_impl::on_handle_closed(connection* c) {
  if (--c->open_handles > 0)
    return;
  conns_.erase(c);
  delete c;
}

} // namespace detail
} // namespace banyan::net
