#pragma once
// Shared by the TCP transport's suites: a transport with an inbox and an event log the
// test thread waits on, raw sockets for peers that misbehave, and the handshake spoken by
// hand. Real TCP on loopback, ephemeral ports only; every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "banyan/core/buffer_pool.hpp"
#include "banyan/core/segment_placement.hpp"
#include "banyan/net/tcp_transport.hpp"
#include "banyan/schema/codec.hpp"
#include "banyan/schema/handshake.hpp"

namespace net = banyan::net;
namespace bs = banyan::schema;
namespace wire = banyan::wire;
using banyan::proc_id;
using bytes = std::vector<std::uint8_t>;
using kind = net::transport_event::kind;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace banyan {
inline std::ostream& operator<<(std::ostream& os, errc e) {
  return os << to_string(e);
}
namespace net {
inline std::ostream& operator<<(std::ostream& os, send_status s) {
  return os << to_string(s);
}
} // namespace net
} // namespace banyan

namespace tcp_test {

constexpr auto patience = 10s; // the deadline of every wait

template <class D> double ms(D d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
const std::string secret = "grid-secret";

net::tcp_config config(proc_id self) {
  net::tcp_config c;
  c.self = self;
  c.secret = secret;
  return c;
}

wire::envelope ping_to(proc_id to, std::uint64_t seq) {
  return {banyan::no_proc, to, wire::ping{seq}};
}

wire::envelope big_to(proc_id to, std::uint64_t seq, std::uint32_t padding) {
  wire::bw_reply r;
  r.seq = seq;
  r.padding = padding;
  return {banyan::no_proc, to, std::move(r)};
}

std::uint64_t seq_of(const wire::envelope& e) {
  if (auto* p = std::get_if<wire::ping>(&e.body))
    return p->seq;
  if (auto* p = std::get_if<wire::pong>(&e.body))
    return p->seq;
  if (auto* r = std::get_if<wire::bw_reply>(&e.body))
    return r->seq;
  return ~std::uint64_t{0};
}

// A transport with an inbox and an event log that the test thread can wait on.
class node {
public:
  explicit node(net::tcp_config cfg, std::function<void(node&, const wire::envelope&)> hook = {})
      : hook_(std::move(hook)), id_(cfg.self) {
    t_ = std::make_unique<net::tcp_transport>(
        std::move(cfg),
        [this](wire::envelope&& e) {
          if (hook_)
            hook_(*this, e);
          std::lock_guard<std::mutex> lk(m_);
          arrival_.push_back(steady::now());
          inbox_.push_back(std::move(e));
          cv_.notify_all();
        },
        [this](const net::transport_event& e) {
          std::lock_guard<std::mutex> lk(m_);
          events_.push_back(e);
          cv_.notify_all();
        });
  }
  ~node() {
    t_->stop(); // before the inbox goes away
    // Boost.Test is not thread-safe: the log is printed here, on the test thread.
    for (auto& e : events_)
      BOOST_TEST_MESSAGE("node " << id_ << ": " << net::to_string(e));
  }

  std::uint16_t start() {
    auto p = t_->start();
    BOOST_TEST_REQUIRE(p.has_value(), (p ? "" : p.err().to_string()));
    port_ = *p;
    return port_;
  }
  net::tcp_transport& t() { return *t_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::uint16_t port() const { return port_; }

  template <class Pred> bool wait_until(Pred pred, std::chrono::milliseconds d = patience) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, d, [&] { return pred(); });
  }
  bool wait_received(std::size_t n) {
    return wait_until([&] { return inbox_.size() >= n; });
  }
  using event_pred = std::function<bool(const net::transport_event&)>;
  bool wait_events(const event_pred& pred, std::size_t count = 1) {
    return wait_until([&] { return count_locked(pred) >= count; });
  }
  std::size_t count_events(const event_pred& pred) {
    std::lock_guard<std::mutex> lk(m_);
    return count_locked(pred);
  }
  bool wait_event(kind k, std::string_view needle, std::size_t count = 1) {
    return wait_events(matching(k, needle), count);
  }
  std::size_t count_events(kind k, std::string_view needle) {
    return count_events(matching(k, needle));
  }
  static event_pred matching(kind k, std::string_view needle) {
    return [k, n = std::string(needle)](const net::transport_event& e) {
      return e.what == k && e.detail.find(n) != std::string::npos;
    };
  }
  std::vector<wire::envelope> inbox() {
    std::lock_guard<std::mutex> lk(m_);
    return inbox_;
  }
  std::vector<steady::time_point> arrivals() {
    std::lock_guard<std::mutex> lk(m_);
    return arrival_;
  }
  std::size_t received() {
    std::lock_guard<std::mutex> lk(m_);
    return inbox_.size();
  }
  std::vector<net::transport_event> events() {
    std::lock_guard<std::mutex> lk(m_);
    return events_;
  }

private:
  std::size_t count_locked(const event_pred& pred) const {
    std::size_t n = 0;
    for (auto& e : events_)
      n += pred(e) ? 1 : 0;
    return n;
  }

  std::function<void(node&, const wire::envelope&)> hook_;
  proc_id id_ = banyan::no_proc;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<wire::envelope> inbox_;
  std::vector<steady::time_point> arrival_;
  std::vector<net::transport_event> events_;
  std::uint16_t port_ = 0;
  std::unique_ptr<net::tcp_transport> t_;
};

std::unique_ptr<node> make_node(proc_id id, net::tcp_config cfg,
                                std::function<void(node&, const wire::envelope&)> hook = {}) {
  cfg.self = id;
  auto n = std::make_unique<node>(std::move(cfg), std::move(hook));
  n->start();
  return n;
}
std::unique_ptr<node> make_node(proc_id id) {
  return make_node(id, config(id));
}

// Checks that `inbox` holds, from each sender, seqs first, first+1, ... in order.
void check_fifo(const std::vector<wire::envelope>& inbox, proc_id from, std::uint64_t first,
                std::uint64_t count) {
  std::uint64_t next = first;
  for (auto& e : inbox)
    if (e.from == from) {
      BOOST_TEST_REQUIRE(seq_of(e) == next);
      ++next;
    }
  BOOST_TEST(next == first + count);
}

// --- raw sockets, for peers that misbehave --------------------------------------------

class raw_socket {
public:
  explicit raw_socket(int fd = -1) : fd_(fd) {}
  raw_socket(raw_socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  raw_socket& operator=(raw_socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~raw_socket() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  static raw_socket connect_to(std::uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    BOOST_TEST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return raw_socket(fd);
  }
  int fd() const { return fd_; }
  std::uint16_t local_port() const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
  }
  bool write_all(const bytes& b) {
    std::size_t off = 0;
    while (off < b.size()) {
      const ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  std::optional<bytes> read_exact(std::size_t n, std::chrono::milliseconds timeout = patience) {
    const auto deadline = steady::now() + timeout;
    bytes out(n);
    std::size_t got = 0;
    while (got < n) {
      if (!wait_readable(deadline))
        return std::nullopt;
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0)
        return std::nullopt;
      got += static_cast<std::size_t>(r);
    }
    return out;
  }
  // One handshake message's body (or nothing).
  std::optional<bytes> read_message() {
    auto prefix = read_exact(4);
    if (!prefix)
      return std::nullopt;
    const std::size_t n = (*prefix)[0] | (*prefix)[1] << 8 | (*prefix)[2] << 16
                          | static_cast<std::size_t>((*prefix)[3]) << 24;
    if (n > 1u << 20)
      return std::nullopt;
    return read_exact(n);
  }
  // True once the other side has closed the connection (EOF or reset) before the deadline.
  bool wait_closed(std::chrono::milliseconds timeout = patience) {
    const auto deadline = steady::now() + timeout;
    char scratch[4096];
    for (;;) {
      if (!wait_readable(deadline))
        return false;
      const ssize_t r = ::recv(fd_, scratch, sizeof scratch, 0);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        return true;
    }
  }
  // Reads and discards everything until the other side closes or the deadline passes.
  std::size_t drain_until_closed(std::chrono::milliseconds timeout = patience) {
    const auto deadline = steady::now() + timeout;
    std::vector<char> scratch(1 << 16);
    std::size_t total = 0;
    while (wait_readable(deadline)) {
      const ssize_t r = ::recv(fd_, scratch.data(), scratch.size(), 0);
      if (r <= 0)
        break;
      total += static_cast<std::size_t>(r);
    }
    return total;
  }

private:
  bool wait_readable(steady::time_point deadline) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
      if (left.count() <= 0)
        return false;
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0)
        return true;
      if (r < 0 && errno != EINTR)
        return false;
    }
  }
  int fd_ = -1;
};

class raw_listener {
public:
  raw_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    BOOST_TEST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_TEST_REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~raw_listener() { ::close(fd_); }
  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::optional<raw_socket> accept(std::chrono::milliseconds timeout = patience) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0)
      return std::nullopt;
    return raw_socket(::accept(fd_, nullptr, nullptr));
  }

private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

bs::nonce test_nonce(std::uint8_t seed) {
  bs::nonce n{};
  for (auto& x : n)
    x = seed++;
  return n;
}

// Speaks the handshake as initiator `id` to a transport `acceptor`; checks the transport's
// proof against the documented recipe (HMAC-SHA256 over schema::proof_transcript).
bool handshake_as_initiator(raw_socket& s, proc_id id, proc_id acceptor,
                            const std::string& key = secret, bool plaintext = false) {
  const bs::hello h{bs::protocol_version, id, test_nonce(1), 0, plaintext};
  if (!s.write_all(bs::encode(h)))
    return false;
  auto body = s.read_message();
  if (!body)
    return false;
  auto a = bs::decode_hello_ack(body->data(), body->size());
  if (!a || a->id != acceptor || !a->challenge || !a->mac)
    return false;
  const auto expected = net::hmac_sha256(
      key, bs::proof_transcript(bs::proof_role::acceptor, h, acceptor, *a->challenge, a->session));
  if (key == secret)
    BOOST_TEST((expected == *a->mac));
  const auto mine = net::hmac_sha256(
      key, bs::proof_transcript(bs::proof_role::initiator, h, acceptor, *a->challenge, a->session));
  return s.write_all(
      bs::encode(bs::hello_ack{bs::protocol_version, id, std::nullopt, mine, plaintext}));
}

// Answers a transport's Hello as acceptor `self` (session `session`), in the initiator's
// mode; returns the initiator's Hello.
std::optional<bs::hello> handshake_as_acceptor(raw_socket& s, proc_id self,
                                               std::uint16_t version = bs::protocol_version,
                                               std::uint64_t session = 0x5e55) {
  auto body = s.read_message();
  if (!body)
    return std::nullopt;
  auto h = bs::decode_hello(body->data(), body->size());
  if (!h)
    return std::nullopt;
  const auto n = test_nonce(77);
  const auto mac = net::hmac_sha256(
      secret, bs::proof_transcript(bs::proof_role::acceptor, *h, self, n, session));
  if (!s.write_all(bs::encode(bs::hello_ack{version, self, n, mac, h->plaintext, session})))
    return std::nullopt;
  if (version != bs::protocol_version)
    return *h;
  auto ack_body = s.read_message();
  if (!ack_body)
    return std::nullopt;
  auto ack = bs::decode_hello_ack(ack_body->data(), ack_body->size());
  if (!ack || !ack->mac)
    return std::nullopt;
  const auto expected = net::hmac_sha256(
      secret, bs::proof_transcript(bs::proof_role::initiator, *h, self, n, session));
  BOOST_TEST((expected == *ack->mac));
  return *h;
}

bytes le32(std::uint32_t v) {
  return {static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(v >> 8),
          static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 24)};
}

} // namespace tcp_test

using namespace tcp_test;
