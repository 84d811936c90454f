// Real TCP on 127.0.0.1, ephemeral ports only. Every wait has a deadline (`patience`);
// nothing sleeps to make a race go away. Timing assertions are lower bounds only.

#include <boost/test/unit_test.hpp>

#include "net/tcp_test_support.hpp"

BOOST_AUTO_TEST_SUITE(tcp_transport)

BOOST_AUTO_TEST_CASE(two_transports_exchange_thousands_in_order) {
  constexpr std::uint64_t n = 5000;
  auto a = make_node(1);
  auto b = make_node(2);
  a->t().add_peer(2, b->address());
  b->t().add_peer(1, a->address());
  // Both directions at once (two threads), so both sides connect simultaneously.
  std::atomic<int> refused{0};
  std::thread other([&] {
    for (std::uint64_t i = 0; i < n; ++i)
      refused += b->t().send(ping_to(1, i)) != net::send_status::queued;
  });
  for (std::uint64_t i = 0; i < n; ++i)
    refused += a->t().send(ping_to(2, i)) != net::send_status::queued;
  other.join();
  BOOST_TEST_REQUIRE(refused == 0);
  BOOST_TEST_REQUIRE(b->wait_received(n));
  BOOST_TEST_REQUIRE(a->wait_received(n));
  check_fifo(b->inbox(), 1, 0, n);
  check_fifo(a->inbox(), 2, 0, n);
  for (auto& e : b->inbox())
    BOOST_TEST_REQUIRE(e.to == 2u);
  // One connection each way, each announced once on each side.
  BOOST_TEST(a->count_events(kind::peer_up, "connected") == 1u);
  BOOST_TEST(a->count_events(kind::peer_up, "accepted") == 1u);
  BOOST_TEST(b->count_events(kind::peer_up, "connected") == 1u);
  BOOST_TEST(b->count_events(kind::peer_up, "accepted") == 1u);
  BOOST_TEST(a->t().drain(patience));
  BOOST_TEST(a->t().queued_bytes(2) == 0u);
}

BOOST_AUTO_TEST_CASE(several_transports_all_to_all_from_many_threads) {
  constexpr proc_id count = 4;
  constexpr std::uint64_t n = 1000;
  std::vector<std::unique_ptr<node>> nodes;
  for (proc_id i = 0; i < count; ++i)
    nodes.push_back(make_node(10 + i));
  for (proc_id i = 0; i < count; ++i)
    for (proc_id j = 0; j < count; ++j)
      if (i != j)
        nodes[i]->t().add_peer(10 + j, nodes[j]->address());
  std::atomic<int> refused{0};
  std::vector<std::thread> senders;
  for (proc_id i = 0; i < count; ++i)
    senders.emplace_back([&, i] {
      for (std::uint64_t s = 0; s < n; ++s)
        for (proc_id j = 0; j < count; ++j)
          if (i != j)
            refused += nodes[i]->t().send(ping_to(10 + j, s)) != net::send_status::queued;
    });
  for (auto& t : senders)
    t.join();
  BOOST_TEST_REQUIRE(refused == 0);
  for (proc_id j = 0; j < count; ++j) {
    BOOST_TEST_REQUIRE(nodes[j]->wait_received(n * (count - 1)));
    const auto inbox = nodes[j]->inbox();
    for (proc_id i = 0; i < count; ++i)
      if (i != j)
        check_fifo(inbox, 10 + i, 0, n);
  }
}

BOOST_AUTO_TEST_CASE(large_frames_arrive_whole_and_in_order) {
  auto a = make_node(1);
  auto b = make_node(2);
  a->t().add_peer(2, b->address());
  const std::uint32_t sizes[] = {16u << 20, 1000, 24u << 20};
  std::uint64_t seq = 0;
  for (auto s : sizes) {
    BOOST_TEST_REQUIRE(a->t().send(big_to(2, seq++, s)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, seq++)) == net::send_status::queued);
  }
  BOOST_TEST_REQUIRE(b->wait_received(6));
  const auto inbox = b->inbox();
  for (std::size_t i = 0; i < inbox.size(); ++i) {
    BOOST_TEST(seq_of(inbox[i]) == i);
    if (i % 2 == 0) {
      auto* r = std::get_if<wire::bw_reply>(&inbox[i].body);
      BOOST_TEST_REQUIRE(r != nullptr);
      BOOST_TEST(r->padding == sizes[i / 2]);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_payload_sink_receives_long_broadcast_segments_in_place) {
  // b places segments into one buffer per message (as a node does); a sends a 4-segment
  // message, out of order, with small frames between.
  banyan::buffer_pool pool(64u << 20);
  banyan::segment_placement placement(pool, 64u << 20);
  std::atomic<int> asked{0};
  auto cfg = config(2);
  cfg.payload_sink = [&](const bs::payload_head& h) -> std::optional<bs::payload_place> {
    ++asked;
    auto slot = placement.place(h.op, h.index, h.count, h.total, h.length);
    if (!slot)
      return std::nullopt;
    return bs::payload_place{slot->region, slot->dest};
  };
  auto b = make_node(2, cfg);
  auto a = make_node(1);
  a->t().add_peer(2, b->address());
  constexpr std::size_t seg = 1u << 20;
  std::vector<std::uint8_t> message(4 * seg - 4096);
  for (std::size_t i = 0; i < message.size(); ++i)
    message[i] = static_cast<std::uint8_t>(i * 7 + i / 4096);
  const banyan::shared_bytes whole(message);
  std::uint64_t seq = 0;
  for (std::uint32_t index : {1u, 0u, 3u, 2u}) {
    wire::bcast_segment s;
    s.op = wire::collective_id{1, 42};
    s.kind = banyan::tree_kind::bandwidth;
    s.vnodes = banyan::vnode_set::range(0, 7);
    s.first = index == 1;
    s.index = index;
    s.count = 4;
    s.total = message.size();
    s.payload = whole.slice(index * seg, std::min(seg, message.size() - index * seg));
    BOOST_TEST_REQUIRE(a->t().send({banyan::no_proc, 2, s}) == net::send_status::queued);
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, seq++)) == net::send_status::queued);
  }
  BOOST_TEST_REQUIRE(b->wait_received(8));
  const auto inbox = b->inbox();
  std::vector<banyan::shared_bytes> parts(4);
  for (auto& e : inbox)
    if (auto* s = std::get_if<wire::bcast_segment>(&e.body))
      parts[s->index] = s->payload;
  banyan::shared_bytes joined = parts[0];
  for (std::size_t k = 1; k < 4; ++k)
    BOOST_TEST(joined.extend(parts[k])); // one buffer, in place: no copy needed
  BOOST_TEST(joined.size() == message.size());
  BOOST_TEST((joined == whole));
  BOOST_TEST(joined.data() != whole.data()); // received, not the sender's memory
  BOOST_TEST(asked.load() == 4);
  BOOST_TEST(pool.counters().allocated == 1u);
}

BOOST_AUTO_TEST_CASE(wrong_secret_is_rejected_and_good_peers_are_still_served) {
  auto b_cfg = config(2);
  b_cfg.hostile_log_interval = 0s; // every line, for the test to see each verdict
  auto b = make_node(2, b_cfg);
  auto bad_cfg = config(1);
  bad_cfg.secret = "not-the-secret";
  auto bad = make_node(1, bad_cfg);
  bad->t().add_peer(2, b->address());
  BOOST_TEST(bad->t().send(ping_to(2, 0)) == net::send_status::queued);
  // The initiator finds the acceptor's proof wrong; the acceptor sees it give up.
  BOOST_TEST_REQUIRE(bad->wait_event(kind::rejected, "wrong shared secret"));
  BOOST_TEST_REQUIRE(b->wait_event(kind::rejected, "during the handshake"));
  BOOST_TEST(bad->count_events(kind::peer_up, "") == 0u);

  // A raw client that knows the id but not the secret gets the acceptor's exact verdict.
  raw_socket s = raw_socket::connect_to(b->port());
  BOOST_TEST_REQUIRE(handshake_as_initiator(s, 5, 2, "guess"));
  BOOST_TEST(s.wait_closed());
  BOOST_TEST_REQUIRE(b->wait_event(kind::rejected, "(processor 5): wrong shared secret"));

  auto good = make_node(3);
  good->t().add_peer(2, b->address());
  BOOST_TEST(good->t().send(ping_to(2, 42)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(1));
  BOOST_TEST(b->inbox()[0].from == 3u);
  BOOST_TEST(b->count_events(kind::peer_up, "") == 1u);
}

BOOST_AUTO_TEST_CASE(version_mismatch_is_reported_by_both_sides) {
  auto b = make_node(2);
  {
    // A newer initiator: the transport answers with its own version, then closes.
    raw_socket s = raw_socket::connect_to(b->port());
    BOOST_TEST_REQUIRE(s.write_all(bs::encode(bs::hello{7, 5, test_nonce(3), 0})));
    auto body = s.read_message();
    BOOST_TEST_REQUIRE(body.has_value());
    auto a = bs::decode_hello_ack(body->data(), body->size());
    BOOST_TEST_REQUIRE(a.has_value());
    BOOST_TEST(a->version == bs::protocol_version);
    BOOST_TEST(!a->mac.has_value());
    BOOST_TEST(s.wait_closed());
    BOOST_TEST_REQUIRE(
        b->wait_event(kind::rejected, "version mismatch: peer speaks protocol version 7"));
  }
  {
    // A newer acceptor answers our Hello with its version: we report it and close.
    raw_listener l;
    b->t().add_peer(9, l.address());
    BOOST_TEST(b->t().send(ping_to(9, 0)) == net::send_status::queued);
    auto s = l.accept();
    BOOST_TEST_REQUIRE(s.has_value());
    BOOST_TEST_REQUIRE(handshake_as_acceptor(*s, 9, 3).has_value());
    BOOST_TEST(s->wait_closed());
    BOOST_TEST_REQUIRE(b->wait_event(kind::rejected, "to 9 at " + l.address()
                                                         + ": version mismatch: peer speaks "
                                                           "protocol version 3"));
    b->t().remove_peer(9);
  }
}

// In plaintext mode, so that raw frames can follow the handshake (encrypted records:
// tcp_security_test.cpp).
BOOST_AUTO_TEST_CASE(bad_bytes_get_one_line_and_a_closed_socket_and_others_are_served) {
  auto cfg = config(2);
  cfg.max_frame = 1 << 20;
  cfg.handshake_timeout = 300ms;
  cfg.plaintext = true;
  cfg.hostile_log_interval = 0s; // every line, for the test to see each verdict
  auto b = make_node(2, cfg);
  auto a_cfg = config(1);
  a_cfg.plaintext = true;
  auto a = make_node(1, a_cfg);
  a->t().add_peer(2, b->address());

  // Each misbehaving connection must be closed by the transport and logged in exactly one
  // rejected/error line that names it (by its source port) and says what was wrong.
  auto problem_with = [](const raw_socket& s) -> node::event_pred {
    const std::string at = "127.0.0.1:" + std::to_string(s.local_port());
    return [a1 = at + ":", a2 = at + " ("](const net::transport_event& e) {
      return (e.what == kind::rejected || e.what == kind::error)
             && (e.detail.find(a1) != std::string::npos || e.detail.find(a2) != std::string::npos);
    };
  };
  auto expect_closed_and_logged = [&](raw_socket& s, std::string_view says) {
    BOOST_TEST_CONTEXT(says) {
      BOOST_TEST(s.wait_closed());
      BOOST_TEST_REQUIRE(b->wait_events(problem_with(s)));
      BOOST_TEST(b->count_events(problem_with(s)) == 1u);
      const auto pred = problem_with(s);
      for (auto& e : b->events())
        if (pred(e))
          BOOST_TEST(e.detail.find(says) != std::string::npos, e.detail);
    }
  };

  { // random bytes (fixed seed)
    raw_socket s = raw_socket::connect_to(b->port());
    std::mt19937 rng(7);
    bytes junk(64);
    for (auto& x : junk)
      x = static_cast<std::uint8_t>(rng());
    junk[3] = 0x40; // a length far above the handshake limit
    BOOST_TEST_REQUIRE(s.write_all(junk));
    expect_closed_and_logged(s, "bad handshake message");
  }
  { // a plausible length, then junk that is not a Hello
    raw_socket s = raw_socket::connect_to(b->port());
    bytes junk = le32(16);
    junk.resize(20, 0xee);
    BOOST_TEST_REQUIRE(s.write_all(junk));
    expect_closed_and_logged(s, "malformed Hello");
  }
  { // an oversized length prefix
    raw_socket s = raw_socket::connect_to(b->port());
    BOOST_TEST_REQUIRE(s.write_all(le32(0xfffffff0u)));
    expect_closed_and_logged(s, "exceeds the limit");
  }
  { // silence: the handshake times out
    raw_socket s = raw_socket::connect_to(b->port());
    expect_closed_and_logged(s, "handshake timed out");
  }
  { // authenticated, then a truncated frame and close
    raw_socket s = raw_socket::connect_to(b->port());
    BOOST_TEST_REQUIRE(handshake_as_initiator(s, 5, 2, secret, true));
    auto frame = bs::encode(wire::envelope{5, 2, wire::ping{1}});
    frame.resize(frame.size() - 5);
    BOOST_TEST_REQUIRE(s.write_all(frame));
    BOOST_TEST_REQUIRE(b->wait_event(kind::peer_up, "(processor 5)"));
    ::shutdown(s.fd(), SHUT_WR);
    expect_closed_and_logged(s, "in the middle of a frame");
    BOOST_TEST(b->wait_event(kind::peer_down, "(processor 5)"));
  }
  { // authenticated, then a frame above max_frame
    raw_socket s = raw_socket::connect_to(b->port());
    BOOST_TEST_REQUIRE(handshake_as_initiator(s, 6, 2, secret, true));
    BOOST_TEST_REQUIRE(s.write_all(le32(2u << 20)));
    expect_closed_and_logged(s, "oversized_frame");
  }
  { // authenticated, then Cap'n Proto garbage of a valid length
    raw_socket s = raw_socket::connect_to(b->port());
    BOOST_TEST_REQUIRE(handshake_as_initiator(s, 7, 2, secret, true));
    bytes bad = le32(24);
    bad.resize(28, 0xff);
    BOOST_TEST_REQUIRE(s.write_all(bad));
    expect_closed_and_logged(s, "malformed_frame");
  }
  { // authenticated as 8, then a frame that claims to come from 1
    raw_socket s = raw_socket::connect_to(b->port());
    BOOST_TEST_REQUIRE(handshake_as_initiator(s, 8, 2, secret, true));
    BOOST_TEST_REQUIRE(s.write_all(bs::encode(wire::envelope{1, 2, wire::ping{9}})));
    expect_closed_and_logged(s, "protocol error: frame from 1 to 2");
  }
  // Nothing from the bad connections was delivered; a good peer is still served.
  BOOST_TEST(b->received() == 0u);
  for (std::uint64_t i = 0; i < 100; ++i)
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(100));
  check_fifo(b->inbox(), 1, 0, 100);
}

BOOST_AUTO_TEST_CASE(reconnects_after_the_peer_restarts_on_the_same_port) {
  auto a = make_node(1);
  auto b = make_node(2);
  const std::uint16_t port = b->port();
  a->t().add_peer(2, b->address());
  for (std::uint64_t i = 0; i < 100; ++i)
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(100));
  check_fifo(b->inbox(), 1, 0, 100);

  b.reset(); // the peer goes away
  BOOST_TEST_REQUIRE(a->wait_event(kind::peer_down, "to 2 at"));
  // Sent while it is down: queued (no connection exists, so none is in flight).
  for (std::uint64_t i = 100; i < 200; ++i)
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a->wait_event(kind::error, "retrying in"));
  BOOST_TEST(a->t().queued_bytes(2) > 0u);

  auto cfg = config(2);
  cfg.listen_port = port;
  auto b2 = make_node(2, cfg);
  BOOST_TEST(b2->port() == port);
  BOOST_TEST_REQUIRE(b2->wait_received(100));
  check_fifo(b2->inbox(), 1, 100, 100);
  BOOST_TEST(a->count_events(kind::peer_up, "connected") == 2u);
  BOOST_TEST(a->t().drain(patience));
}

BOOST_AUTO_TEST_CASE(backpressure_bounds_memory_when_the_peer_stops_reading) {
  constexpr std::size_t limit = 1u << 20;
  constexpr std::uint32_t padding = 256u << 10;
  auto cfg = config(1);
  cfg.max_queue_bytes = limit;
  auto a = make_node(1, cfg);
  raw_listener l;
  a->t().add_peer(9, l.address());
  BOOST_TEST_REQUIRE(a->t().send(ping_to(9, 0)) == net::send_status::queued);
  auto s = l.accept();
  BOOST_TEST_REQUIRE(s.has_value());
  BOOST_TEST_REQUIRE(handshake_as_acceptor(*s, 9).has_value());
  BOOST_TEST_REQUIRE(a->wait_event(kind::peer_up, "to 9"));

  // The peer reads nothing more. Fill the queue until refused, let the loop move it into
  // the kernel, repeat: once the kernel's buffers are full the queue stops draining.
  const std::size_t frame = bs::encode(big_to(9, 0, padding)).size();
  std::size_t accepted = 0;
  std::size_t peak = 0;
  bool stuck = false;
  for (int round = 0; round < 400 && !stuck; ++round) {
    for (int i = 0; i < 100; ++i) {
      const auto st = a->t().send(big_to(9, 1, padding));
      BOOST_TEST_REQUIRE((st == net::send_status::queued || st == net::send_status::backpressure));
      peak = std::max(peak, a->t().queued_bytes(9));
      if (st == net::send_status::backpressure)
        break;
      ++accepted;
    }
    stuck = !a->t().drain(200ms); // not a sleep: a drain that cannot finish is the point
  }
  BOOST_TEST_REQUIRE(stuck);
  BOOST_TEST(a->t().queued_bytes(9) > 0u);
  // It may have stalled with room for a frame or so; topping up is refused within a few.
  int more = 0;
  for (; more < 100 && a->t().send(big_to(9, 1, padding)) == net::send_status::queued; ++more) {
    ++accepted;
    peak = std::max(peak, a->t().queued_bytes(9));
  }
  BOOST_TEST(more < 100);
  BOOST_TEST(peak <= limit);
  // Bounded: what the kernel holds (a few MiB on loopback) plus the queue.
  BOOST_TEST(accepted * frame < 64u * (1u << 20));
  BOOST_TEST(accepted * frame > limit); // the kernel took some, so the peer really stalled
  BOOST_TEST_MESSAGE("accepted " << accepted << " frames of " << frame
                                 << " bytes before the queue stopped draining");

  // Once the peer reads again, the queue drains and sending works again.
  std::thread reader([&] { s->drain_until_closed(patience); });
  BOOST_TEST(a->t().drain(patience));
  BOOST_TEST(a->t().queued_bytes(9) == 0u);
  BOOST_TEST(a->t().send(big_to(9, 2, padding)) == net::send_status::queued);
  a->t().remove_peer(9); // closes the connection, so the reader sees EOF
  reader.join();
}

BOOST_AUTO_TEST_CASE(shaped_link_delays_and_paces) {
  constexpr auto delay = 30ms;
  constexpr double bandwidth = 4e6; // bytes per second
  auto cfg = config(1);
  cfg.shaper = [&](proc_id to) {
    return to == 2 ? net::link_shape{delay, bandwidth} : net::link_shape{};
  };
  auto a = make_node(1, cfg);
  auto b = make_node(2);
  a->t().add_peer(2, b->address());

  // Delay: every message takes at least the one-way delay.
  for (std::uint64_t i = 0; i < 5; ++i) {
    const auto t0 = steady::now();
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(b->wait_received(i + 1));
    BOOST_TEST(ms(b->arrivals().back() - t0) >= ms(delay));
  }
  // Pacing: 1 MB at 4 MB/s takes at least 250 ms (plus the delay).
  const std::uint32_t padding = 100'000;
  const auto t0 = steady::now();
  std::size_t bytes_sent = 0;
  for (std::uint64_t i = 0; i < 10; ++i) {
    auto e = big_to(2, 5 + i, padding);
    bytes_sent += wire::wire_size(e.body);
    BOOST_TEST_REQUIRE(a->t().send(std::move(e)) == net::send_status::queued);
  }
  BOOST_TEST_REQUIRE(b->wait_received(15));
  const auto took = b->arrivals().back() - t0;
  const auto floor = std::chrono::duration_cast<steady::duration>(
                         std::chrono::duration<double>(bytes_sent / bandwidth))
                     + delay - 1ms; // slack for rounding only; the real margin is the ms timer
  BOOST_TEST(ms(took) >= ms(floor));
  BOOST_TEST_MESSAGE("1 MB over a 4 MB/s, 30 ms link took " << ms(took) << " ms");
  check_fifo(b->inbox(), 1, 0, 15);
}

BOOST_AUTO_TEST_CASE(clean_shutdown_with_pending_data) {
  auto cfg = config(1);
  cfg.max_queue_bytes = 4u << 20;
  auto a = std::make_unique<node>(cfg);
  a->start();
  // A peer that never answers (its port refuses), one that never finishes the handshake,
  // and one that stops reading with data queued.
  std::uint16_t dead_port = 0;
  {
    raw_listener gone;
    dead_port = gone.port();
  }
  raw_listener mute;
  raw_listener sink;
  a->t().add_peer(7, "127.0.0.1:" + std::to_string(dead_port));
  a->t().add_peer(8, mute.address());
  a->t().add_peer(9, sink.address());
  BOOST_TEST(a->t().send(ping_to(7, 0)) == net::send_status::queued);
  BOOST_TEST(a->t().send(ping_to(8, 0)) == net::send_status::queued);
  BOOST_TEST(a->t().send(ping_to(9, 0)) == net::send_status::queued);
  auto s = sink.accept();
  BOOST_TEST_REQUIRE(s.has_value());
  BOOST_TEST_REQUIRE(handshake_as_acceptor(*s, 9).has_value());
  auto m = mute.accept();
  BOOST_TEST_REQUIRE(m.has_value());
  for (int i = 0; i < 10000 && a->t().send(big_to(9, 1, 256u << 10)) == net::send_status::queued;
       ++i) {
  }
  BOOST_TEST(a->t().queued_bytes(9) > 0u);
  BOOST_TEST(a->t().queued_bytes(7) > 0u);

  const auto t0 = steady::now();
  a->t().stop(); // closes every handle; aborts if the loop cannot be closed
  BOOST_TEST_MESSAGE("stop took " << ms(steady::now() - t0) << " ms");
  BOOST_TEST(a->t().queued_bytes(9) == 0u);
  BOOST_TEST(a->t().queued_bytes(7) == 0u);
  BOOST_TEST(a->t().send(ping_to(9, 2)) == net::send_status::stopped);
  BOOST_TEST(s->wait_closed());
  BOOST_TEST(m->wait_closed());
  a->t().stop(); // idempotent
  a.reset();
}

BOOST_AUTO_TEST_CASE(api_contract) {
  auto cfg = config(1);
  cfg.max_frame = 4096;
  node a(cfg);
  BOOST_TEST(a.t().send(ping_to(1, 0)) == net::send_status::stopped); // not started
  a.t().add_peer(2, "127.0.0.1:1");                                   // allowed before start
  a.start();
  auto again = a.t().start();
  BOOST_TEST_REQUIRE(!again.has_value());
  BOOST_TEST(again.err().code == banyan::errc::invalid_argument);
  BOOST_TEST(a.t().port() == a.port());

  BOOST_TEST(a.t().send(ping_to(3, 0)) == net::send_status::unknown_peer);
  BOOST_TEST(a.t().send(big_to(2, 0, 8192)) == net::send_status::oversized);
  // To itself: delivered locally, on the loop, with `from` set.
  BOOST_TEST(a.t().send(ping_to(1, 77)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a.wait_received(1));
  BOOST_TEST(a.inbox()[0].from == 1u);
  BOOST_TEST(seq_of(a.inbox()[0]) == 77u);

  // remove_peer drops what is queued for it.
  BOOST_TEST(a.t().send(ping_to(2, 1)) == net::send_status::queued);
  BOOST_TEST(a.t().queued_bytes(2) > 0u);
  a.t().remove_peer(2);
  BOOST_TEST(a.t().queued_bytes(2) == 0u);
  BOOST_TEST(a.t().drain(patience)); // the loop released the dropped frame's bytes
  BOOST_TEST(a.t().send(ping_to(2, 2)) == net::send_status::unknown_peer);

  // A malformed address is reported when it is first used.
  a.t().add_peer(4, "no-port-here");
  BOOST_TEST(a.t().send(ping_to(4, 0)) == net::send_status::queued);
  BOOST_TEST(a.wait_event(kind::error, "bad address"));

  a.t().stop();
  BOOST_TEST(a.t().send(ping_to(1, 0)) == net::send_status::stopped);
  BOOST_TEST(!a.t().start().has_value());

  // A port in use is an io_error from start().
  auto busy = config(5);
  raw_listener holder;
  busy.listen_port = holder.port();
  net::tcp_transport t(busy, {}, {});
  auto r = t.start();
  BOOST_TEST_REQUIRE(!r.has_value());
  BOOST_TEST(r.err().code == banyan::errc::io_error);
  BOOST_TEST(r.err().message.find("address already in use") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(host_names_and_ipv6_addresses) {
  auto named_cfg = config(2);
  named_cfg.listen_host = "localhost"; // resolved once by start()
  auto named = make_node(2, named_cfg);
  auto v6_cfg = config(3);
  v6_cfg.listen_host = "::1";
  auto v6 = make_node(3, v6_cfg);
  auto a = make_node(1);
  a->t().add_peer(2, "localhost:" + std::to_string(named->port())); // resolved on the loop
  a->t().add_peer(3, "[::1]:" + std::to_string(v6->port()));
  for (std::uint64_t i = 0; i < 20; ++i) {
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(a->t().send(ping_to(3, i)) == net::send_status::queued);
  }
  BOOST_TEST_REQUIRE(named->wait_received(20));
  BOOST_TEST_REQUIRE(v6->wait_received(20));
  check_fifo(named->inbox(), 1, 0, 20);
  check_fifo(v6->inbox(), 1, 0, 20);
  BOOST_TEST(v6->count_events(kind::peer_up, "from [::1]:") == 1u);
  // (No test of an unresolvable name: that would query a DNS server off this machine.)
}

BOOST_AUTO_TEST_CASE(replies_reach_a_processor_known_only_from_its_connection) {
  auto a = make_node(1);
  // b answers every ping with a pong, although nobody told it where 1 is.
  std::atomic<int> refused{0};
  auto b = make_node(2, config(2), [&refused](node& self, const wire::envelope& e) {
    if (auto* p = std::get_if<wire::ping>(&e.body))
      refused += self.t().send({2, e.from, wire::pong{p->seq}}) != net::send_status::queued;
  });
  a->t().add_peer(2, b->address());
  for (std::uint64_t i = 0; i < 10; ++i)
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, i)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a->wait_received(10));
  BOOST_TEST(refused == 0);
  check_fifo(a->inbox(), 2, 0, 10);
  for (auto& e : a->inbox())
    BOOST_TEST(std::holds_alternative<wire::pong>(e.body));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(undeliverable_frames_come_back_to_the_sender) {
  auto a = make_node(1);
  auto b = make_node(2);
  net::send_options keep;
  keep.return_undeliverable = true;
  auto returned_to = [](proc_id peer, std::uint64_t seq) {
    return [peer, seq](const net::transport_event& e) {
      return e.what == kind::undeliverable && e.peer == peer && e.returned.size() == 1
             && e.returned[0].to == peer && seq_of(e.returned[0]) == seq;
    };
  };

  // Nobody listens at 7's address: the frame sent with return_undeliverable comes back,
  // the other one stays queued for the next attempt.
  std::uint16_t dead_port = 0;
  {
    raw_listener gone;
    dead_port = gone.port();
  }
  a->t().add_peer(7, "127.0.0.1:" + std::to_string(dead_port));
  BOOST_TEST(a->t().send(ping_to(7, 10), keep) == net::send_status::queued);
  BOOST_TEST(a->t().send(ping_to(7, 11)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a->wait_events(returned_to(7, 10)));
  BOOST_TEST(a->count_events([](const net::transport_event& e) {
    return e.what == kind::error && e.peer == 7 && e.unreachable;
  }) >= 1u);
  BOOST_TEST(a->t().queued_bytes(7) > 0u); // the ping without the option

  // Another processor answers at 5's address: the acceptor's id is a field.
  a->t().add_peer(5, b->address());
  BOOST_TEST(a->t().send(ping_to(5, 12), keep) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a->wait_events(returned_to(5, 12)));
  auto ev = a->events();
  bool named = false;
  for (auto& e : ev)
    named = named || (e.what == kind::rejected && e.peer == 5 && e.reached == 2 && e.unreachable);
  BOOST_TEST(named);

  // A peer removed with such frames queued (its handshake never finishes) gives them back.
  raw_listener mute;
  a->t().add_peer(9, mute.address());
  BOOST_TEST(a->t().send(ping_to(9, 13), keep) == net::send_status::queued);
  auto m = mute.accept();
  BOOST_TEST_REQUIRE(m.has_value());
  a->t().remove_peer(9);
  BOOST_TEST_REQUIRE(a->wait_events(returned_to(9, 13)));

  // A frame handed back (`returned`) comes out of the original sender's transport as
  // undeliverable, as that sender sent it, and never reaches its inbox.
  a->t().add_peer(2, b->address());
  BOOST_TEST(a->t().send(ping_to(2, 14)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(1));
  net::send_options back;
  back.returned = true;
  BOOST_TEST(b->t().send(wire::envelope{2, 1, wire::ping{14}}, back) == net::send_status::queued);
  BOOST_TEST_REQUIRE(a->wait_events([](const net::transport_event& e) {
    return e.what == kind::undeliverable && e.peer == 2 && e.returned.size() == 1
           && e.returned[0].from == 1 && e.returned[0].to == 2 && seq_of(e.returned[0]) == 14;
  }));
  BOOST_TEST(a->received() == 0u);

  // An embedding program cannot be killed by a write to a closed connection.
  struct sigaction now {};
  BOOST_TEST_REQUIRE(sigaction(SIGPIPE, nullptr, &now) == 0);
  BOOST_TEST((now.sa_handler == SIG_IGN));
}

// A frame sent from a callback goes out at once (no turn through the command queue), in
// order with what other threads queued; the events it causes come later, never inside
// `send`. One side busy-polls (tcp_config::busy_poll); both still stop cleanly.
BOOST_AUTO_TEST_CASE(sends_from_callbacks_keep_order_and_defer_their_events) {
  constexpr std::uint64_t n = 2000;
  std::atomic<int> inside_send_events{0};
  std::atomic<int> refused{0};
  auto cfg_b = config(2);
  cfg_b.busy_poll = std::chrono::milliseconds(5);
  // b answers every ping from a with a pong of the same seq, from its deliver callback;
  // on the first, it also sends to a processor whose address is malformed.
  auto b = make_node(2, cfg_b, [&](node& self, const wire::envelope& e) {
    auto* p = std::get_if<wire::ping>(&e.body);
    if (p == nullptr)
      return;
    if (p->seq == 0) {
      auto before = self.count_events([](const net::transport_event&) { return true; });
      refused += self.t().send(ping_to(9, 0)) != net::send_status::queued;
      auto after = self.count_events([](const net::transport_event&) { return true; });
      inside_send_events += static_cast<int>(after - before);
    }
    refused += self.t().send({banyan::no_proc, e.from, wire::pong{p->seq}}) != net::send_status::queued;
  });
  b->t().add_peer(9, "not-an-address");
  auto a = make_node(1);
  a->t().add_peer(2, b->address());
  b->t().add_peer(1, a->address());
  // Meanwhile another thread of b's sends pings to a: a sees both streams, each in order.
  std::thread other([&] {
    for (std::uint64_t i = 0; i < n; ++i)
      refused += b->t().send(ping_to(1, 100000 + i)) != net::send_status::queued;
  });
  for (std::uint64_t i = 0; i < n; ++i)
    refused += a->t().send(ping_to(2, i)) != net::send_status::queued;
  other.join();
  BOOST_TEST_REQUIRE(a->wait_received(2 * n));
  BOOST_TEST(refused.load() == 0);
  std::uint64_t next_pong = 0, next_ping = 100000;
  for (auto& e : a->inbox()) {
    if (auto* q = std::get_if<wire::pong>(&e.body)) {
      BOOST_TEST_REQUIRE(q->seq == next_pong);
      ++next_pong;
    } else if (auto* p = std::get_if<wire::ping>(&e.body)) {
      BOOST_TEST_REQUIRE(p->seq == next_ping);
      ++next_ping;
    }
  }
  BOOST_TEST(next_pong == n);
  BOOST_TEST(next_ping == 100000 + n);
  // The malformed address was reported, after the callback's send returned.
  BOOST_TEST(b->wait_event(kind::error, "bad address"));
  BOOST_TEST(inside_send_events.load() == 0);
}

// The direct path (docs/transport.md, "Threading"): a send from another thread than the
// loop's writes to an idle, established connection itself.
BOOST_AUTO_TEST_CASE(off_loop_sends_go_out_while_the_loop_is_busy_and_queued_frames_keep_order) {
  std::mutex gate_m;
  std::condition_variable gate_cv;
  bool blocked = false;
  bool open = false;
  // a's loop blocks in its deliver callback on a ping of seq 7, until the test opens it.
  auto a = make_node(1, config(1), [&](node&, const wire::envelope& e) {
    auto* p = std::get_if<wire::ping>(&e.body);
    if (p == nullptr || p->seq != 7)
      return;
    std::unique_lock<std::mutex> lk(gate_m);
    blocked = true;
    gate_cv.notify_all();
    gate_cv.wait_for(lk, patience, [&] { return open; });
  });
  auto b = make_node(2);
  a->t().add_peer(2, b->address());
  b->t().add_peer(1, a->address());
  // a -> b established and idle.
  BOOST_TEST_REQUIRE(a->t().send(ping_to(2, 0)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(1));
  BOOST_TEST_REQUIRE(a->t().drain(patience));

  BOOST_TEST_REQUIRE(b->t().send(ping_to(1, 7)) == net::send_status::queued);
  {
    std::unique_lock<std::mutex> lk(gate_m);
    BOOST_TEST_REQUIRE(gate_cv.wait_for(lk, patience, [&] { return blocked; }));
  }
  // a's loop is stuck: this frame can only reach b if this thread writes it.
  BOOST_TEST_REQUIRE(a->t().send(ping_to(2, 1)) == net::send_status::queued);
  const bool arrived_while_blocked = b->wait_received(2);
  // A frame too large for the direct path waits for the loop; the small ones after it
  // must wait behind it, although the connection is idle.
  BOOST_TEST_REQUIRE(a->t().send(big_to(2, 2, 200u << 10)) == net::send_status::queued);
  for (std::uint64_t s = 3; s < 6; ++s)
    BOOST_TEST_REQUIRE(a->t().send(ping_to(2, s)) == net::send_status::queued);
  const bool overtook = b->received() > 2; // nothing can come before the loop runs
  {
    std::lock_guard<std::mutex> lk(gate_m);
    open = true;
    gate_cv.notify_all();
  }
  BOOST_TEST(arrived_while_blocked);
  BOOST_TEST(!overtook);
  BOOST_TEST_REQUIRE(b->wait_received(6));
  const auto inbox = b->inbox();
  for (std::size_t i = 0; i < inbox.size(); ++i)
    BOOST_TEST(seq_of(inbox[i]) == i);
  // Once the loop has written the large frame, the path opens again.
  BOOST_TEST_REQUIRE(a->t().drain(patience));
  BOOST_TEST_REQUIRE(a->t().send(ping_to(2, 6)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(7));
  BOOST_TEST(seq_of(b->inbox().back()) == 6u);
  BOOST_TEST(a->t().queued_bytes(2) == 0u);
}

BOOST_AUTO_TEST_CASE(off_loop_sends_from_several_threads_arrive_whole_and_in_order) {
  // Frames of mixed sizes, some above the direct path's limit, from four threads at once:
  // the socket fills (partly written frames whose rest the loop sends), the path opens and
  // closes all the time. Every frame arrives whole, each thread's in its order.
  constexpr std::uint64_t threads = 4;
  constexpr std::uint64_t per_thread = 600;
  const std::uint32_t paddings[] = {0, 30u << 10, 1000, 60u << 10, 90u << 10, 7};
  auto a = make_node(1);
  auto b = make_node(2);
  a->t().add_peer(2, b->address());
  auto padding_of = [&](std::uint64_t i) { return paddings[i % std::size(paddings)]; };
  std::atomic<int> refused{0};
  std::vector<std::thread> senders;
  for (std::uint64_t t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        const std::uint64_t seq = (t << 32) | i;
        const auto pad = padding_of(i);
        // Backpressure (the peer's queue is full while the receiver is slow, e.g. on a
        // loaded machine) refuses the frame without queueing it: send it again later,
        // as a real sender does; the order is kept.
        auto st = net::send_status::backpressure;
        while ((st = a->t().send(pad == 0 ? ping_to(2, seq) : big_to(2, seq, pad)))
               == net::send_status::backpressure)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        refused += st != net::send_status::queued;
      }
    });
  for (auto& s : senders)
    s.join();
  BOOST_TEST_REQUIRE(refused.load() == 0);
  BOOST_TEST_REQUIRE(b->wait_received(threads * per_thread));
  std::vector<std::uint64_t> next(threads, 0);
  for (auto& e : b->inbox()) {
    const auto seq = seq_of(e);
    const auto t = seq >> 32;
    const auto i = seq & 0xffffffffu;
    BOOST_TEST_REQUIRE(t < threads);
    BOOST_TEST_REQUIRE(i == next[t]);
    ++next[t];
    const auto pad = padding_of(i);
    if (pad == 0) {
      BOOST_TEST_REQUIRE(std::holds_alternative<wire::ping>(e.body));
    } else {
      auto* r = std::get_if<wire::bw_reply>(&e.body);
      BOOST_TEST_REQUIRE(r != nullptr);
      BOOST_TEST_REQUIRE(r->padding == pad);
    }
  }
  for (std::uint64_t t = 0; t < threads; ++t)
    BOOST_TEST(next[t] == per_thread);
  BOOST_TEST(a->t().drain(patience));
  BOOST_TEST(a->t().queued_bytes(2) == 0u);
}

// One process per id (docs/transport.md): a second transport under processor 1's id is
// refused by a peer that reaches the live one at 1's address, and by processor 1 itself;
// the live one keeps its connection; once it is gone, its successor gets the id.
BOOST_AUTO_TEST_CASE(a_second_process_under_a_live_id_is_refused_until_the_first_is_gone) {
  auto b = make_node(2);
  auto live = make_node(1);
  live->t().add_peer(2, b->address());
  b->t().add_peer(1, live->address()); // b knows 1's address; no connection to it yet
  BOOST_TEST(live->t().send(ping_to(2, 1)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(1));

  auto impostor = make_node(1);
  BOOST_TEST(impostor->t().session() != live->t().session());
  auto refused = [](const net::transport_event& e) {
    return e.what == kind::rejected && e.id_in_use
           && e.detail.find("id 1 is in use") != std::string::npos;
  };
  { // through b, which first connects to 1's address to see who answers there
    impostor->t().add_peer(2, b->address());
    BOOST_TEST(impostor->t().send(ping_to(2, 100)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(impostor->wait_events(refused));
    BOOST_TEST_REQUIRE(b->wait_event(kind::rejected, "(processor 1): id 1 is in use: processor 1 "
                                                     "answers at " + live->address()));
    BOOST_TEST(b->count_events(kind::peer_up, "to 1 at " + live->address()) == 1u);
  }
  { // through processor 1 itself (the impostor does not know whom it reaches)
    impostor->t().add_peer(7, live->address());
    BOOST_TEST(impostor->t().send(ping_to(7, 0)) == net::send_status::queued);
    BOOST_TEST_REQUIRE(impostor->wait_events(
        [](const net::transport_event& e) { return e.id_in_use && e.peer == 7; }));
    BOOST_TEST_REQUIRE(live->wait_event(kind::rejected, "id 1 is in use: it is this processor's"));
    impostor->t().remove_peer(7);
  }
  // Nothing of the impostor's was delivered, and the live connection was never replaced.
  BOOST_TEST(b->received() == 1u);
  BOOST_TEST(b->count_events(kind::peer_down, "") == 0u);
  BOOST_TEST(live->count_events(kind::peer_down, "") == 0u);
  BOOST_TEST(live->t().send(ping_to(2, 2)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(2));
  BOOST_TEST(b->inbox()[1].from == 1u);
  BOOST_TEST(seq_of(b->inbox()[1]) == 2u);

  // The live process stops: nobody answers at 1's address, so the next claim is accepted
  // and its frames flow (those of the refused attempts were lost with their connections).
  const auto gone = live->address();
  live.reset();
  BOOST_TEST_REQUIRE(b->wait_event(kind::peer_down, "to 1 at " + gone));
  BOOST_TEST(impostor->t().send(ping_to(2, 101)) == net::send_status::queued);
  BOOST_TEST_REQUIRE(b->wait_received(3));
  BOOST_TEST(b->inbox()[2].from == 1u);
  BOOST_TEST(seq_of(b->inbox()[2]) == 101u);
  BOOST_TEST(b->count_events(kind::peer_up, "(processor 1): accepted") == 2u);
}
