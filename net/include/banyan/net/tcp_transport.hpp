#pragma once
/// The real network: processors exchanging `wire::envelope`s over TCP, one libuv loop on a
/// thread of its own. It moves the same messages as the emulated network, FIFO per ordered
/// pair of processors, at most once (see docs/transport.md for the whole contract).
///
///     send() (any thread)                loop thread                        peer
///       encode once -> queue --async--> [delay line] -> ready -> uv_write --TCP--> ...
///       backpressure above                (link_shaper)        (window)
///       max_queue_bytes
///
/// Connections: each processor opens its own connection to every peer it sends to and
/// sends only on it; a connection it accepts only receives. So a pair of processors that
/// talk both ways holds two TCP connections, and simultaneous connects need no tie-break.
/// Every connection starts with a challenge-response handshake under the shared secret
/// (schema/handshake.hpp); the secret itself never travels. Then every byte the initiator
/// sends is encrypted and authenticated (AES-256-GCM records under keys derived from the
/// secret and both handshake nonces, record_cipher.hpp), unless the cluster runs
/// `tcp_config::plaintext`. Strangers (connections that have not proved the secret) get
/// their own bounded budget, so they cannot keep members out; input from them is
/// reported at most once per address per `hostile_log_interval`.
///
/// SIGPIPE: libuv writes with plain writev, so a write to a connection the peer has just
/// closed raises SIGPIPE, whose default action ends the process. `start` therefore sets
/// SIGPIPE to be ignored when it still has its default disposition (a handler the
/// program installed is left alone); the write then fails with EPIPE, which closes the
/// connection like any other write error.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/types.hpp"
#include "banyan/schema/handshake.hpp"
#include "banyan/schema/payload_sink.hpp"

namespace banyan::net {

namespace detail {
class tcp_impl; // net/src/tcp_impl.hpp
} // namespace detail

/// How an emulated wide-area link behaves, seen from the sender.
struct link_shape {
  duration delay{0};              ///< one-way latency added to every frame
  rate bandwidth = infinite_rate; ///< bytes per second; frames are paced to it
};

/// Shapes outgoing traffic per destination, so that processes on one host behave like a
/// wide-area grid (the kernel here has no netem). Called on the loop thread, once per
/// frame, with the destination; it must be cheap and must not call the transport.
using link_shaper = std::function<link_shape(proc_id to)>;

/// Everything a transport needs to know. Durations are real time.
struct tcp_config {
  proc_id self = no_proc;                  ///< this processor; must be set
  std::string listen_host = "127.0.0.1";   ///< numeric IPv4/IPv6 address or host name
  std::uint16_t listen_port = 0;           ///< 0: an ephemeral port (see `start`)
  std::string secret;                      ///< shared by the cluster; never sent
  std::size_t max_frame = 64u << 20;       ///< body bytes; larger frames are refused
  std::size_t max_queue_bytes = 64u << 20; ///< per peer; beyond it `send` says backpressure
  duration connect_timeout = std::chrono::seconds(2);
  /// An outbound connection's whole handshake; an inbound one gets the shorter of this
  /// and `accept_timeout`.
  duration handshake_timeout = std::chrono::seconds(2);
  /// Frames travel unencrypted and unauthenticated (only the handshake proves who
  /// connected): for trusted networks only. Both ends of a connection must run the same
  /// mode; a mismatch is refused at the handshake, with a line on both sides.
  bool plaintext = false;
  /// Inbound connections still in their handshake (strangers until they prove the
  /// secret): at most `max_pending_inbound` at once, at most `max_pending_per_address`
  /// from one IP address (a further one from it is refused at once), each for at most
  /// `accept_timeout`. When the budget is full, a new connection still gets a slot: the
  /// oldest stranger from the address holding the most slots is closed. Authenticated
  /// and outbound connections never count against it.
  std::size_t max_pending_inbound = 256;
  std::size_t max_pending_per_address = 8;
  duration accept_timeout = std::chrono::seconds(1);
  /// Lines about hostile or malformed input from inbound connections (events with
  /// `hostile` set): at most one per remote IP address per interval; the next one says
  /// how many were held back.
  duration hostile_log_interval = std::chrono::seconds(10);
  duration backoff_initial = std::chrono::milliseconds(50); ///< first reconnect delay
  duration backoff_max = std::chrono::seconds(2);           ///< doubling stops here
  link_shaper shaper;                                       ///< empty: no shaping
  /// After each burst of activity the loop keeps polling its sockets (without blocking,
  /// yielding the CPU between polls) this long before it sleeps again, so that the next
  /// frame is taken without a wake-up, as MPI libraries poll. Costs CPU while it polls;
  /// 0 (the default): the loop always sleeps in the kernel until there is work.
  duration busy_poll{0};
  /// Receive-in-place (docs/transport.md, "Receiving"): asked, on the loop thread, where
  /// the payload of an incoming large broadcast segment goes before it is read. Empty:
  /// every large frame gets a buffer of its own.
  schema::payload_sink payload_sink;
};

/// What `tcp_transport::send` did with an envelope.
enum class send_status {
  queued,       ///< accepted; it will be sent unless the connection fails first
  backpressure, ///< refused: `max_queue_bytes` already queued for that peer; retry later
  unknown_peer, ///< refused: no address for `to` (see `add_peer`)
  oversized,    ///< refused: the frame would exceed `max_frame`
  stopped,      ///< refused: the transport is not running
};

const char* to_string(send_status s);

/// Why a connection failed or was refused (`transport_event::failure`, counted in
/// `transport_stats`). Labels of `banyan_connection_failures_total` (docs/observability.md).
enum class connection_failure : std::uint8_t {
  none,                ///< not a failure
  connect_failed,      ///< outbound: refused, unreachable, unresolvable, bad address, timed out
  wrong_processor,     ///< outbound: another processor answered at the peer's address
  wrong_secret,        ///< the other side's proof does not match our secret
  version_mismatch,    ///< the other side speaks another protocol version
  mode_mismatch,       ///< one side encrypts, the other runs in plaintext mode
  malformed_handshake, ///< an undecodable or inconsistent Hello/HelloAck, an impossible id
  handshake_timeout,   ///< the handshake did not complete in time
  handshake_closed,    ///< the other side closed the connection during the handshake
  stranger_budget,     ///< inbound: refused or closed to keep the strangers' budget
  malformed_input,     ///< established: a malformed frame or record, a record that failed
                       ///< authentication, frames naming other processors, stray bytes
  closed_mid_frame,    ///< established: the peer closed in the middle of a frame
  io_error,            ///< accept, read or write failed
  id_in_use,           ///< a process claimed a live member's processor id (refused), or ours was
  other,               ///< anything else (no random numbers for a nonce)
};
inline constexpr std::size_t connection_failure_count = 15;
/// "wrong_secret", "stranger_budget", ...
const char* to_string(connection_failure f);

/// What a transport has done since it was made: monotonic counters, read at any time from
/// any thread (`tcp_transport::stats`). Bytes are TCP payload bytes as written to and read
/// from the sockets (handshakes and record overhead included); frames are whole frames.
struct transport_stats {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;     ///< frames whose last byte went to the kernel
  std::uint64_t frames_received = 0; ///< frames decoded (handed-back ones included)
  std::uint64_t connections_opened = 0;   ///< outbound connections that completed the handshake
  std::uint64_t connections_accepted = 0; ///< inbound connections that completed the handshake
  /// Handshake timers that fired with the peer's bytes waiting unread (our own loop had
  /// stalled): the handshake got one more period instead of being refused.
  std::uint64_t handshake_stalls = 0;
  /// Failed or refused connection attempts and broken connections, by side and reason
  /// (indexed by `connection_failure`; `none` stays 0). An outbound peer that stays
  /// unreachable counts one per attempt (the reconnect backoff paces them).
  std::array<std::uint64_t, connection_failure_count> inbound_failures{};
  std::array<std::uint64_t, connection_failure_count> outbound_failures{};
};

/// Something the operator may want to read; one log line each (`to_string`).
struct transport_event {
  enum class kind : std::uint8_t {
    peer_up,       ///< a connection to or from `peer` completed its handshake
    peer_down,     ///< that connection closed
    rejected,      ///< a connection failed its handshake and was closed
    error,         ///< a connect or write failed, or a peer broke the protocol (closed)
    undeliverable, ///< `returned` holds frames that cannot be delivered to `peer`
  } what = kind::error;
  proc_id peer = no_proc; ///< when known
  std::string detail;     ///< e.g. "127.0.0.1:41234: wrong shared secret"
  /// An outbound connection to `peer` could not be established because nobody (or
  /// somebody else) runs at its address: refused, unresolvable or bad address, or
  /// another processor answered (`reached`). Timeouts (slowness) never set it.
  bool unreachable = false;
  /// About input from an inbound connection that failed its handshake or broke the
  /// protocol (malformed, forged or unauthenticated bytes, silence, the handshake
  /// budget): such lines are rate-limited per remote address (`hostile_log_interval`),
  /// and the detail ends with "(untrusted input...)" saying how many were held back.
  bool hostile = false;
  /// `rejected` or `error` about a connection: why it failed (`none` otherwise, and for
  /// a connection that simply closed).
  connection_failure failure = connection_failure::none;
  /// `rejected` because another processor answered at `peer`'s address: its id, as the
  /// acceptor named itself in its HelloAck (before anything was authenticated).
  proc_id reached = no_proc;
  /// `rejected` by `peer` because another process runs under our processor id
  /// (docs/transport.md, "One process per id"): no retry helps while that process runs.
  /// (When this transport refuses an inbound connection for that reason, the `rejected`
  /// line says "id N is in use", rate-limited per address and id, without this flag.)
  bool id_in_use = false;
  /// `undeliverable`: frames sent with `send_options::return_undeliverable` that will not
  /// reach `peer`, in the order they were sent, as they were given to `send` (`to` is
  /// `peer`). Either the peer was found unreachable (the event follows the `error` or
  /// `rejected` one), the peer was removed (`remove_peer`) with them queued, or the peer
  /// handed them back (`send_options::returned`: its receiver did not take them).
  std::vector<wire::envelope> returned;

  transport_event() = default;
  transport_event(kind k, proc_id p, std::string d) : what(k), peer(p), detail(std::move(d)) {}
};

/// How `tcp_transport::send` treats one envelope.
struct send_options {
  /// Hand the envelope back in an `undeliverable` event instead of dropping it when the
  /// peer turns out unreachable or is removed while it is queued. Frames already handed
  /// to the kernel when a connection breaks are not returned (they may have arrived).
  bool return_undeliverable = false;
  /// The envelope goes back to the processor that sent it to us (`to`): its receiver
  /// there gets it in an `undeliverable` event with `peer` = us (`Frame.returned`).
  bool returned = false;
};

const char* to_string(transport_event::kind k);
/// "rejected: 127.0.0.1:41234: wrong shared secret"
std::string to_string(const transport_event& e);

/// HMAC-SHA256(secret, data): the MAC of the handshake's proofs
/// (`schema::proof_transcript`). Public so that tools and tests can speak the handshake.
schema::proof hmac_sha256(std::string_view secret, const std::vector<std::uint8_t>& data);

class tcp_transport {
public:
  /// Called on the loop thread, in arrival order per sender. May call `send`.
  using deliver_fn = std::function<void(wire::envelope&&)>;
  /// Called on the loop thread. May call `send`, `add_peer` and `remove_peer`.
  using event_fn = std::function<void(const transport_event&)>;

  /// Nothing runs before `start`. `events` may be empty.
  tcp_transport(tcp_config cfg, deliver_fn deliver, event_fn events);
  /// Stops (see `stop`).
  ~tcp_transport();
  tcp_transport(const tcp_transport&) = delete;
  tcp_transport& operator=(const tcp_transport&) = delete;

  /// Binds and listens, then starts the loop thread. Returns the port listened on (the
  /// ephemeral one when `listen_port` is 0). Errors: `invalid_argument` (no `self`, a
  /// bad host, called twice or after `stop`), `io_error` (bind or listen failed; nothing
  /// keeps running).
  expected<std::uint16_t> start();

  /// Where to reach processor `id`: "host:port" or "[v6addr]:port". Replaces an earlier
  /// address; the current connection stays until it fails. Thread-safe; allowed before
  /// `start`. A processor that connects to us after a successful handshake is added
  /// automatically (its address as seen by us, with the port it listens on) unless it is
  /// already known.
  void add_peer(proc_id id, std::string host_port);

  /// Forgets `id`: drops what is queued for it (`queued_bytes` falls to 0) and closes the
  /// connection to it. Connections from it stay open. Thread-safe.
  void remove_peer(proc_id id);

  /// Closes the connection from `id` (its own, inbound to us) with a reset (TCP RST)
  /// rather than a close: what it sent on it that we have not read is dropped, and what
  /// it still sends on it, or sends again once a partition heals, the kernel answers with
  /// a reset. For a processor taken for crashed that may be alive on the other side of a
  /// partition: nothing it sent before is taken after the heal, when it may be a member
  /// again under a new incarnation. Its next connection is accepted as ever; ours to it
  /// stays (what we sent it, a crash notice among them, still reaches it). Thread-safe.
  void reset_inbound(proc_id id);

  /// As `remove_peer`, but what is queued for `id` is dropped rather than handed back
  /// (`undeliverable`): for a processor whose side of a partition ours yielded to, what
  /// our earlier incarnation queued for it is stale, and sent again elsewhere it would
  /// deliver twice what that incarnation's side delivered already. Thread-safe.
  void drop_peer(proc_id id);

  /// Queues `e` for `e.to` and returns at once; `e.from` is set to `self`. Encodes on the
  /// calling thread (once; the bytes go to the socket from that buffer). Thread-safe,
  /// also from the callbacks. An envelope to `self` is delivered locally, on the loop.
  /// From a callback (the loop thread), with nothing queued ahead of it, the frame goes
  /// to the peer's queue, and usually the socket, before `send` returns; the events that
  /// may cause (an error, frames returned) come on the next turn of the loop, never
  /// inside `send`.
  send_status send(wire::envelope e, send_options opt = {});

  /// Bytes accepted for `id` and not yet handed to the kernel (or dropped). Thread-safe.
  std::size_t queued_bytes(proc_id id) const;

  /// Waits until nothing is queued for any peer, or `timeout` passes; true if drained.
  /// "Drained" means handed to the kernel, not received.
  bool drain(duration timeout) const;

  /// Closes every connection and handle, drops what is still queued (at most once) and
  /// joins the loop thread; afterwards no callback runs and `send` says `stopped`.
  /// Idempotent. From a callback (the loop thread) it only begins the shutdown; the
  /// destructor then joins.
  void stop();

  /// The port listened on (0 before `start`).
  std::uint16_t port() const;

  /// This process's session (`schema::hello::session`): random, fixed for the
  /// transport's life; it tells this process from another that claims the same id
  /// (docs/transport.md, "One process per id").
  std::uint64_t session() const;

  /// Runs `fn` on the loop thread, after the commands (`send`, `add_peer`, ...) given
  /// before it, like a callback: never concurrently with one, never after `stop`
  /// returns. Returns false, and drops `fn` without running it, when the transport is
  /// not running; `fn` is also dropped unrun when `stop` comes first. Thread-safe. Costs
  /// a wake-up of the loop thread unless it is polling (`busy_polling`).
  bool post(std::function<void()> fn);

  /// The counters so far (all zero before `start`; kept after `stop`). Thread-safe.
  transport_stats stats() const;

  /// Whether the loop polls its sockets after activity instead of sleeping at once
  /// (`tcp_config::busy_poll` > 0): then `post` reaches a loop that is usually awake.
  bool busy_polling() const;

private:
  std::unique_ptr<detail::tcp_impl> impl_;
};

} // namespace banyan::net
