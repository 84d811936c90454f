// The TCP transport against a hostile network: frames are encrypted and authenticated
// (a proxy on loopback alters, replays, reorders and drops records of a real connection),
// the two modes refuse each other, records forged by hand are refused, and strangers who
// hold hundreds of handshake slots cannot keep a member out. Real TCP on 127.0.0.0/8,
// ephemeral ports only; every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>

#include "banyan/net/record_cipher.hpp"
#include "net/tcp_test_support.hpp"

namespace {

// Forwards one TCP connection at a time from its listening port to `target`, parsing the
// client's bytes (two handshake messages, then records) so that `transform` can alter the
// records of the first connection: it gets each record (header, ciphertext, tag) with its
// number and returns what to forward in its place. Later connections pass unchanged.
class record_proxy {
public:
  using transform = std::function<std::vector<bytes>(std::size_t index, const bytes& record)>;

  record_proxy(std::uint16_t target, transform t) : target_(target), transform_(std::move(t)) {
    thread_ = std::thread([this] { run(); });
  }
  ~record_proxy() {
    stop_ = true;
    thread_.join();
  }
  std::string address() const { return listener_.address(); }
  // The client's bytes on the first connection, as they arrived at the proxy.
  bytes seen() {
    std::lock_guard<std::mutex> lk(m_);
    return seen_;
  }
  std::size_t records() {
    std::lock_guard<std::mutex> lk(m_);
    return records_;
  }

private:
  void run() {
    bool first = true;
    while (!stop_) {
      auto client = listener_.accept(std::chrono::milliseconds(20));
      if (!client)
        continue;
      raw_socket server = raw_socket::connect_to(target_);
      relay(*client, server, first);
      first = false;
    }
  }

  void relay(raw_socket& client, raw_socket& server, bool first) {
    bytes pending;          // client bytes not yet forwarded (an incomplete unit)
    int handshake_left = 2; // Hello, then the initiator's HelloAck
    std::size_t index = 0;
    std::vector<char> buf(1 << 16);
    while (!stop_) {
      pollfd p[2] = {{client.fd(), POLLIN, 0}, {server.fd(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0)
        continue;
      if (p[1].revents != 0) { // the transport's answers go back unchanged
        const ssize_t n = ::recv(server.fd(), buf.data(), buf.size(), 0);
        if (n <= 0)
          return;
        if (!client.write_all(bytes(buf.begin(), buf.begin() + n)))
          return;
      }
      if (p[0].revents == 0)
        continue;
      const ssize_t n = ::recv(client.fd(), buf.data(), buf.size(), 0);
      if (n <= 0)
        return;
      if (first) {
        std::lock_guard<std::mutex> lk(m_);
        seen_.insert(seen_.end(), buf.begin(), buf.begin() + n);
      }
      pending.insert(pending.end(), buf.begin(), buf.begin() + n);
      // Forward whole units: handshake messages as they are, records through `transform`.
      for (;;) {
        if (pending.size() < 4)
          break;
        const std::size_t len = pending[0] | pending[1] << 8 | pending[2] << 16
                                | static_cast<std::size_t>(pending[3]) << 24;
        const std::size_t unit = handshake_left > 0 ? 4 + len : 4 + len + net::record_tag_bytes;
        if (pending.size() < unit)
          break;
        bytes u(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(unit));
        pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(unit));
        std::vector<bytes> out{u};
        if (handshake_left > 0) {
          --handshake_left;
        } else if (first) {
          out = transform_(index++, u);
          std::lock_guard<std::mutex> lk(m_);
          ++records_;
        }
        for (auto& o : out)
          if (!server.write_all(o))
            return;
      }
    }
  }

  std::uint16_t target_;
  transform transform_;
  raw_listener listener_;
  std::atomic<bool> stop_{false};
  std::mutex m_;
  bytes seen_;
  std::size_t records_ = 0;
  std::thread thread_;
};

std::vector<std::uint64_t> seqs(const std::vector<wire::envelope>& inbox) {
  std::vector<std::uint64_t> out;
  for (auto& e : inbox)
    out.push_back(seq_of(e));
  return out;
}

bool contains(const std::vector<std::uint64_t>& v, std::uint64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// a (1) sends pings 0..19 to b (2) through a proxy that applies `t` to the records of
// the first connection; one frame per record (each ping goes out alone). Waits for b to
// refuse the connection, then returns b's inbox.
std::vector<std::uint64_t> pings_through(const record_proxy::transform& t,
                                         std::unique_ptr<node>& b) {
  b = make_node(2);
  record_proxy proxy(b->port(), t);
  auto a = make_node(1);
  a->t().add_peer(2, proxy.address());
  for (std::uint64_t i = 0; i < 20; ++i) {
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(a->t().drain(patience)); // its own write, so its own record
  }
  BOOST_TEST_REQUIRE(b->wait_event(kind::error, "failed authentication"));
  BOOST_TEST(b->wait_event(kind::peer_down, "(processor 1)"));
  const auto e = b->events();
  for (auto& ev : e)
    if (ev.what == kind::error)
      BOOST_TEST(ev.hostile);
  return seqs(b->inbox());
}

wire::bcast_segment segment_of(const banyan::shared_bytes& payload) {
  wire::bcast_segment s;
  s.op = wire::collective_id{1, 7};
  s.kind = banyan::tree_kind::bandwidth;
  s.vnodes = banyan::vnode_set::range(0, 7);
  s.first = true;
  s.index = 0;
  s.count = 1;
  s.total = payload.size();
  s.payload = payload;
  return s;
}

// A non-blocking connect from `source` (an address of 127.0.0.0/8) to 127.0.0.1:`port`.
int connect_from(const char* source, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to); // EINPROGRESS
  return fd;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tcp_security)

BOOST_AUTO_TEST_CASE(frames_travel_encrypted_and_arrive_whole_and_in_order) {
  auto b = make_node(2);
  record_proxy proxy(b->port(), [](std::size_t, const bytes& r) { return std::vector<bytes>{r}; });
  auto a = make_node(1);
  a->t().add_peer(2, proxy.address());
  // A payload with a recognizable pattern, large enough to be cut into several records.
  std::vector<std::uint8_t> pattern(3u << 20);
  for (std::size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<std::uint8_t>("banyan-plaintext"[i % 16]);
  const banyan::shared_bytes payload(pattern);
  std::uint64_t seq = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i)
      BOOST_TEST_REQUIRE(a->t().send(ping_to(2, seq++)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(a->t().send({banyan::no_proc, 2, segment_of(payload)})
                       == net::send_status::queued);
    BOOST_TEST_REQUIRE(a->t().send(big_to(2, seq++, 200u << 10)) == net::send_status::queued);
  }
  BOOST_TEST_REQUIRE(b->wait_received(3 * 12));
  const auto inbox = b->inbox();
  std::uint64_t next = 0;
  int segments = 0;
  for (auto& e : inbox) {
    if (auto* s = std::get_if<wire::bcast_segment>(&e.body)) {
      ++segments;
      BOOST_TEST((s->payload == payload));
    } else {
      BOOST_TEST_REQUIRE(seq_of(e) == next++);
    }
  }
  BOOST_TEST(segments == 3);
  BOOST_TEST(next == seq);
  // Nothing of the plaintext crossed the wire: not even 16 bytes of the pattern, nor a
  // ping's frame.
  const bytes wire_bytes = proxy.seen();
  BOOST_TEST(wire_bytes.size() > 3 * pattern.size());
  const std::string needle = "banyan-plaintext";
  BOOST_TEST((std::search(wire_bytes.begin(), wire_bytes.end(), needle.begin(), needle.end())
              == wire_bytes.end()));
  const auto ping_frame = bs::encode(wire::envelope{1, 2, wire::ping{5}});
  BOOST_TEST(
      (std::search(wire_bytes.begin(), wire_bytes.end(), ping_frame.begin(), ping_frame.end())
       == wire_bytes.end()));
  // A 3 MiB payload goes in records of at most 1 MiB.
  BOOST_TEST(proxy.records() >= 3u * (10 + 1 + 3 + 1));
}

BOOST_AUTO_TEST_CASE(an_altered_byte_is_refused_and_nothing_from_its_record_on_is_delivered) {
  std::unique_ptr<node> b;
  const auto got = pings_through(
      [](std::size_t k, const bytes& r) {
        bytes x = r;
        if (k == 5)
          x[net::record_header_bytes + 3] ^= 0x01; // one bit of ciphertext
        return std::vector<bytes>{x};
      },
      b);
  BOOST_TEST(got.size() >= 5u);
  BOOST_TEST((std::vector<std::uint64_t>(got.begin(), got.begin() + 5)
              == std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  BOOST_TEST(!contains(got, 5));
  BOOST_TEST(b->count_events(kind::error, "record 5 failed authentication") == 1u);
}

BOOST_AUTO_TEST_CASE(an_altered_length_or_tag_is_refused) {
  for (int what : {0, 1}) {
    BOOST_TEST_CONTEXT((what == 0 ? "length" : "tag")) {
      std::unique_ptr<node> b;
      const auto got = pings_through(
          [what](std::size_t k, const bytes& r) {
            bytes x = r;
            if (k == 2) {
              if (what == 0) { // one byte shorter: the tag moves into the ciphertext
                x[0] = static_cast<std::uint8_t>(x[0] - 1);
                x.pop_back();
              } else {
                x.back() ^= 0x80;
              }
            }
            return std::vector<bytes>{x};
          },
          b);
      BOOST_TEST(!contains(got, 2));
      BOOST_TEST((std::vector<std::uint64_t>(got.begin(), got.begin() + 2)
                  == std::vector<std::uint64_t>{0, 1}));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_replayed_record_is_refused_and_its_frame_delivered_once) {
  std::unique_ptr<node> b;
  const auto got = pings_through(
      [](std::size_t k, const bytes& r) {
        return k == 3 ? std::vector<bytes>{r, r} : std::vector<bytes>{r};
      },
      b);
  BOOST_TEST(std::count(got.begin(), got.end(), 3u) == 1);
  BOOST_TEST((std::vector<std::uint64_t>(got.begin(), got.begin() + 4)
              == std::vector<std::uint64_t>{0, 1, 2, 3}));
  BOOST_TEST(b->count_events(kind::error, "record 4 failed authentication") == 1u);
}

BOOST_AUTO_TEST_CASE(reordered_or_dropped_records_are_refused) {
  for (bool drop : {false, true}) {
    BOOST_TEST_CONTEXT((drop ? "dropped" : "swapped")) {
      std::unique_ptr<node> b;
      bytes held;
      const auto got = pings_through(
          [&held, drop](std::size_t k, const bytes& r) {
            if (k == 3) { // hold record 3 back: forward it after record 4, or never
              held = r;
              return std::vector<bytes>{};
            }
            if (k == 4 && !drop)
              return std::vector<bytes>{r, held};
            return std::vector<bytes>{r};
          },
          b);
      BOOST_TEST(!contains(got, 3));
      BOOST_TEST(!contains(got, 4));
      BOOST_TEST((std::vector<std::uint64_t>(got.begin(), got.begin() + 3)
                  == std::vector<std::uint64_t>{0, 1, 2}));
    }
  }
}

BOOST_AUTO_TEST_CASE(plaintext_and_encrypted_processors_refuse_each_other_with_a_clear_line) {
  for (bool initiator_plain : {true, false}) {
    BOOST_TEST_CONTEXT("initiator plaintext: " << initiator_plain) {
      auto b_cfg = config(2);
      b_cfg.plaintext = !initiator_plain;
      auto b = make_node(2, b_cfg);
      auto a_cfg = config(1);
      a_cfg.plaintext = initiator_plain;
      auto a = make_node(1, a_cfg);
      a->t().add_peer(2, b->address());
      BOOST_TEST(a->t().send(ping_to(2, 1)) == net::send_status::queued);
      const std::string a_says = initiator_plain ? "mode mismatch: the peer encrypts its frames"
                                                 : "mode mismatch: the peer sends plaintext frames";
      const std::string b_says = initiator_plain ? "mode mismatch: the peer sends plaintext frames"
                                                 : "mode mismatch: the peer encrypts its frames";
      BOOST_TEST_REQUIRE(a->wait_event(kind::rejected, "to 2 at " + b->address() + ": " + a_says));
      BOOST_TEST_REQUIRE(b->wait_event(kind::rejected, b_says));
      BOOST_TEST(a->count_events(kind::rejected, "wrong shared secret") == 0u);
      BOOST_TEST(a->count_events(kind::peer_up, "") == 0u);
      BOOST_TEST(b->received() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(records_sealed_by_hand_follow_the_documented_key_schedule) {
  auto cfg = config(2);
  cfg.hostile_log_interval = 0s; // every line, for the test to see each verdict
  auto b = make_node(2, cfg);
  // Speaks the handshake as processor `id`, then returns the sealer of its direction,
  // keyed as docs/transport.md says.
  auto open_as = [&](raw_socket& s, proc_id id) {
    const bs::hello h{bs::protocol_version, id, test_nonce(9), 0, false};
    BOOST_TEST_REQUIRE(s.write_all(bs::encode(h)));
    auto body = s.read_message();
    BOOST_TEST_REQUIRE(body.has_value());
    auto ack = bs::decode_hello_ack(body->data(), body->size());
    BOOST_TEST_REQUIRE((ack && ack->challenge));
    BOOST_TEST(!ack->plaintext);
    const auto mine = net::hmac_sha256(
        secret,
        bs::proof_transcript(bs::proof_role::initiator, h, 2, *ack->challenge, ack->session));
    BOOST_TEST_REQUIRE(
        s.write_all(bs::encode(bs::hello_ack{bs::protocol_version, id, std::nullopt, mine})));
    return net::record_sealer(net::derive_record_key(secret, h, 2, *ack->challenge,
                                                     net::record_direction::initiator_to_acceptor));
  };
  auto sealed = [](net::record_sealer& k, const bytes& plain) {
    bytes out(plain.size() + net::record_overhead);
    k.seal(plain.data(), plain.size(), out.data());
    return out;
  };
  { // good records: a frame cut across two records arrives
    raw_socket s = raw_socket::connect_to(b->port());
    auto k = open_as(s, 5);
    const auto frame = bs::encode(wire::envelope{5, 2, wire::ping{77}});
    BOOST_TEST_REQUIRE(s.write_all(sealed(k, bytes(frame.begin(), frame.begin() + 10))));
    BOOST_TEST_REQUIRE(s.write_all(sealed(k, bytes(frame.begin() + 10, frame.end()))));
    BOOST_TEST_REQUIRE(b->wait_received(1));
    BOOST_TEST(seq_of(b->inbox()[0]) == 77u);
  }
  { // a record announcing 0 bytes, or more than max_record
    for (std::uint32_t len : {0u, static_cast<std::uint32_t>(net::max_record + 1)}) {
      raw_socket s = raw_socket::connect_to(b->port());
      open_as(s, 6);
      BOOST_TEST_REQUIRE(s.write_all(le32(len)));
      BOOST_TEST(s.wait_closed());
      BOOST_TEST_REQUIRE(b->wait_event(kind::error, "bad record: length " + std::to_string(len)));
    }
  }
  { // a record sealed under a key derived from a wrong secret
    raw_socket s = raw_socket::connect_to(b->port());
    open_as(s, 7);
    const bs::hello h{bs::protocol_version, 7, test_nonce(9), 0, false};
    net::record_sealer wrong(net::derive_record_key("guess", h, 2, test_nonce(1),
                                                    net::record_direction::initiator_to_acceptor));
    BOOST_TEST_REQUIRE(s.write_all(sealed(wrong, bs::encode(wire::envelope{7, 2, wire::ping{1}}))));
    BOOST_TEST(s.wait_closed());
    BOOST_TEST_REQUIRE(b->wait_event(kind::error, "(processor 7): record 0 failed authentication"));
  }
  BOOST_TEST(b->received() == 1u);
}

BOOST_AUTO_TEST_CASE(keys_differ_per_direction_connection_and_secret) {
  const bs::hello h{bs::protocol_version, 1, test_nonce(1), 0, false};
  const auto n = test_nonce(50);
  using dir = net::record_direction;
  const auto k = net::derive_record_key(secret, h, 2, n, dir::initiator_to_acceptor);
  BOOST_TEST((k.key == net::derive_record_key(secret, h, 2, n, dir::initiator_to_acceptor).key));
  BOOST_TEST((k.key != net::derive_record_key(secret, h, 2, n, dir::acceptor_to_initiator).key));
  BOOST_TEST(
      (k.key
       != net::derive_record_key(secret, h, 2, test_nonce(51), dir::initiator_to_acceptor).key));
  BOOST_TEST((k.key != net::derive_record_key("other", h, 2, n, dir::initiator_to_acceptor).key));
  BOOST_TEST((k.key != net::derive_record_key(secret, h, 3, n, dir::initiator_to_acceptor).key));
  // Sealed and opened in order; the same record twice fails the second time.
  net::record_sealer s(k);
  net::record_opener o(k);
  const bytes plain = {1, 2, 3, 4, 5};
  bytes r1(plain.size() + net::record_overhead);
  bytes r2(r1.size());
  s.seal(plain.data(), plain.size(), r1.data());
  s.seal(plain.data(), plain.size(), r2.data());
  BOOST_TEST((r1 != r2)); // a fresh nonce per record
  bytes c1 = r1;
  BOOST_TEST_REQUIRE(o.open(c1.data(), c1.data() + 4, plain.size(), c1.data() + 4 + plain.size()));
  BOOST_TEST((bytes(c1.begin() + 4, c1.begin() + 9) == plain));
  bytes again = r1;
  BOOST_TEST(!o.open(again.data(), again.data() + 4, plain.size(), again.data() + 9));
}

BOOST_AUTO_TEST_CASE(strangers_holding_every_handshake_slot_cannot_keep_a_member_out) {
  // b's defaults: 256 slots for strangers, 8 per address, 1 s to finish a handshake.
  auto cfg = config(2);
  cfg.hostile_log_interval = 500ms;
  auto b = make_node(2, cfg);
  // The flood: 40 addresses x 8 silent sockets (more than the 256 slots), and 80 more
  // from one address (far above its 8), each reopened as soon as b closes it; for a
  // bounded time.
  std::vector<std::string> sources;
  for (int i = 10; i < 50; ++i)
    sources.push_back("127.0.0." + std::to_string(i));
  struct slot {
    std::string from;
    int fd = -1;
  };
  std::vector<slot> slots;
  for (auto& s : sources)
    for (int i = 0; i < 8; ++i)
      slots.push_back({s, -1});
  for (int i = 0; i < 80; ++i)
    slots.push_back({"127.0.0.2", -1});
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> reopened{0};
  std::atomic<bool> bind_failed{false};
  struct joiner {
    std::atomic<bool>& stop;
    std::thread t;
    ~joiner() {
      stop = true;
      if (t.joinable())
        t.join();
    }
  } flood{stop, std::thread([&] {
            const auto end = steady::now() + 2 * patience;
            std::vector<pollfd> p(slots.size());
            while (!stop && steady::now() < end) {
              for (std::size_t i = 0; i < slots.size(); ++i) {
                if (slots[i].fd < 0) {
                  slots[i].fd = connect_from(slots[i].from.c_str(), b->port());
                  if (slots[i].fd < 0)
                    bind_failed = true;
                  ++reopened;
                }
                p[i] = {slots[i].fd, POLLIN, 0};
              }
              if (::poll(p.data(), p.size(), 20) <= 0)
                continue;
              char scratch[256];
              for (std::size_t i = 0; i < slots.size(); ++i)
                if (p[i].revents != 0 && ::recv(slots[i].fd, scratch, sizeof scratch, 0) <= 0) {
                  ::close(slots[i].fd); // b closed it (or it failed): open another at once
                  slots[i].fd = -1;
                }
            }
            for (auto& s : slots)
              if (s.fd >= 0)
                ::close(s.fd);
          })};
  // Wait until the flood has been turned away many times over, so b is saturated.
  const auto saturated = steady::now();
  while (reopened.load() < 3 * slots.size() && steady::now() - saturated < patience)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(!bind_failed.load());
  BOOST_TEST_REQUIRE(reopened.load() >= 3 * slots.size());

  // A member connects (from 127.0.0.1) and exchanges frames both ways meanwhile.
  auto a = make_node(1);
  a->t().add_peer(2, b->address());
  for (std::uint64_t i = 0; i < 100; ++i)
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
  const bool member_served = b->wait_received(100);
  if (!member_served)
    for (auto& e : a->events())
      BOOST_TEST_MESSAGE("member: " << net::to_string(e));
  BOOST_TEST_REQUIRE(member_served, "received " << b->received());
  BOOST_TEST(b->t().send(ping_to(1, 7)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a->wait_received(1));
  const std::size_t during = reopened.load();
  stop = true;
  flood.t.join();
  check_fifo(b->inbox(), 1, 0, 100);
  BOOST_TEST(a->count_events(kind::rejected, "") == 0u);
  BOOST_TEST(a->count_events(kind::error, "") == 0u);
  BOOST_TEST_MESSAGE("flood: " << during << " connections opened");

  // What b logged about the strangers: lines marked hostile, at most one per address per
  // half second, later ones counting those held back; none about the member.
  const auto events = b->events();
  std::map<std::string, std::size_t> lines; // per address
  std::size_t held_back = 0;
  for (auto& e : events) {
    if (!e.hostile)
      continue;
    BOOST_TEST(e.detail.find("(untrusted input") != std::string::npos);
    BOOST_TEST(e.detail.find("(processor 1)") == std::string::npos);
    const auto from = e.detail.substr(5, e.detail.find(':', 5) - 5); // "from a.b.c.d:port"
    ++lines[from];
    if (e.detail.find("held back") != std::string::npos)
      ++held_back;
  }
  BOOST_TEST(lines.size() >= 2u);
  BOOST_TEST(lines.count("127.0.0.1") == 0u);
  const double seconds = ms(steady::now() - saturated) / 1000 + 1;
  for (auto& [from, n] : lines)
    BOOST_TEST(n <= static_cast<std::size_t>(seconds / 0.5) + 1, from << ": " << n << " lines");
  BOOST_TEST(b->count_events(kind::rejected, "from 127.0.0.2:") >= 1u);
  BOOST_TEST_MESSAGE(held_back << " lines counted others held back");
}

BOOST_AUTO_TEST_CASE(a_hello_that_waited_out_our_own_stall_is_answered) {
  // b's loop stalls (a callback that takes longer than the stranger's deadline) while a
  // stranger's Hello waits in the socket: once b runs again its timers come before its
  // reads, so the deadline fires with the Hello unread. That is b's stall, not the
  // stranger's silence: the handshake goes on (one extension), counted in the stats.
  auto cfg = config(2);
  cfg.accept_timeout = 1s;
  std::promise<void> stalling;
  std::atomic<bool> once{false};
  auto b = make_node(2, cfg, [&](node&, const wire::envelope&) {
    if (once.exchange(true))
      return;
    stalling.set_value();
    std::this_thread::sleep_for(2500ms); // past the stranger's 1 s
  });
  // Accepted first (its deadline runs), then a member's frame starts the stall.
  raw_socket s = raw_socket::connect_to(b->port());
  auto a = make_node(1);
  a->t().add_peer(2, b->address());
  BOOST_TEST_REQUIRE((a->t().send(ping_to(2, 1)) == net::send_status::queued));
  BOOST_TEST_REQUIRE((stalling.get_future().wait_for(patience) == std::future_status::ready));
  const bs::hello h{bs::protocol_version, 5, test_nonce(3), 0, false};
  BOOST_TEST_REQUIRE(s.write_all(bs::encode(h)));
  auto body = s.read_message(); // the HelloAck, not a close
  BOOST_TEST_REQUIRE(body.has_value());
  auto ack = bs::decode_hello_ack(body->data(), body->size());
  BOOST_TEST_REQUIRE((ack && ack->challenge));
  BOOST_TEST(b->t().stats().handshake_stalls == 1u);
  BOOST_TEST(b->count_events(kind::rejected, "handshake timed out") == 0u);
  // A stranger that stays silent is still refused at its deadline.
  raw_socket quiet = raw_socket::connect_to(b->port());
  BOOST_TEST(quiet.wait_closed());
  BOOST_TEST_REQUIRE(b->wait_event(kind::rejected, "handshake timed out"));
  BOOST_TEST(b->t().stats().handshake_stalls == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
