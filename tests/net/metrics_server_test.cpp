// metrics_server: the request judge on its own, then the server over loopback TCP: it
// serves GET and HEAD of its path, refuses malformed, oversized, slow and surplus requests
// with 400, 431, 408 and 503 (404 and 405 for other paths and methods), logs each refusal
// at most once per client address per interval with the count held back, and keeps
// serving. Every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "banyan/net/metrics_server.hpp"

namespace net = banyan::net;
using namespace std::chrono_literals;
using kind = net::http_verdict::kind;

namespace {

net::http_verdict judge(const std::string& s) {
  return net::judge_request(s, "/metrics", 1024);
}

/// A connected socket to 127.0.0.1:port (-1 on failure).
int dial(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Everything the server writes on `fd` until it closes (at most `limit`).
std::string read_all(int fd, std::chrono::milliseconds limit = 5s) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      break;
    char buf[4096];
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

/// Sends `request` on a fresh connection and returns the whole answer.
std::string ask(std::uint16_t port, const std::string& request) {
  int fd = dial(port);
  if (fd < 0)
    return "cannot connect";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  auto out = read_all(fd);
  ::close(fd);
  return out;
}

std::string status_line(const std::string& answer) {
  return answer.substr(0, answer.find("\r\n"));
}

struct served {
  std::mutex mtx;
  std::vector<std::string> lines;
  std::atomic<int> renders{0};
  net::metrics_server server;

  explicit served(net::metrics_server_config cfg)
      : server(std::move(cfg),
               [this] { return "banyan_renders " + std::to_string(++renders) + "\n"; },
               [this](const std::string& l) {
                 std::lock_guard<std::mutex> lk(mtx);
                 lines.push_back(l);
               }) {}
  std::vector<std::string> logged() {
    std::lock_guard<std::mutex> lk(mtx);
    return lines;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(the_judge_serves_get_and_head_of_the_path_and_refuses_the_rest) {
  BOOST_TEST((judge("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").what == kind::serve));
  BOOST_TEST((judge("GET /metrics?x=1 HTTP/1.0\n\n").what == kind::serve));
  BOOST_TEST((judge("HEAD /metrics HTTP/1.1\r\n\r\n").what == kind::serve_head));
  // Not whole yet, nothing wrong so far.
  BOOST_TEST((judge("").what == kind::incomplete));
  BOOST_TEST((judge("GET /met").what == kind::incomplete));
  BOOST_TEST((judge("GET /metrics HTTP/1.1\r\nHost: x\r\n").what == kind::incomplete));
  auto refused = [](const std::string& s, int status) {
    auto v = judge(s);
    BOOST_TEST((v.what == kind::refuse), s);
    BOOST_TEST(v.status == status, s << ": " << v.reason);
    BOOST_TEST(!v.reason.empty());
  };
  refused("garbage\r\n\r\n", 400);
  refused("GET /metrics\r\n", 400);                // no version: refused at the line's end
  refused("GET  /metrics HTTP/1.1\r\n", 400);      // two spaces
  refused("GET metrics HTTP/1.1\r\n\r\n", 400);    // not an absolute path
  refused("GET /metrics HTTP/2.0\r\n\r\n", 505);
  refused("GET /metrics FTP/1.1\r\n\r\n", 400);
  refused("GET /metrics HTTP/1.1\r\nno colon here\r\n", 400);
  refused("GET /metrics HTTP/1.1\r\n folded: x\r\n", 400);
  refused("\x16\x03\x01\x02", 400);                  // a TLS hello: refused at once
  refused("GET /metr\x01ics HTTP/1.1\r\n\r\n", 400); // a control character
  refused("GET /metrics HTTP/1.1\rX\r\n\r\n", 400);  // a bare CR
  refused("GET /other HTTP/1.1\r\n\r\n", 404);
  refused("POST /metrics HTTP/1.1\r\n\r\n", 405);
  refused("GET /metrics HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n", 431);
  refused("GET /" + std::string(2000, 'a'), 431); // too long before any line end
}

BOOST_AUTO_TEST_CASE(responses_carry_length_type_and_close) {
  auto r = net::http_response(200, "text/plain", "abc");
  BOOST_TEST(r == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
                  "Connection: close\r\n\r\nabc");
  auto h = net::http_response(200, "text/plain", "abc", true);
  BOOST_TEST(h.find("Content-Length: 3\r\n") != std::string::npos);
  BOOST_TEST(h.substr(h.size() - 4) == "\r\n\r\n");
  BOOST_TEST(net::http_response(405, "text/plain", "").find("Allow: GET, HEAD\r\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(serves_on_an_ephemeral_port_and_refuses_bad_requests_without_stopping) {
  net::metrics_server_config cfg;
  cfg.request_timeout = 300ms;
  cfg.max_request_bytes = 1024;
  served s(cfg);
  auto port = s.server.start();
  BOOST_REQUIRE_MESSAGE(port.has_value(), (port ? "" : port.err().to_string()));
  BOOST_TEST(*port != 0);
  BOOST_TEST(s.server.port() == *port);

  auto ok = ask(*port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  BOOST_TEST(status_line(ok) == "HTTP/1.1 200 OK");
  BOOST_TEST(ok.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != std::string::npos);
  BOOST_TEST(ok.find("Content-Length: 17\r\n") != std::string::npos, ok);
  BOOST_TEST(ok.substr(ok.size() - 17) == "banyan_renders 1\n");
  auto head = ask(*port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  BOOST_TEST(status_line(head) == "HTTP/1.1 200 OK");
  BOOST_TEST(head.find("banyan_renders") == std::string::npos);

  BOOST_TEST(status_line(ask(*port, "garbage\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
  BOOST_TEST(status_line(ask(*port, "GET /nope HTTP/1.1\r\n\r\n")) == "HTTP/1.1 404 Not Found");
  auto post = ask(*port, "POST /metrics HTTP/1.1\r\n\r\n");
  BOOST_TEST(status_line(post) == "HTTP/1.1 405 Method Not Allowed");
  BOOST_TEST(post.find("Allow: GET, HEAD") != std::string::npos);
  BOOST_TEST(status_line(ask(*port, "GET /metrics HTTP/1.1\r\nX: " + std::string(5000, 'x')))
             == "HTTP/1.1 431 Request Header Fields Too Large");
  // A slow client: half a request, then silence.
  BOOST_TEST(status_line(ask(*port, "GET /metr")) == "HTTP/1.1 408 Request Timeout");
  // A client that closes before its request is whole gets nothing, and nothing breaks.
  {
    int fd = dial(*port);
    BOOST_REQUIRE(fd >= 0);
    (void)::send(fd, "GET /", 5, MSG_NOSIGNAL);
    ::close(fd);
  }
  auto again = ask(*port, "GET /metrics HTTP/1.0\r\n\r\n");
  BOOST_TEST(status_line(again) == "HTTP/1.1 200 OK");
  BOOST_TEST(again.find("banyan_renders 3\n") != std::string::npos, again);

  // Every refusal came from 127.0.0.1: one line in the interval (10 s), naming the
  // status and the reason.
  auto lines = s.logged();
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0].find("metrics: 400 Bad Request to 127.0.0.1:") == 0u, lines[0]);
  BOOST_TEST(lines[0].find("malformed request line") != std::string::npos, lines[0]);
  s.server.stop();
  s.server.stop(); // idempotent
}

BOOST_AUTO_TEST_CASE(log_lines_are_rate_limited_with_the_count_held_back) {
  net::metrics_server_config cfg;
  cfg.log_interval = 1s;
  served s(cfg);
  auto port = s.server.start();
  BOOST_REQUIRE(port.has_value());
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(status_line(ask(*port, "BAD\r\n")) == "HTTP/1.1 400 Bad Request");
  BOOST_TEST(s.logged().size() == 1u);
  std::this_thread::sleep_for(1100ms);
  BOOST_TEST(status_line(ask(*port, "GET /x HTTP/1.1\r\n\r\n")) == "HTTP/1.1 404 Not Found");
  auto lines = s.logged();
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[1].find("404 Not Found") != std::string::npos, lines[1]);
  BOOST_TEST(lines[1].find("2 more such lines from 127.0.0.1 held back") != std::string::npos, lines[1]);
}

BOOST_AUTO_TEST_CASE(connections_beyond_the_limit_get_503_and_the_server_recovers) {
  net::metrics_server_config cfg;
  cfg.max_connections = 2;
  cfg.request_timeout = 2s;
  served s(cfg);
  auto port = s.server.start();
  BOOST_REQUIRE(port.has_value());
  int a = dial(*port);
  int b = dial(*port);
  BOOST_REQUIRE(a >= 0);
  BOOST_REQUIRE(b >= 0);
  std::this_thread::sleep_for(100ms); // both accepted
  BOOST_TEST(status_line(ask(*port, "GET /metrics HTTP/1.1\r\n\r\n"))
             == "HTTP/1.1 503 Service Unavailable");
  ::close(a);
  ::close(b);
  std::this_thread::sleep_for(100ms); // both closed
  BOOST_TEST(status_line(ask(*port, "GET /metrics HTTP/1.1\r\n\r\n")) == "HTTP/1.1 200 OK");
}

BOOST_AUTO_TEST_CASE(a_bad_address_or_a_taken_port_is_an_error) {
  net::metrics_server_config bad;
  bad.host = "not an address";
  served s1(bad);
  auto r1 = s1.server.start();
  BOOST_TEST(!r1.has_value());
  served s2({});
  auto p = s2.server.start();
  BOOST_REQUIRE(p.has_value());
  net::metrics_server_config same;
  same.port = *p;
  served s3(same);
  auto r3 = s3.server.start();
  BOOST_REQUIRE(!r3.has_value());
  BOOST_TEST(r3.err().message.find("cannot serve metrics on 127.0.0.1:") == 0u, r3.err().message);
}
