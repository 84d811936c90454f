// metrics_server: the request judge (pure), the response, and the libuv server that reads
// one request per connection, answers it and closes.
//
//   accept --> reading --whole request--> writing --written--> lingering --client's EOF--> closed
//      |          |--bad bytes / too large--^                  (FIN sent; input dropped)
//      |          `--request_timeout-> 408 --^       request_timeout in writing or lingering: closed
//      `--more than max_connections--> 503 (more than twice that: closed at once)

#include "banyan/net/metrics_server.hpp"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <utility>

#include <uv.h>

#include "banyan/net/log_limiter.hpp"

namespace banyan::net {

namespace {

bool tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\r' && c != '\n' && c != '\t') || u == 0x7f;
}

http_verdict refuse(int status, std::string why) {
  return {http_verdict::kind::refuse, status, std::move(why)};
}

/// A complete line without its line end.
std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  return line;
}

/// What is wrong with a request line, if anything (empty: fine). Sets `version_bad` when
/// only the version is unsupported.
std::string check_request_line(std::string_view line, bool& version_bad) {
  version_bad = false;
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return "malformed request line (want METHOD TARGET HTTP/1.x)";
  const auto method = line.substr(0, sp1);
  const auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const auto version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), tchar))
    return "malformed method";
  if (target.empty() || target.front() != '/')
    return "malformed target (want an absolute path)";
  if (version == "HTTP/1.0" || version == "HTTP/1.1")
    return {};
  if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && std::isdigit(static_cast<unsigned char>(version[5]))
      && version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]))) {
    version_bad = true;
    return "HTTP version " + std::string(version.substr(5)) + " not supported";
  }
  return "malformed HTTP version";
}

} // namespace

http_verdict judge_request(std::string_view bytes, std::string_view path, std::size_t max_bytes) {
  // Where the headers end (the first empty line), if they do.
  std::size_t end = std::string_view::npos;
  for (std::size_t at = bytes.find('\n'); at != std::string_view::npos; at = bytes.find('\n', at + 1)) {
    const auto next = at + 1;
    if (next < bytes.size() && bytes[next] == '\n') {
      end = next + 1;
      break;
    }
    if (next + 1 < bytes.size() && bytes[next] == '\r' && bytes[next + 1] == '\n') {
      end = next + 2;
      break;
    }
  }
  const auto head = bytes.substr(0, std::min(bytes.size(), end));
  if ((end == std::string_view::npos && bytes.size() > max_bytes) || (end != std::string_view::npos && end > max_bytes))
    return refuse(431, "request headers larger than " + std::to_string(max_bytes) + " bytes");
  for (std::size_t i = 0; i < head.size(); ++i) {
    if (control(head[i]))
      return refuse(400, "control character in the request");
    if (head[i] == '\r' && i + 1 < head.size() && head[i + 1] != '\n')
      return refuse(400, "bare CR in the request");
  }
  // The request line: refused as soon as its first bytes cannot start one.
  const auto nl = head.find('\n');
  if (nl == std::string_view::npos) {
    if (!head.empty() && !tchar(head.front()))
      return refuse(400, "malformed request line (want METHOD TARGET HTTP/1.x)");
    return {};
  }
  const auto line = strip_cr(head.substr(0, nl));
  bool version_bad = false;
  if (auto why = check_request_line(line, version_bad); !why.empty())
    return refuse(version_bad ? 505 : 400, why);
  // Header lines, as far as they have arrived whole.
  for (std::size_t at = nl + 1; at < head.size();) {
    const auto next = head.find('\n', at);
    if (next == std::string_view::npos)
      break;
    const auto h = strip_cr(head.substr(at, next - at));
    at = next + 1;
    if (h.empty())
      break; // the end of the headers
    const auto colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos
        || !std::all_of(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(colon), tchar))
      return refuse(400, "malformed header line");
  }
  if (end == std::string_view::npos)
    return {};
  const auto sp1 = line.find(' ');
  const auto sp2 = line.find(' ', sp1 + 1);
  const auto method = line.substr(0, sp1);
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (target != path)
    return refuse(404, "no such path: " + std::string(target.substr(0, 200)));
  if (method == "GET")
    return {http_verdict::kind::serve, 200, {}};
  if (method == "HEAD")
    return {http_verdict::kind::serve_head, 200, {}};
  return refuse(405, "method " + std::string(method.substr(0, 32)) + " not allowed");
}

const char* http_status_text(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 431:
    return "Request Header Fields Too Large";
  case 500:
    return "Internal Server Error";
  case 503:
    return "Service Unavailable";
  case 505:
    return "HTTP Version Not Supported";
  default:
    return "Error";
  }
}

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          bool head_only) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + http_status_text(status) + "\r\n";
  r += "Content-Type: " + std::string(content_type) + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (status == 405)
    r += "Allow: GET, HEAD\r\n";
  r += "Connection: close\r\n\r\n";
  if (!head_only)
    r += body;
  return r;
}

// --- the server ----------------------------------------------------------------------------

struct metrics_server::impl {
  /// One client connection, from accept to close.
  struct conn {
    enum class phase { reading, writing, lingering, closing };
    impl* owner = nullptr;
    uv_tcp_t tcp{};
    uv_timer_t timer{};
    uv_write_t wreq{};
    uv_shutdown_t sreq{};
    int handles = 2;
    phase state = phase::reading;
    std::string in;
    std::string out;
    std::string remote = "unknown address"; ///< ip:port
    std::string ip;
    char chunk[4096];
  };

  metrics_server_config cfg;
  render_fn render;
  log_fn log;

  enum class run_state { idle, running, stopped };
  mutable std::mutex mtx; // guards state, port
  run_state state = run_state::idle;
  std::uint16_t port = 0;
  std::mutex join_mtx;
  std::thread thread;

  // --- loop thread only (and `start` before the thread runs) ---
  uv_loop_t loop{};
  uv_tcp_t listener{};
  uv_async_t wake{};
  bool closing = false;
  std::unordered_set<conn*> conns;
  log_limiter limiter;

  impl(metrics_server_config c, render_fn r, log_fn l)
      : cfg(std::move(c)), render(std::move(r)), log(std::move(l)), limiter(cfg.log_interval) {}

  static conn* conn_of(const void* handle) {
    return static_cast<conn*>(static_cast<const uv_handle_t*>(handle)->data);
  }

  void on_accept(int status);
  void start_reading(conn* c);
  void on_read(conn* c, ssize_t nread);
  void on_written(conn* c, int status);
  void answer(conn* c, int status, const std::string& why, bool head_only = false);
  void start_timer(conn* c);
  void on_timer(conn* c);
  void close(conn* c);
  void report(const conn* c, int status, const std::string& why);
  void shut_down();
};

namespace {

std::uint64_t ms_of(duration d) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(d).count()));
}

std::string format_peer(const sockaddr_storage& ss) {
  char ip[64] = {};
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    uv_ip6_name(a, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  uv_ip4_name(a, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a->sin_port));
}

} // namespace

void metrics_server::impl::start_timer(conn* c) {
  uv_timer_start(&c->timer, [](uv_timer_t* t) { conn_of(t)->owner->on_timer(conn_of(t)); },
                 ms_of(cfg.request_timeout), 0);
}

void metrics_server::impl::report(const conn* c, int status, const std::string& why) {
  if (!log)
    return;
  const auto held = limiter.admit(c->ip, std::chrono::steady_clock::now());
  if (!held)
    return;
  std::string line = "metrics: " + std::to_string(status) + " " + http_status_text(status) + " to "
                     + c->remote + ": " + why + " (untrusted input";
  if (*held > 0)
    line += "; " + std::to_string(*held) + " more such line" + (*held == 1 ? "" : "s") + " from "
            + c->ip + " held back since the last one";
  line += ")";
  log(line);
}

void metrics_server::impl::on_accept(int status) {
  if (closing || status < 0)
    return;
  auto* c = new conn;
  c->owner = this;
  uv_tcp_init(&loop, &c->tcp);
  c->tcp.data = c;
  uv_timer_init(&loop, &c->timer);
  c->timer.data = c;
  conns.insert(c);
  if (uv_accept(reinterpret_cast<uv_stream_t*>(&listener), reinterpret_cast<uv_stream_t*>(&c->tcp))
      < 0) {
    close(c);
    return;
  }
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(&c->tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    c->remote = format_peer(ss);
    c->ip = c->remote.substr(0, c->remote.rfind(':'));
  }
  if (conns.size() > 2 * cfg.max_connections) {
    report(c, 503, "more than " + std::to_string(2 * cfg.max_connections)
                       + " connections open: closed without an answer");
    close(c);
    return;
  }
  if (conns.size() > cfg.max_connections) {
    answer(c, 503, "more than " + std::to_string(cfg.max_connections) + " connections open");
    return;
  }
  start_timer(c);
  start_reading(c);
}

void metrics_server::impl::start_reading(conn* c) {
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&c->tcp),
      [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
        auto* cc = conn_of(h);
        *buf = uv_buf_init(cc->chunk, sizeof cc->chunk);
      },
      [](uv_stream_t* s, ssize_t nread, const uv_buf_t*) { conn_of(s)->owner->on_read(conn_of(s), nread); });
}

void metrics_server::impl::on_read(conn* c, ssize_t nread) {
  if (nread < 0 && (c->state == conn::phase::reading || c->state == conn::phase::lingering)) {
    close(c); // gone (before its request was whole: nothing to answer), or done
    return;
  }
  if (c->state != conn::phase::reading || nread == 0)
    return; // lingering: what it still sends is dropped

  // Keep at most what the judge needs to see past the limit.
  const std::size_t room = cfg.max_request_bytes + 4 - std::min(c->in.size(), cfg.max_request_bytes + 4);
  c->in.append(c->chunk, std::min(static_cast<std::size_t>(nread), room));
  const auto v = judge_request(c->in, cfg.path, cfg.max_request_bytes);
  switch (v.what) {
  case http_verdict::kind::incomplete:
    return;
  case http_verdict::kind::serve:
  case http_verdict::kind::serve_head:
    answer(c, 200, {}, v.what == http_verdict::kind::serve_head);
    return;
  case http_verdict::kind::refuse:
    answer(c, v.status, v.reason);
    return;
  }
}

void metrics_server::impl::answer(conn* c, int status, const std::string& why, bool head_only) {
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
  c->state = conn::phase::writing;
  if (status == 200) {
    try {
      c->out = http_response(200, cfg.content_type, render ? render() : std::string(), head_only);
    } catch (const std::exception& e) {
      status = 500;
      const std::string what = std::string("cannot render the metrics: ") + e.what();
      if (log)
        log("metrics: " + what);
      c->out = http_response(500, "text/plain; charset=utf-8", what + "\n");
    }
  } else {
    report(c, status, why);
    c->out = http_response(status, "text/plain; charset=utf-8",
                           std::string(http_status_text(status)) + ": " + why + "\n");
  }
  start_timer(c); // the answer must be taken within the timeout too
  c->wreq.data = c;
  uv_buf_t buf = uv_buf_init(c->out.data(), static_cast<unsigned>(c->out.size()));
  const int r = uv_write(&c->wreq, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1,
                         [](uv_write_t* w, int written) {
                           auto* cc = static_cast<conn*>(w->data);
                           cc->owner->on_written(cc, written);
                         });
  if (r < 0)
    close(c);
}

// The answer is out: say so (FIN), then drop what the client still sends until it closes
// too or the timer fires. Closing at once with unread bytes would reset the connection,
// and a reset can destroy the answer before the client reads it.
void metrics_server::impl::on_written(conn* c, int status) {
  if (status < 0 || c->state != conn::phase::writing) {
    close(c);
    return;
  }
  c->state = conn::phase::lingering;
  c->sreq.data = c;
  if (uv_shutdown(&c->sreq, reinterpret_cast<uv_stream_t*>(&c->tcp), [](uv_shutdown_t*, int) {}) < 0) {
    close(c);
    return;
  }
  start_reading(c);
}

void metrics_server::impl::on_timer(conn* c) {
  if (c->state == conn::phase::reading)
    answer(c, 408, "no whole request within " + std::to_string(ms_of(cfg.request_timeout)) + " ms ("
                       + std::to_string(c->in.size()) + " bytes received)");
  else if (c->state == conn::phase::writing || c->state == conn::phase::lingering)
    close(c); // the answer was not taken in time (the write's callback comes, cancelled),
              // or the client did not close after it
}

void metrics_server::impl::close(conn* c) {
  if (c->state == conn::phase::closing)
    return;
  c->state = conn::phase::closing;
  auto closed = [](uv_handle_t* h) {
    auto* cc = conn_of(h);
    if (--cc->handles > 0)
      return;
    cc->owner->conns.erase(cc);
    delete cc;
  };
  uv_timer_stop(&c->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), closed);
}

void metrics_server::impl::shut_down() {
  if (closing)
    return;
  closing = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
  const std::vector<conn*> open(conns.begin(), conns.end());
  for (auto* c : open)
    close(c);
  uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr);
}

metrics_server::metrics_server(metrics_server_config cfg, render_fn render, log_fn log)
    : impl_(std::make_unique<impl>(std::move(cfg), std::move(render), std::move(log))) {}

metrics_server::~metrics_server() {
  stop();
}

expected<std::uint16_t> metrics_server::start() {
  auto& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mtx);
    if (m.state != impl::run_state::idle)
      return make_error(errc::invalid_argument, "metrics server started twice or after stop");
  }
  const std::string where = m.cfg.host + ":" + std::to_string(m.cfg.port);
  sockaddr_storage addr{};
  if (uv_ip4_addr(m.cfg.host.c_str(), m.cfg.port, reinterpret_cast<sockaddr_in*>(&addr)) != 0
      && uv_ip6_addr(m.cfg.host.c_str(), m.cfg.port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0)
    return make_error(errc::invalid_argument,
                      "cannot serve metrics on " + where + ": not a numeric IPv4 or IPv6 address");
  if (int r = uv_loop_init(&m.loop); r < 0)
    return make_error(errc::io_error, std::string("uv_loop_init: ") + uv_strerror(r));
  uv_tcp_init(&m.loop, &m.listener);
  m.listener.data = &m;
  auto fail = [&](const char* what, int r) -> expected<std::uint16_t> {
    uv_close(reinterpret_cast<uv_handle_t*>(&m.listener), nullptr);
    uv_run(&m.loop, UV_RUN_DEFAULT);
    uv_loop_close(&m.loop);
    std::lock_guard<std::mutex> lk(m.mtx);
    m.state = impl::run_state::stopped;
    return make_error(errc::io_error, "cannot serve metrics on " + where + ": " + what + ": "
                                          + uv_strerror(r));
  };
  if (int r = uv_tcp_bind(&m.listener, reinterpret_cast<const sockaddr*>(&addr), 0); r < 0)
    return fail("bind", r);
  if (int r = uv_listen(reinterpret_cast<uv_stream_t*>(&m.listener), 128,
                        [](uv_stream_t* s, int status) {
                          static_cast<impl*>(s->data)->on_accept(status);
                        });
      r < 0)
    return fail("listen", r);
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&m.listener, reinterpret_cast<sockaddr*>(&bound), &len);
  const std::uint16_t port = bound.ss_family == AF_INET6
                                 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                 : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  uv_async_init(&m.loop, &m.wake, [](uv_async_t* a) { static_cast<impl*>(a->data)->shut_down(); });
  m.wake.data = &m;
  std::lock_guard<std::mutex> lk(m.mtx);
  m.port = port;
  m.state = impl::run_state::running;
  m.thread = std::thread([&m] { uv_run(&m.loop, UV_RUN_DEFAULT); });
  return port;
}

void metrics_server::stop() {
  auto& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mtx);
    if (m.state == impl::run_state::idle) {
      m.state = impl::run_state::stopped;
      return;
    }
    if (m.state == impl::run_state::running)
      uv_async_send(&m.wake); // under the lock: the loop cannot have closed it yet
    m.state = impl::run_state::stopped;
  }
  std::lock_guard<std::mutex> jl(m.join_mtx);
  if (!m.thread.joinable())
    return;
  m.thread.join();
  [[maybe_unused]] const int r = uv_loop_close(&m.loop);
  assert(r == 0);
}

std::uint16_t metrics_server::port() const {
  std::lock_guard<std::mutex> lk(impl_->mtx);
  return impl_->port;
}

} // namespace banyan::net
