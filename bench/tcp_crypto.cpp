// What encrypting every frame costs the TCP transport, side by side with plaintext in one
// run (docs/transport.md, "Security"). Two transports in this process on 127.0.0.1:
//
//   bandwidth  a 64 MiB message sent as 64 broadcast segments of 1 MiB (the node's
//              segment size for long broadcasts), received in place through a payload
//              sink as a node does; time from the first send to the last delivery
//   latency    1-byte round trips: a ping, answered from the receiver's callback with a
//              pong; the median round trip
//   shaped     the bandwidth case over a link shaped to 4 Gbit/s (tcp_config::shaper):
//              a link slower than the cipher, as most wide-area links are
//
// The modes alternate run by run, so that drift in the machine's load hits both alike;
// medians and their ratio (encrypted / plaintext) are printed, with the bandwidth case's
// CPU split between the sender's loop thread, the receiver's, and the rest (the thread
// that sends); "the cipher alone" is the CPU that sealing and opening 64 MiB takes on one
// thread with no transport around it, and its ratio is to the plaintext transport's CPU.
//
//   bench_tcp_crypto [--runs 7] [--messages 4] [--round-trips 2000] [--shaped 1]
//                    [--only plaintext|encrypted]
//
// `--shaped 0` leaves the shaped case out; `--only MODE` runs that mode's bandwidth case
// alone, over and over, for a profiler.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/resource.h>
#include <time.h>

#include "banyan/core/buffer_pool.hpp"
#include "banyan/core/segment_placement.hpp"
#include "banyan/net/record_cipher.hpp"
#include "banyan/net/tcp_transport.hpp"

namespace net = banyan::net;
namespace wire = banyan::wire;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t message_bytes = 64u << 20;
constexpr std::size_t segment_bytes = 1u << 20;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec)
         + static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The threads of this process.
std::vector<long> thread_ids() {
  std::vector<long> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.')
        out.push_back(std::atol(e->d_name));
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The one thread in `after` that is not in `before` (0 if not exactly one).
long new_thread(const std::vector<long>& before, const std::vector<long>& after) {
  std::vector<long> added;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  return added.size() == 1 ? added[0] : 0;
}

// CPU seconds (user + system) of thread `tid` of this process, in nanoseconds' resolution:
// Linux's clock of a thread given by its id, as glibc's pthread_getcpuclockid builds it.
double thread_cpu_seconds(long tid) {
  const clockid_t clk = static_cast<clockid_t>((~static_cast<unsigned long>(tid) << 3) | 6);
  timespec ts{};
  if (tid == 0 || clock_gettime(clk, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A receiver that counts what arrived; the test thread waits on it.
struct inbox {
  std::mutex m;
  std::condition_variable cv;
  std::size_t segments = 0;
  std::size_t pongs = 0;
  template <class Pred> bool wait(Pred p) {
    std::unique_lock<std::mutex> lk(m);
    return cv.wait_for(lk, std::chrono::seconds(60), p);
  }
};

struct pair_of_transports {
  banyan::buffer_pool pool{256u << 20};
  banyan::segment_placement placement{pool, 256u << 20};
  inbox at_b;
  inbox at_a;
  std::unique_ptr<net::tcp_transport> a;
  std::unique_ptr<net::tcp_transport> b;
  long a_thread = 0; ///< the sender's loop thread
  long b_thread = 0; ///< the receiver's loop thread

  explicit pair_of_transports(bool plaintext, double link_rate = 0) {
    net::tcp_config cb;
    cb.self = 2;
    cb.secret = "bench";
    cb.plaintext = plaintext;
    cb.max_queue_bytes = 256u << 20;
    cb.payload_sink =
        [this](
            const banyan::schema::payload_head& h) -> std::optional<banyan::schema::payload_place> {
      auto slot = placement.place(h.op, h.index, h.count, h.total, h.length);
      if (!slot)
        return std::nullopt;
      return banyan::schema::payload_place{std::move(slot->region), slot->dest};
    };
    b = std::make_unique<net::tcp_transport>(
        cb,
        [this](wire::envelope&& e) {
          if (auto* p = std::get_if<wire::ping>(&e.body)) {
            b->send({2, 1, wire::pong{p->seq}}); // from the callback, as a node answers
            return;
          }
          std::lock_guard<std::mutex> lk(at_b.m);
          ++at_b.segments;
          at_b.cv.notify_all();
        },
        net::tcp_transport::event_fn{});
    net::tcp_config ca = cb;
    ca.self = 1;
    ca.payload_sink = {};
    if (link_rate > 0)
      ca.shaper = [link_rate](banyan::proc_id) { return net::link_shape{{}, link_rate}; };
    a = std::make_unique<net::tcp_transport>(
        ca,
        [this](wire::envelope&&) {
          std::lock_guard<std::mutex> lk(at_a.m);
          ++at_a.pongs;
          at_a.cv.notify_all();
        },
        net::tcp_transport::event_fn{});
    const auto t0 = thread_ids();
    const auto pb = b->start();
    const auto t1 = thread_ids();
    const auto pa = a->start();
    b_thread = new_thread(t0, t1);
    a_thread = new_thread(t1, thread_ids());
    if (!pb || !pa) {
      std::fprintf(stderr, "cannot start the transports\n");
      std::exit(1);
    }
    a->add_peer(2, "127.0.0.1:" + std::to_string(*pb));
    b->add_peer(1, "127.0.0.1:" + std::to_string(*pa));
    round_trips(10); // both connections up
  }

  // Seconds for `messages` messages of 64 MiB, each in 1 MiB segments, to arrive whole.
  double bandwidth(const banyan::shared_bytes& message, int messages, std::uint64_t& seq) {
    const std::size_t count = message_bytes / segment_bytes;
    const std::size_t before = at_b.segments;
    const auto t0 = steady::now();
    for (int m = 0; m < messages; ++m) {
      const wire::collective_id op{1, ++seq};
      for (std::uint32_t i = 0; i < count; ++i) {
        wire::bcast_segment s;
        s.op = op;
        s.kind = banyan::tree_kind::bandwidth;
        s.vnodes = banyan::vnode_set::range(0, 1024);
        s.first = i == 0;
        s.index = i;
        s.count = static_cast<std::uint32_t>(count);
        s.total = message_bytes;
        s.payload = message.slice(i * segment_bytes, segment_bytes);
        while (a->send({1, 2, s}) == net::send_status::backpressure)
          a->drain(std::chrono::milliseconds(1));
      }
    }
    const std::size_t want = before + count * static_cast<std::size_t>(messages);
    if (!at_b.wait([&] { return at_b.segments >= want; })) {
      std::fprintf(stderr, "segments lost\n");
      std::exit(1);
    }
    return std::chrono::duration<double>(steady::now() - t0).count();
  }

  // Seconds per 1-byte round trip: the median of `n` (a round trip whose thread the
  // scheduler put off counts once, not by its length).
  double round_trips(int n) {
    std::vector<double> each;
    each.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      std::size_t want;
      {
        std::lock_guard<std::mutex> lk(at_a.m);
        want = at_a.pongs + 1;
      }
      const auto t0 = steady::now();
      a->send({1, 2, wire::ping{static_cast<std::uint64_t>(i)}});
      if (!at_a.wait([&] { return at_a.pongs >= want; })) {
        std::fprintf(stderr, "round trip lost\n");
        std::exit(1);
      }
      each.push_back(std::chrono::duration<double>(steady::now() - t0).count());
    }
    std::sort(each.begin(), each.end());
    return each[each.size() / 2];
  }
};

// CPU seconds of this thread.
double own_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The cipher alone, on this thread: CPU seconds to seal `message` in records of 1 MiB
// (the transport's record size) into one buffer and open each again in place, as the
// sender and the receiver of one hop do.
double cipher_seconds(const banyan::shared_bytes& message) {
  constexpr std::size_t record = net::max_record;
  net::record_key k;
  k.key[0] = 1;
  net::record_sealer sealer(k);
  net::record_opener opener(k);
  std::vector<std::uint8_t> buf(record + net::record_overhead);
  const double t0 = own_cpu_seconds();
  for (std::size_t at = 0; at < message.size(); at += record) {
    const std::size_t n = std::min(record, message.size() - at);
    sealer.seal(message.data() + at, n, buf.data());
    if (!opener.open(buf.data(), buf.data() + net::record_header_bytes, n,
                     buf.data() + net::record_header_bytes + n)) {
      std::fprintf(stderr, "a record failed to open\n");
      std::exit(1);
    }
  }
  return own_cpu_seconds() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int runs = 7;
  int messages = 4;
  int trips = 2000;
  std::string only;
  bool with_shaped = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs"))
      runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--messages"))
      messages = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--round-trips"))
      trips = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shaped"))
      with_shaped = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  std::vector<std::uint8_t> bytes(message_bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>(i * 131 + (i >> 12));
  const banyan::shared_bytes message(std::move(bytes));

  if (!only.empty()) {
    if (only != "plaintext" && only != "encrypted") {
      std::fprintf(stderr, "bench_tcp_crypto: --only takes plaintext or encrypted\n");
      return 2;
    }
    pair_of_transports t(only == "plaintext");
    std::uint64_t seq = 0;
    t.bandwidth(message, 1, seq);
    std::vector<double> bw;
    for (int r = 0; r < runs; ++r)
      bw.push_back(static_cast<double>(message_bytes >> 20) * messages
                   / t.bandwidth(message, messages, seq));
    std::printf("%s, 64 MiB in 1 MiB segments, %d runs: median %.0f MiB/s\n", only.c_str(), runs,
                median(bw));
    return 0;
  }
  constexpr double link_rate = 4e9 / 8; // 4 Gbit/s
  pair_of_transports plain(true);
  pair_of_transports sealed(false);
  pair_of_transports plain_shaped(true, link_rate);
  pair_of_transports sealed_shaped(false, link_rate);
  std::uint64_t seq = 0;
  for (auto* t : {&plain, &sealed, &plain_shaped, &sealed_shaped})
    t->bandwidth(message, 1, seq); // warm-up: buffers, pages, connections
  std::vector<double> bw[2], cpu[2], rtt[2], shaped[2], cpu_a[2], cpu_b[2], cipher;
  const double mib = static_cast<double>(message_bytes >> 20) * messages;
  for (int r = 0; r < runs; ++r) {
    cipher.push_back(cipher_seconds(message));
    for (int mode = 0; mode < 2; ++mode) {
      auto& t = mode == 0 ? plain : sealed;
      const double c0 = cpu_seconds();
      const double a0 = thread_cpu_seconds(t.a_thread), b0 = thread_cpu_seconds(t.b_thread);
      const double s = t.bandwidth(message, messages, seq);
      const double c1 = cpu_seconds();
      const double a1 = thread_cpu_seconds(t.a_thread), b1 = thread_cpu_seconds(t.b_thread);
      bw[mode].push_back(mib / s);
      cpu[mode].push_back((c1 - c0) / messages);
      cpu_a[mode].push_back((a1 - a0) / messages);
      cpu_b[mode].push_back((b1 - b0) / messages);
      rtt[mode].push_back(t.round_trips(trips) * 1e6);
      if (with_shaped) {
        auto& u = mode == 0 ? plain_shaped : sealed_shaped;
        shaped[mode].push_back(mib / u.bandwidth(message, messages, seq));
      }
    }
  }
  std::printf("TCP transport on 127.0.0.1, %d runs (modes alternating), medians\n", runs);
  std::printf("%-34s %12s %12s %9s\n", "", "plaintext", "encrypted", "ratio");
  const double b0 = median(bw[0]), b1 = median(bw[1]);
  const double c0 = median(cpu[0]), c1 = median(cpu[1]);
  const double r0 = median(rtt[0]), r1 = median(rtt[1]);
  std::printf("%-34s %12.0f %12.0f %9.3f\n", "64 MiB in 1 MiB segments, MiB/s", b0, b1, b1 / b0);
  std::printf("%-34s %12.3f %12.3f %9.3f\n", "  CPU s per 64 MiB (both sides)", c0, c1, c1 / c0);
  const double a0 = median(cpu_a[0]), a1 = median(cpu_a[1]);
  const double d0 = median(cpu_b[0]), d1 = median(cpu_b[1]);
  std::printf("%-34s %12.3f %12.3f %9.3f\n", "    sender's loop thread", a0, a1, a1 / a0);
  std::printf("%-34s %12.3f %12.3f %9.3f\n", "    receiver's loop thread", d0, d1, d1 / d0);
  const double k1 = median(cipher);
  std::printf("%-34s %12s %12.3f %9.3f\n", "  the cipher alone (seal + open)", "", k1, k1 / c0);
  std::printf("%-34s %12.1f %12.1f %9.3f\n", "1-byte round trip, us", r0, r1, r1 / r0);
  if (!with_shaped)
    return 0;
  const double s0 = median(shaped[0]), s1 = median(shaped[1]);
  std::printf("%-34s %12.0f %12.0f %9.3f\n", "64 MiB, link shaped to 4 Gbit/s, MiB/s", s0, s1,
              s1 / s0);
  return 0;
}
