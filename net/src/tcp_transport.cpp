// tcp_transport: the public API, the loop thread's life and the command queue. Peers,
// their queues, link shaping and reconnection: tcp_peers.cpp; sockets and the handshake:
// tcp_connection.cpp.

#include "banyan/net/tcp_transport.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <sys/uio.h>

#include "tcp_impl.hpp"

namespace banyan::net {

const char* to_string(send_status s) {
  switch (s) {
  case send_status::queued:
    return "queued";
  case send_status::backpressure:
    return "backpressure";
  case send_status::unknown_peer:
    return "unknown_peer";
  case send_status::oversized:
    return "oversized";
  case send_status::stopped:
    return "stopped";
  }
  return "unknown";
}

const char* to_string(transport_event::kind k) {
  switch (k) {
  case transport_event::kind::peer_up:
    return "peer_up";
  case transport_event::kind::peer_down:
    return "peer_down";
  case transport_event::kind::rejected:
    return "rejected";
  case transport_event::kind::error:
    return "error";
  case transport_event::kind::undeliverable:
    return "undeliverable";
  }
  return "unknown";
}

const char* to_string(connection_failure f) {
  switch (f) {
  case connection_failure::none:
    return "none";
  case connection_failure::connect_failed:
    return "connect_failed";
  case connection_failure::wrong_processor:
    return "wrong_processor";
  case connection_failure::wrong_secret:
    return "wrong_secret";
  case connection_failure::version_mismatch:
    return "version_mismatch";
  case connection_failure::mode_mismatch:
    return "mode_mismatch";
  case connection_failure::malformed_handshake:
    return "malformed_handshake";
  case connection_failure::handshake_timeout:
    return "handshake_timeout";
  case connection_failure::handshake_closed:
    return "handshake_closed";
  case connection_failure::stranger_budget:
    return "stranger_budget";
  case connection_failure::malformed_input:
    return "malformed_input";
  case connection_failure::closed_mid_frame:
    return "closed_mid_frame";
  case connection_failure::io_error:
    return "io_error";
  case connection_failure::id_in_use:
    return "id_in_use";
  case connection_failure::other:
    return "other";
  }
  return "unknown";
}

std::string to_string(const transport_event& e) {
  return std::string(to_string(e.what)) + ": " + e.detail;
}

// --- tcp_transport: forwards to the implementation --------------------------------------

tcp_transport::tcp_transport(tcp_config cfg, deliver_fn deliver, event_fn events)
    : impl_(std::make_unique<detail::tcp_impl>(std::move(cfg), std::move(deliver),
                                               std::move(events))) {}
tcp_transport::~tcp_transport() = default;
expected<std::uint16_t> tcp_transport::start() {
  return impl_->start();
}
void tcp_transport::add_peer(proc_id id, std::string host_port) {
  impl_->add_peer(id, std::move(host_port));
}
void tcp_transport::remove_peer(proc_id id) {
  impl_->remove_peer(id);
}
void tcp_transport::reset_inbound(proc_id id) {
  impl_->reset_inbound(id);
}
void tcp_transport::drop_peer(proc_id id) {
  impl_->drop_peer(id);
}
send_status tcp_transport::send(wire::envelope e, send_options opt) {
  return impl_->send(std::move(e), opt);
}
std::size_t tcp_transport::queued_bytes(proc_id id) const {
  return impl_->queued_bytes(id);
}
bool tcp_transport::drain(duration timeout) const {
  return impl_->drain(timeout);
}
void tcp_transport::stop() {
  impl_->stop();
}
std::uint16_t tcp_transport::port() const {
  return impl_->port();
}
std::uint64_t tcp_transport::session() const {
  return impl_->session_;
}
bool tcp_transport::post(std::function<void()> fn) {
  return impl_->post(std::move(fn));
}
bool tcp_transport::busy_polling() const {
  return impl_->busy_polling();
}
transport_stats tcp_transport::stats() const {
  return impl_->stats();
}

namespace detail {

namespace {

/// See the SIGPIPE note in tcp_transport.hpp: ignore it unless the program handles it.
void ignore_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

/// Writes as much of `f` as the socket takes now (a non-blocking `writev`); returns the
/// bytes written, 0 when it takes nothing or fails (the loop's write reports the error).
std::size_t write_direct(int fd, const schema::frame_bytes& f) {
  iovec iov[2];
  int n = 0;
  if (!f.head.empty())
    iov[n++] = {const_cast<std::uint8_t*>(f.head.data()), f.head.size()};
  if (!f.tail.empty()) // writev only reads it: the cast drops a const it does not need
    iov[n++] = {const_cast<std::uint8_t*>(f.tail.data()), f.tail.size()};
  ssize_t r;
  do
    r = ::writev(fd, iov, n);
  while (r < 0 && errno == EINTR);
  return r > 0 ? static_cast<std::size_t>(r) : 0;
}

/// What is left of `f` after its first `n` bytes (fewer than its size) were written.
schema::frame_bytes frame_rest(schema::frame_bytes f, std::size_t n) {
  if (n < f.head.size()) {
    f.head.erase(f.head.begin(), f.head.begin() + static_cast<std::ptrdiff_t>(n));
    return f;
  }
  n -= f.head.size();
  f.head.clear();
  f.tail = f.tail.slice(n, f.tail.size() - n);
  return f;
}

std::uint64_t whole_ms(duration d) {
  if (d <= duration::zero())
    return 0;
  return static_cast<std::uint64_t>((d.count() + 999'999) / 1'000'000);
}

} // namespace

// --- small helpers ----------------------------------------------------------------------

std::optional<std::pair<std::string, std::uint16_t>> split_host_port(const std::string& hp) {
  std::string host;
  std::string port;
  if (!hp.empty() && hp.front() == '[') {
    const auto close = hp.find(']');
    if (close == std::string::npos || close + 1 >= hp.size() || hp[close + 1] != ':')
      return std::nullopt;
    host = hp.substr(1, close - 1);
    port = hp.substr(close + 2);
  } else {
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos || hp.find(':') != colon)
      return std::nullopt;
    host = hp.substr(0, colon);
    port = hp.substr(colon + 1);
  }
  unsigned value = 0;
  const auto* end = port.data() + port.size();
  const auto [ptr, ec] = std::from_chars(port.data(), end, value);
  if (host.empty() || port.empty() || ec != std::errc() || ptr != end || value == 0
      || value > 65535)
    return std::nullopt;
  return std::make_pair(host, static_cast<std::uint16_t>(value));
}

std::string format_address(const sockaddr* addr) {
  char ip[64] = {};
  if (addr->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(addr);
    uv_ip6_name(a, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(addr);
  uv_ip4_name(a, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a->sin_port));
}

void loop_timer::init(uv_loop_t* loop, std::function<void()> fn) {
  assert(node_ == nullptr);
  node_ = new node;
  node_->fn = std::move(fn);
  uv_timer_init(loop, &node_->handle);
  node_->handle.data = node_;
}

void loop_timer::start(duration after) {
  assert(node_ != nullptr);
  // The loop's idea of now may lag; refresh it so the timer does not fire early by the lag.
  uv_update_time(node_->handle.loop);
  uv_timer_start(
      &node_->handle, [](uv_timer_t* h) { static_cast<node*>(h->data)->fn(); }, whole_ms(after), 0);
}

void loop_timer::stop() {
  if (node_ != nullptr)
    uv_timer_stop(&node_->handle);
}

bool loop_timer::active() const {
  return node_ != nullptr && uv_is_active(reinterpret_cast<const uv_handle_t*>(&node_->handle));
}

void loop_timer::close() {
  if (node_ == nullptr)
    return;
  uv_timer_stop(&node_->handle);
  node_->fn = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&node_->handle),
           [](uv_handle_t* h) { delete static_cast<node*>(h->data); });
  node_ = nullptr;
}

// --- construction and the public API (any thread) ---------------------------------------

tcp_impl::tcp_impl(tcp_config cfg, tcp_transport::deliver_fn deliver,
                   tcp_transport::event_fn events)
    : cfg_(std::move(cfg)), session_(random_session()), deliver_(std::move(deliver)),
      events_(std::move(events)) {}

tcp_impl::~tcp_impl() {
  stop();
  assert(!thread_.joinable() && "a tcp_transport must not be destroyed from its callbacks");
}

expected<std::uint16_t> tcp_impl::start() {
  {
    std::lock_guard<std::mutex> lk(mtx_);
    if (state_ != run_state::idle)
      return make_error(errc::invalid_argument, "start() called twice or after stop()");
  }
  if (cfg_.self == no_proc)
    return make_error(errc::invalid_argument, "tcp_config::self is not set");
  ignore_sigpipe();
  if (int r = uv_loop_init(&loop_); r < 0)
    return make_error(errc::io_error, std::string("uv_loop_init: ") + uv_strerror(r));
  uv_tcp_init(&loop_, &listener_);
  listener_.data = this;

  const std::string where = cfg_.listen_host + ":" + std::to_string(cfg_.listen_port);
  auto fail = [&](errc code, std::string what) -> expected<std::uint16_t> {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    [[maybe_unused]] const int r = uv_loop_close(&loop_);
    assert(r == 0);
    std::lock_guard<std::mutex> lk(mtx_);
    state_ = run_state::stopped;
    return make_error(code, "cannot listen on " + where + ": " + what);
  };

  sockaddr_storage addr{};
  if (uv_ip4_addr(cfg_.listen_host.c_str(), cfg_.listen_port, reinterpret_cast<sockaddr_in*>(&addr))
          != 0
      && uv_ip6_addr(cfg_.listen_host.c_str(), cfg_.listen_port,
                     reinterpret_cast<sockaddr_in6*>(&addr))
             != 0) {
    // A host name: resolve it synchronously (no callback), once, at start.
    uv_getaddrinfo_t req{};
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (int r = uv_getaddrinfo(&loop_, &req, nullptr, cfg_.listen_host.c_str(), nullptr, &hints);
        r < 0)
      return fail(errc::invalid_argument, uv_strerror(r));
    std::memcpy(&addr, req.addrinfo->ai_addr, req.addrinfo->ai_addrlen);
    uv_freeaddrinfo(req.addrinfo);
    if (addr.ss_family == AF_INET6)
      reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(cfg_.listen_port);
    else
      reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(cfg_.listen_port);
  }
  if (int r = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0); r < 0)
    return fail(errc::io_error, uv_strerror(r));
  if (int r = uv_listen(
          reinterpret_cast<uv_stream_t*>(&listener_), listen_backlog,
          [](uv_stream_t* s, int status) { static_cast<tcp_impl*>(s->data)->on_accept(status); });
      r < 0)
    return fail(errc::io_error, uv_strerror(r));
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  const std::uint16_t port = bound.ss_family == AF_INET6
                                 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                 : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);

  // Each turn of the loop begins with a fresh accept budget (see on_accept).
  uv_prepare_init(&loop_, &turn_);
  turn_.data = this;
  uv_prepare_start(&turn_, [](uv_prepare_t* h) { static_cast<tcp_impl*>(h->data)->on_turn(); });
  uv_unref(reinterpret_cast<uv_handle_t*>(&turn_));
  uv_async_init(&loop_, &async_,
                [](uv_async_t* a) { static_cast<tcp_impl*>(a->data)->on_async(); });
  async_.data = this;

  std::lock_guard<std::mutex> lk(mtx_);
  port_ = port;
  state_ = run_state::running;
  thread_ = std::thread([this] { run_loop(); });
  loop_thread_ = thread_.get_id();
  if (!commands_.empty())
    uv_async_send(&async_);
  return port;
}

void tcp_impl::add_peer(proc_id id, std::string host_port) {
  std::lock_guard<std::mutex> lk(mtx_);
  if (id == no_proc || id == cfg_.self
      || (state_ != run_state::idle && state_ != run_state::running))
    return;
  auto& entry = directory_[id];
  if (!entry.queued)
    entry.queued = std::make_shared<byte_counter>();
  entry.address = host_port;
  command c;
  c.what = command::kind::add_peer;
  c.peer = id;
  c.address = std::move(host_port);
  c.counter = entry.queued;
  commands_.push_back(std::move(c));
  if (state_ == run_state::running)
    uv_async_send(&async_);
}

void tcp_impl::remove_peer(proc_id id) {
  std::lock_guard<std::mutex> lk(mtx_);
  if (directory_.erase(id) == 0 || (state_ != run_state::idle && state_ != run_state::running))
    return;
  command c;
  c.what = command::kind::remove_peer;
  c.peer = id;
  commands_.push_back(std::move(c));
  if (state_ == run_state::running)
    uv_async_send(&async_);
}

void tcp_impl::reset_inbound(proc_id id) {
  std::lock_guard<std::mutex> lk(mtx_);
  if (state_ != run_state::running)
    return;
  command c;
  c.what = command::kind::reset_inbound;
  c.peer = id;
  commands_.push_back(std::move(c));
  uv_async_send(&async_);
}

void tcp_impl::drop_peer(proc_id id) {
  std::lock_guard<std::mutex> lk(mtx_);
  if (directory_.erase(id) == 0 || (state_ != run_state::idle && state_ != run_state::running))
    return;
  command c;
  c.what = command::kind::drop_peer;
  c.peer = id;
  commands_.push_back(std::move(c));
  if (state_ == run_state::running)
    uv_async_send(&async_);
}

send_status tcp_impl::send(wire::envelope e, send_options opt) {
  const auto sent_at = clock::now();
  e.from = cfg_.self;
  const std::size_t size = wire::wire_size(e.body); // == schema::encode(e).size()
  if (e.to == cfg_.self) {
    std::lock_guard<std::mutex> lk(mtx_);
    if (state_ != run_state::running)
      return send_status::stopped;
    const std::size_t held = self_queued_->bytes.load();
    if (held > 0 && held + size > cfg_.max_queue_bytes)
      return send_status::backpressure;
    self_queued_->bytes += size;
    total_queued_ += size;
    command c;
    c.what = command::kind::local;
    c.peer = cfg_.self;
    c.counter = self_queued_;
    c.bytes = size;
    c.returned = opt.returned;
    c.local = std::move(e);
    commands_.push_back(std::move(c));
    uv_async_send(&async_);
    return send_status::queued;
  }
  if (size - schema::frame_prefix_bytes > cfg_.max_frame + 64) // far too large: do not encode
    return send_status::oversized;
  // Encode first, outside the lock, once (a large payload is not copied: the frame
  // refers to it); these bytes are what uv_write sends, and what is charged.
  command c;
  c.what = command::kind::frame;
  c.peer = e.to;
  c.frame.bytes = schema::encode_frame(e, opt.returned);
  c.frame.release = sent_at;
  const std::size_t bytes = c.frame.bytes.size();
  if (bytes - schema::frame_prefix_bytes > cfg_.max_frame)
    return send_status::oversized;

  counter_ptr counter;
  bool on_loop = false;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    if (state_ != run_state::running)
      return send_status::stopped;
    auto it = directory_.find(e.to);
    if (it == directory_.end())
      return send_status::unknown_peer;
    counter = it->second.queued;
    // One frame is always accepted into an empty queue, so a frame larger than the
    // limit can still be sent; memory per peer stays below max(limit, one frame) + limit.
    const std::size_t held = counter->bytes.load();
    if (held > 0 && held + bytes > cfg_.max_queue_bytes)
      return send_status::backpressure;
    counter->bytes += bytes;
    total_queued_ += bytes;
    on_loop = std::this_thread::get_id() == loop_thread_;
  }
  if (opt.return_undeliverable && !opt.returned)
    c.frame.keep = std::move(e);
  c.bytes = bytes;
  c.counter = counter;

  // The direct path: to an idle, established connection with nothing on its way to it,
  // the frame is written from this thread at once (no wake-up of the loop, no turn
  // through libuv). Held until the frame is queued, if it is: nothing may come between
  // a partly written frame and its rest.
  std::unique_lock<std::mutex> dl(counter->direct_mtx);
  if (counter->fd >= 0 && counter->queued_frames == 0 && bytes <= direct_write_max) {
    if (counter->sealer != nullptr) {
      // Encrypted: sealed here, in sending order (the loop is not writing: `fd` is set).
      schema::frame_bytes sealed{seal_whole(*counter->sealer, c.frame.bytes), {}};
      const std::size_t sealed_bytes = sealed.size();
      const std::size_t written = write_direct(counter->fd, sealed);
      stats_.bytes_sent.fetch_add(written, std::memory_order_relaxed);
      if (written == sealed_bytes) {
        dl.unlock();
        stats_.frames_sent.fetch_add(1, std::memory_order_relaxed);
        release(counter, bytes);
        return send_status::queued;
      }
      // Its records are sealed (their numbers used): the rest must follow as they are,
      // on this connection only. Charged from now on: what is left of them.
      counter->fd = -1;
      c.frame.bytes = frame_rest(std::move(sealed), written);
      c.frame.partial_on = counter->serial;
      c.frame.keep.reset(); // part of it may be out: never handed back
      const std::size_t rest = sealed_bytes - written;
      if (rest >= bytes) {
        counter->bytes += rest - bytes;
        total_queued_ += rest - bytes;
      } else {
        release(counter, bytes - rest);
      }
      c.bytes = rest;
    } else {
      const std::size_t written = write_direct(counter->fd, c.frame.bytes);
      stats_.bytes_sent.fetch_add(written, std::memory_order_relaxed);
      if (written == bytes) {
        dl.unlock();
        stats_.frames_sent.fetch_add(1, std::memory_order_relaxed);
        release(counter, bytes); // handed to the kernel
        return send_status::queued;
      }
      // The socket is full (or failing): the loop takes over, with the rest of the frame
      // first. A write error shows again on the loop's write, which closes the connection.
      counter->fd = -1;
      if (written > 0) {
        c.frame.bytes = frame_rest(std::move(c.frame.bytes), written);
        c.frame.partial_on = counter->serial;
        c.frame.keep.reset();
        c.bytes = bytes - written;
        release(counter, written);
      }
    }
  }
  ++counter->queued_frames;

  std::unique_lock<std::mutex> lk(mtx_);
  if (state_ != run_state::running) {
    --counter->queued_frames;
    lk.unlock();
    dl.unlock();
    release(counter, c.bytes);
    return send_status::stopped;
  }
  if (on_loop && commands_.empty()) {
    // From a callback, with nothing queued ahead of it: straight to the peer's queue
    // (and usually the socket), without a turn through the async handle. The events
    // this may cause are deferred (`direct_`).
    lk.unlock();
    dl.unlock();
    direct_ = true;
    process(c);
    direct_ = false;
    return send_status::queued;
  }
  commands_.push_back(std::move(c));
  uv_async_send(&async_);
  return send_status::queued;
}

std::size_t tcp_impl::queued_bytes(proc_id id) const {
  std::lock_guard<std::mutex> lk(mtx_);
  if (id == cfg_.self)
    return self_queued_->bytes.load();
  auto it = directory_.find(id);
  return it == directory_.end() ? 0 : it->second.queued->bytes.load();
}

bool tcp_impl::drain(duration timeout) const {
  std::unique_lock<std::mutex> lk(mtx_);
  drained_.wait_for(lk, timeout, [&] {
    return total_queued_.load() == 0 || state_ == run_state::stopping
           || state_ == run_state::stopped;
  });
  return total_queued_.load() == 0;
}

transport_stats tcp_impl::stats() const {
  transport_stats s;
  s.bytes_sent = stats_.bytes_sent.load(std::memory_order_relaxed);
  s.bytes_received = stats_.bytes_received.load(std::memory_order_relaxed);
  s.frames_sent = stats_.frames_sent.load(std::memory_order_relaxed);
  s.frames_received = stats_.frames_received.load(std::memory_order_relaxed);
  s.connections_opened = stats_.opened.load(std::memory_order_relaxed);
  s.connections_accepted = stats_.accepted.load(std::memory_order_relaxed);
  s.handshake_stalls = stats_.handshake_stalls.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < connection_failure_count; ++i) {
    s.inbound_failures[i] = stats_.inbound[i].load(std::memory_order_relaxed);
    s.outbound_failures[i] = stats_.outbound[i].load(std::memory_order_relaxed);
  }
  return s;
}

std::uint16_t tcp_impl::port() const {
  std::lock_guard<std::mutex> lk(mtx_);
  return port_;
}

bool tcp_impl::post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mtx_);
  if (state_ != run_state::running)
    return false;
  command c;
  c.what = command::kind::call;
  c.fn = std::move(fn);
  commands_.push_back(std::move(c));
  uv_async_send(&async_);
  return true;
}

void tcp_impl::stop() {
  {
    std::lock_guard<std::mutex> lk(mtx_);
    switch (state_) {
    case run_state::idle:
      state_ = run_state::stopped;
      return;
    case run_state::stopped:
      return;
    case run_state::running:
      state_ = run_state::stopping;
      callbacks_on_ = false;
      uv_async_send(&async_); // under the lock: the loop cannot have closed it yet
      drained_.notify_all();
      break;
    case run_state::stopping:
      break;
    }
    if (std::this_thread::get_id() == loop_thread_)
      return; // from a callback: the loop winds down; the destructor joins
  }
  std::lock_guard<std::mutex> jl(join_mtx_);
  if (!thread_.joinable())
    return;
  thread_.join();
  if (int r = uv_loop_close(&loop_); r != 0) {
    // A handle outlived the shutdown: a bug in this file. Say which, then fail loudly.
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
          std::fprintf(stderr, "tcp_transport: handle left open: %s\n",
                       uv_handle_type_name(uv_handle_get_type(h)));
        },
        nullptr);
    std::fprintf(stderr, "tcp_transport: uv_loop_close: %s\n", uv_strerror(r));
    std::abort();
  }
  std::lock_guard<std::mutex> lk(mtx_);
  state_ = run_state::stopped;
}

// --- the loop: commands -----------------------------------------------------------------

void tcp_impl::run_loop() {
  if (cfg_.busy_poll <= duration::zero()) {
    uv_run(&loop_, UV_RUN_DEFAULT);
    return;
  }
  for (;;) {
    // Poll without blocking while something happened within the last `busy_poll`.
    auto last = clock::now();
    for (;;) {
      const auto before = activity_;
      if (uv_run(&loop_, UV_RUN_NOWAIT) == 0)
        return; // no handle left: stopped
      const auto t = clock::now();
      if (activity_ != before)
        last = t;
      else if (t - last >= cfg_.busy_poll)
        break;
      else
        std::this_thread::yield();
    }
    if (uv_run(&loop_, UV_RUN_ONCE) == 0)
      return;
  }
}

void tcp_impl::on_async() {
  ++activity_;
  std::vector<command> batch;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    batch.swap(commands_);
    stopping = state_ != run_state::running;
  }
  if (stopping) {
    for (auto& c : batch)
      release(c.counter, c.bytes);
    begin_shutdown();
    return;
  }
  auto deferred = std::move(deferred_events_);
  deferred_events_.clear();
  for (auto& ev : deferred)
    emit(std::move(ev));
  for (auto& c : batch)
    process(c);
}

void tcp_impl::process(command& c) {
  switch (c.what) {
  case command::kind::add_peer:
    if (auto* p = find_peer(c.peer); p != nullptr && p->queued == c.counter)
      p->address = std::move(c.address);
    else {
      erase_peer(c.peer, false); // a stale incarnation, if any
      create_peer(c.peer, std::move(c.address), std::move(c.counter));
      settle_claims(c.peer, false);
    }
    break;
  case command::kind::remove_peer:
    erase_peer(c.peer);
    break;
  case command::kind::drop_peer:
    erase_peer(c.peer, true, false);
    break;
  case command::kind::reset_inbound:
    reset_conn_from(c.peer);
    break;
  case command::kind::frame: {
    auto* p = find_peer(c.peer);
    if (p == nullptr || p->queued != c.counter) { // removed meanwhile
      {
        std::lock_guard<std::mutex> dl(c.counter->direct_mtx);
        --c.counter->queued_frames;
      }
      release(c.counter, c.bytes);
      if (c.frame.keep) {
        transport_event ev{transport_event::kind::undeliverable, c.peer,
                           "to " + std::to_string(c.peer) + ": 1 frame returned: processor removed"};
        ev.returned.push_back(std::move(*c.frame.keep));
        emit(std::move(ev));
      }
      break;
    }
    enqueue(*p, std::move(c.frame));
    {
      std::lock_guard<std::mutex> dl(c.counter->direct_mtx);
      --c.counter->queued_frames;
    }
    update_direct(*p);
    break;
  }
  case command::kind::local:
    if (c.returned) {
      transport_event ev{transport_event::kind::undeliverable, cfg_.self,
                         "to " + std::to_string(cfg_.self) + ": 1 frame handed back"};
      auto back = std::move(*c.local);
      ev.returned.push_back(std::move(back));
      emit(std::move(ev));
    } else {
      deliver(std::move(*c.local));
    }
    release(c.counter, c.bytes);
    break;
  case command::kind::call:
    if (!shutting_down_ && callbacks_on_)
      c.fn();
    break;
  }
}

// --- the loop: shutdown, accounting, callbacks ------------------------------------------

void tcp_impl::begin_shutdown() {
  if (shutting_down_)
    return;
  shutting_down_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
  for (auto& [id, p] : peers_) {
    drop_frames(*p);
    p->out = nullptr;
    update_direct(*p); // closed: the sockets are about to go
  }
  const std::vector<connection*> open(conns_.begin(), conns_.end());
  for (auto* c : open)
    close_conn(c, transport_event::kind::peer_down, "");
  peers_.clear(); // closes the peers' timers
  for (auto* r : resolving_)
    uv_cancel(reinterpret_cast<uv_req_t*>(&r->req)); // its callback still runs
  uv_close(reinterpret_cast<uv_handle_t*>(&turn_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
}

void tcp_impl::release(const counter_ptr& c, std::size_t n) {
  if (n == 0 || !c)
    return;
  c->bytes -= n;
  if (total_queued_.fetch_sub(n) == n) {
    std::lock_guard<std::mutex> lk(mtx_);
    drained_.notify_all();
  }
}

void tcp_impl::emit(transport_event::kind k, proc_id peer, std::string detail) {
  emit(transport_event{k, peer, std::move(detail)});
}

void tcp_impl::emit(transport_event ev) {
  if (!events_ || shutting_down_ || !callbacks_on_)
    return;
  if (direct_) {
    deferred_events_.push_back(std::move(ev));
    uv_async_send(&async_);
    return;
  }
  events_(ev);
}

void tcp_impl::deliver(wire::envelope&& e) {
  if (!deliver_ || shutting_down_ || !callbacks_on_)
    return;
  deliver_(std::move(e));
}

} // namespace detail
} // namespace banyan::net
