// tcp_transport's peers on the loop thread: the per-peer state, the queues that hold
// frames for a peer and the link shaping in front of them, and reconnection (address
// resolution, back-off, judging a connection that closed). The public API and the
// loop's commands: tcp_transport.cpp; sockets and the handshake: tcp_connection.cpp.

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "tcp_impl.hpp"

namespace banyan::net {
namespace detail {

peer_state* tcp_impl::find_peer(proc_id id) {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : it->second.get();
}

peer_state& tcp_impl::create_peer(proc_id id, std::string address, counter_ptr counter) {
  auto p = std::make_unique<peer_state>();
  p->id = id;
  p->address = std::move(address);
  p->queued = std::move(counter);
  p->backoff = cfg_.backoff_initial;
  p->retry.init(&loop_, [this, id] {
    if (auto* q = find_peer(id))
      maybe_connect(*q);
  });
  p->shaper.init(&loop_, [this, id] {
    if (auto* q = find_peer(id))
      release_delay_line(*q);
  });
  auto& ref = *p;
  peers_[id] = std::move(p);
  return ref;
}

void tcp_impl::drop_frames(peer_state& p) {
  for (auto* q : {&p.delay_line, &p.ready}) {
    for (auto& f : *q)
      release(p.queued, f.charged());
    q->clear();
  }
}

void tcp_impl::return_frames(peer_state& p, const std::string& why) {
  transport_event ev{transport_event::kind::undeliverable, p.id, {}};
  // `ready` holds the older frames (the delay line feeds it): return them first.
  for (auto* q : {&p.ready, &p.delay_line}) {
    std::deque<out_frame> kept;
    for (auto& f : *q) {
      if (f.keep) {
        release(p.queued, f.charged());
        ev.returned.push_back(std::move(*f.keep));
      } else {
        kept.push_back(std::move(f));
      }
    }
    q->swap(kept);
  }
  if (ev.returned.empty())
    return;
  ev.detail = "to " + std::to_string(p.id) + ": " + std::to_string(ev.returned.size())
              + (ev.returned.size() == 1 ? " frame" : " frames") + " returned: " + why;
  emit(std::move(ev));
}

void tcp_impl::erase_peer(proc_id id, bool settle, bool give_back) {
  auto it = peers_.find(id);
  if (it == peers_.end())
    return;
  auto p = std::move(it->second);
  peers_.erase(it);
  if (!shutting_down_ && give_back)
    return_frames(*p, "processor removed");
  drop_frames(*p);
  connection* out = p->out;
  p->out = nullptr;
  p.reset(); // closes its timers
  if (out != nullptr)
    close_conn(out, transport_event::kind::peer_down, "processor removed");
  if (settle)
    settle_claims(id, false); // no address for it now: claims to its id are free
}

void tcp_impl::reset_conn_from(proc_id id) {
  if (auto it = inbound_.find(id); it != inbound_.end()) {
    it->second->reset = true;
    close_conn(it->second, transport_event::kind::peer_down, "reset: taken for crashed");
  }
}

void tcp_impl::learn_peer(proc_id id, const std::string& address) {
  std::lock_guard<std::mutex> lk(mtx_);
  if (id == cfg_.self || directory_.count(id) != 0 || state_ != run_state::running)
    return;
  auto counter = std::make_shared<byte_counter>();
  directory_[id] = directory_entry{address, counter};
  // Through the command queue, so that it is ordered with add_peer/remove_peer calls.
  command c;
  c.what = command::kind::add_peer;
  c.peer = id;
  c.address = address;
  c.counter = std::move(counter);
  commands_.push_back(std::move(c));
  uv_async_send(&async_);
}

void tcp_impl::enqueue(peer_state& p, out_frame f) {
  const link_shape shape = cfg_.shaper ? cfg_.shaper(p.id) : link_shape{};
  const bool paced = std::isfinite(shape.bandwidth) && shape.bandwidth > 0;
  const bool shaped = paced || shape.delay > duration::zero();
  if (shaped) {
    // The emulated link sends one frame at a time at `bandwidth`, then it travels `delay`.
    const auto start = std::max(f.release, p.link_free);
    const auto tx =
        paced ? std::chrono::duration_cast<clock::duration>(
            std::chrono::duration<double>(static_cast<double>(f.bytes.size()) / shape.bandwidth))
              : clock::duration::zero();
    p.link_free = start + tx;
    f.release = p.link_free + shape.delay;
  }
  if (shaped || !p.delay_line.empty()) {
    // FIFO per pair: a frame never overtakes one ahead of it in the delay line.
    if (!p.delay_line.empty())
      f.release = std::max(f.release, p.delay_line.back().release);
    p.delay_line.push_back(std::move(f));
    if (!p.shaper.active())
      release_delay_line(p);
    if (p.out == nullptr)
      maybe_connect(p); // connect while the frame is "on the wire"
    return;
  }
  p.ready.push_back(std::move(f));
  flush(p);
}

void tcp_impl::release_delay_line(peer_state& p) {
  const auto now = clock::now();
  bool moved = false;
  while (!p.delay_line.empty() && p.delay_line.front().release <= now) {
    p.ready.push_back(std::move(p.delay_line.front()));
    p.delay_line.pop_front();
    moved = true;
  }
  if (!p.delay_line.empty())
    p.shaper.start(p.delay_line.front().release - now);
  if (moved)
    flush(p);
}

void tcp_impl::flush(peer_state& p) {
  if (p.out == nullptr)
    maybe_connect(p);
  else if (p.out->state == connection::phase::established)
    pump(p.out, p);
}

void tcp_impl::update_direct(peer_state& p) {
  const connection* c = p.out;
  int fd = -1;
  if (c != nullptr && c->state == connection::phase::established && c->in_flight == 0
      && p.ready.empty() && p.delay_line.empty() && !cfg_.shaper && !shutting_down_) {
    uv_os_fd_t f = -1;
    if (uv_fileno(reinterpret_cast<const uv_handle_t*>(&c->tcp), &f) == 0)
      fd = f;
  }
  std::lock_guard<std::mutex> dl(p.queued->direct_mtx);
  const bool open = fd >= 0 && p.queued->queued_frames == 0;
  p.queued->fd = open ? fd : -1;
  p.queued->sealer = open ? c->sealer.get() : nullptr;
  p.queued->serial = open ? c->serial : 0;
}

void tcp_impl::maybe_connect(peer_state& p, bool judging) {
  if (shutting_down_ || p.out != nullptr || p.resolving || (p.retry.active() && !judging))
    return;
  if (p.ready.empty() && p.delay_line.empty() && !judging)
    return; // connections are opened on first use
  const auto hp = split_host_port(p.address);
  if (!hp) {
    transport_event ev{transport_event::kind::error, p.id,
                       "to " + std::to_string(p.id) + ": bad address \"" + p.address
                           + "\" (want host:port or [v6]:port)"};
    ev.unreachable = true;
    ev.failure = connection_failure::connect_failed;
    count_failure(connection::role::initiator, ev.failure);
    emit(std::move(ev));
    after_outbound_closed(p, false);
    return_frames(p, "bad address");
    settle_claims(p.id, true);
    return;
  }
  sockaddr_storage addr{};
  if (uv_ip4_addr(hp->first.c_str(), hp->second, reinterpret_cast<sockaddr_in*>(&addr)) == 0
      || uv_ip6_addr(hp->first.c_str(), hp->second, reinterpret_cast<sockaddr_in6*>(&addr)) == 0) {
    connect_to(p, reinterpret_cast<const sockaddr*>(&addr));
    return;
  }
  auto* r = new resolve_req;
  r->owner = this;
  r->peer = p.id;
  r->incarnation = p.queued;
  r->req.data = r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string port = std::to_string(hp->second);
  const int rc = uv_getaddrinfo(
      &loop_, &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        auto* rr = static_cast<resolve_req*>(req->data);
        rr->owner->on_resolved(rr, status, res);
      },
      hp->first.c_str(), port.c_str(), &hints);
  if (rc < 0) {
    delete r;
    transport_event ev{transport_event::kind::error, p.id,
                       "to " + std::to_string(p.id) + " at " + p.address
                           + ": cannot resolve: " + uv_strerror(rc)};
    ev.unreachable = true;
    ev.failure = connection_failure::connect_failed;
    count_failure(connection::role::initiator, ev.failure);
    emit(std::move(ev));
    after_outbound_closed(p, false);
    return_frames(p, "cannot resolve");
    settle_claims(p.id, true);
    return;
  }
  p.resolving = true;
  resolving_.insert(r);
}

void tcp_impl::on_resolved(resolve_req* r, int status, addrinfo* res) {
  std::unique_ptr<resolve_req> own(r);
  resolving_.erase(r);
  peer_state* p = shutting_down_ ? nullptr : find_peer(r->peer);
  if (p != nullptr && p->queued == r->incarnation && p->resolving) {
    p->resolving = false;
    if (status < 0 || res == nullptr) {
      transport_event ev{transport_event::kind::error, p->id,
                         "to " + std::to_string(p->id) + " at " + p->address
                             + ": cannot resolve: " + uv_strerror(status)};
      ev.unreachable = true;
      ev.failure = connection_failure::connect_failed;
      count_failure(connection::role::initiator, ev.failure);
      emit(std::move(ev));
      after_outbound_closed(*p, false);
      return_frames(*p, "cannot resolve");
      settle_claims(p->id, true);
    } else {
      connect_to(*p, res->ai_addr);
    }
  }
  uv_freeaddrinfo(res);
}

duration tcp_impl::after_outbound_closed(peer_state& p, bool was_up) {
  if (shutting_down_)
    return duration::zero();
  duration delay = p.backoff;
  if (was_up) {
    p.backoff = cfg_.backoff_initial; // it worked until now: start over
    delay = p.backoff;
  } else {
    p.backoff = std::min(p.backoff * 2, cfg_.backoff_max);
  }
  // The timer also paces a later first use, so a dead peer is tried at most once per
  // backoff; when it fires with nothing queued, nothing happens.
  p.retry.start(delay);
  return delay;
}

} // namespace detail
} // namespace banyan::net
