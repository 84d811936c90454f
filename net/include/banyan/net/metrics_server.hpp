#pragma once
/// A small HTTP/1.x server for one endpoint, `GET /metrics` (Prometheus scrapes it), on a
/// libuv loop and a thread of its own. Every answer closes its connection. Built for
/// hostile input: a request (request line and headers) larger than `max_request_bytes` is
/// answered 431, a malformed one 400, another path 404, another method 405, another HTTP
/// version 505; a client that has not sent its whole request (or not taken the answer)
/// within `request_timeout` gets 408 (or is cut off); beyond `max_connections` open at
/// once a newcomer gets 503. Each such answer is reported through the log callback, at
/// most one line per client address per `log_interval` (the next line says how many were
/// held back). Nothing a client sends stops the server.
///
///     net::metrics_server srv({"127.0.0.1", 0}, [&] { return net::render_prometheus(fams()); },
///                             [&](const std::string& line) { log_warn(line); });
///     auto port = srv.start();   // the bound port (0 asked for any free one)
///     ...
///     srv.stop();

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "banyan/core/error.hpp"
#include "banyan/core/types.hpp"
#include "banyan/net/prometheus_text.hpp"

namespace banyan::net {

struct metrics_server_config {
  std::string host = "127.0.0.1"; ///< numeric IPv4 or IPv6 address to listen on
  std::uint16_t port = 0;         ///< 0: an ephemeral port (see `start`)
  std::size_t max_request_bytes = 8192; ///< request line and headers, at most
  std::size_t max_connections = 32;     ///< open at once, at most; more get 503
  /// A connection must deliver its whole request within this, and take the answer
  /// within it again; else 408, or it is closed.
  duration request_timeout = std::chrono::seconds(5);
  /// Lines about bad requests: at most one per client address per interval.
  duration log_interval = std::chrono::seconds(10);
  /// The path served (query strings are ignored), and what its body is.
  std::string path = "/metrics";
  std::string content_type = prometheus_content_type;
};

/// What the bytes of a request received so far call for (a pure function of them).
struct http_verdict {
  enum class kind {
    incomplete, ///< no end of headers yet, nothing wrong so far: read on
    serve,      ///< GET of the path: answer 200 with the body
    serve_head, ///< HEAD of the path: 200 without the body
    refuse,     ///< answer `status` (`reason` says why, for the log)
  } what = kind::incomplete;
  int status = 0;
  std::string reason;
};

/// Judges `bytes`, the start of a request, against `path` and `max_bytes` (request line
/// and headers): a request line `METHOD SP TARGET SP HTTP/1.x`, header lines `name:
/// value`, ended by an empty line (CRLF or LF line ends). Refuses as soon as the bytes
/// cannot begin a valid request (a bad request line, a control character), without
/// waiting for the rest.
http_verdict judge_request(std::string_view bytes, std::string_view path, std::size_t max_bytes);

/// The whole HTTP/1.1 response: status line, Content-Type, Content-Length, Connection:
/// close (and Allow for 405), then `body` unless `head_only`.
std::string http_response(int status, std::string_view content_type, std::string_view body,
                          bool head_only = false);

/// "Bad Request" for 400, and so on.
const char* http_status_text(int status);

class metrics_server {
public:
  /// The body of `GET path`, called on the server's thread for each request.
  using render_fn = std::function<std::string()>;
  /// One line about a refused request (rate-limited), on the server's thread.
  using log_fn = std::function<void(const std::string&)>;

  metrics_server(metrics_server_config cfg, render_fn render, log_fn log);
  /// Stops (see `stop`).
  ~metrics_server();
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;

  /// Binds and listens, then starts the thread. Returns the port (the ephemeral one when
  /// `port` is 0). Errors: `invalid_argument` (not a numeric address, started twice),
  /// `io_error` (bind or listen failed).
  expected<std::uint16_t> start();
  /// Closes every connection and joins the thread. Idempotent.
  void stop();
  /// The port listened on (0 before `start`).
  std::uint16_t port() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace banyan::net
