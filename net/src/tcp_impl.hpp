#pragma once
// Internals of tcp_transport, shared by tcp_transport.cpp (lifecycle, commands),
// tcp_peers.cpp (peers, shaping, reconnection) and tcp_connection.cpp (sockets,
// handshake, reading, writing).
// Not installed.
//
// Threads. Everything below `loop thread only` is touched by the loop thread alone. The
// rest is guarded by `mtx_`, except the byte counters, which are atomic so that the loop
// can release bytes without the lock, and each peer's direct path (`byte_counter::fd`,
// `byte_counter::queued_frames`), guarded by its own `byte_counter::direct_mtx`. Lock
// order: a peer's `direct_mtx`, then `mtx_`; the loop never takes a `direct_mtx` while it
// holds `mtx_`. Callbacks run on the loop thread without `mtx_`.
//
// Lifetimes. Every libuv handle lives until its close callback: a connection owns a TCP
// handle and a timer and deletes itself when both have closed; `loop_timer` nodes delete
// themselves in their close callback; write requests complete (ECANCELED at worst)
// before their stream's close callback, so they may point at their connection.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <uv.h>

#include "banyan/net/id_claim.hpp"
#include "banyan/net/log_limiter.hpp"
#include "banyan/net/record_cipher.hpp"
#include "banyan/net/tcp_transport.hpp"
#include "banyan/schema/codec.hpp"
#include "banyan/schema/handshake.hpp"

namespace banyan::net::detail {

using clock = std::chrono::steady_clock;

/// Bytes handed to libuv at most per outbound connection; the rest waits in the peer's
/// queue, where it survives a reconnect (see docs/transport.md).
inline constexpr std::size_t write_window = 1u << 20;
/// Frames gathered into one uv_write at most.
inline constexpr std::size_t max_batch_frames = 64;
/// Size of a connection's read buffer.
inline constexpr std::size_t read_chunk = 64u << 10;
/// Reads straight into a large frame's own buffer (frame_decoder::direct_buffer) when
/// at least this much of it is missing, and at most this much per read.
inline constexpr std::size_t min_direct_read = 16u << 10;
inline constexpr std::size_t max_direct_read = 4u << 20;
/// Pending connections the listening socket's backlog holds (the kernel caps it).
inline constexpr int listen_backlog = 1024;
/// Plaintext bytes per record the sender seals at most: as many as a receiver accepts, a
/// 1 MiB broadcast segment's payload in one record. The receiver reads a record's
/// ciphertext straight into place in reads of up to the whole record; smaller records
/// (256 KiB) keep more of it in cache but cost more reads, and window updates that each
/// push the sender's next packets on the receiver's CPU (on loopback): 4-8 % more CPU
/// (docs/decisions.md).
inline constexpr std::size_t sealed_record = max_record;
/// Connections accepted per turn of the loop at most; the rest wait in the backlog, so
/// that reads of handshakes under way are not starved by a flood of new connections.
inline constexpr int max_accepts_per_turn = 32;

/// Frames of at most this many bytes may be written by `send` straight to an idle
/// connection's socket (the direct path, docs/transport.md "Threading"); larger ones
/// always go through the loop.
inline constexpr std::size_t direct_write_max = 64u << 10;

/// Bytes accepted for one peer and not yet handed to the kernel, and the peer's direct
/// path. Shared by the directory (`send`) and the loop; a removed peer's counter goes
/// away with its frames.
struct byte_counter {
  std::atomic<std::size_t> bytes{0};
  /// Guards `fd` and `queued_frames`; held across a direct write, so that the loop
  /// cannot begin a write of its own, or close the socket, in the middle of one.
  std::mutex direct_mtx;
  /// The established outbound connection's socket while it is idle (nothing in libuv,
  /// nothing waiting in the peer's queues, `queued_frames` 0): any thread holding
  /// `direct_mtx` may then write a whole frame to it. -1 otherwise. Set by the loop only.
  int fd = -1;
  /// Frames `send` gave to the loop (in `commands_`, or being processed) and the loop
  /// has not yet put in the peer's queues. While any are, nobody writes directly, so
  /// nothing overtakes them.
  std::size_t queued_frames = 0;
  /// With `fd`: the connection's record sealer (null in plaintext mode), which a direct
  /// write seals with, and the connection's serial number. The loop's writes and direct
  /// writes never overlap (see `fd`), so records are sealed in the order they are sent.
  record_sealer* sealer = nullptr;
  std::uint64_t serial = 0;
};
using counter_ptr = std::shared_ptr<byte_counter>;

/// One encoded frame on its way out.
struct out_frame {
  schema::frame_bytes bytes; ///< head, then the payload left in place (if any)
  clock::time_point release{}; ///< the shaper lets it go at this time (first: send time)
  /// `send_options::return_undeliverable`: the envelope, handed back if the peer turns
  /// out unreachable or is removed before the frame reaches the kernel.
  std::optional<wire::envelope> keep;
  /// Bytes of the frame already handed to libuv (encrypted mode seals and writes a large
  /// frame a window at a time); `bytes.size() - sent` are still charged.
  std::size_t sent = 0;
  /// Nonzero: `bytes` is the rest of a frame a direct write began on the connection with
  /// this serial (already sealed, in encrypted mode). It can only follow on that
  /// connection; on another it is dropped (the receiver never sees that frame).
  std::uint64_t partial_on = 0;
  std::size_t charged() const { return bytes.size() - sent; }
};

/// A libuv timer whose handle lives on the heap until its close callback, so the owner
/// may go away at once. Loop thread only.
class loop_timer {
public:
  loop_timer() = default;
  ~loop_timer() { close(); }
  loop_timer(const loop_timer&) = delete;
  loop_timer& operator=(const loop_timer&) = delete;

  void init(uv_loop_t* loop, std::function<void()> fn);
  /// (Re)starts; the delay is rounded up to whole milliseconds.
  void start(duration after);
  void stop();
  bool active() const;
  /// `fn` is never called after this.
  void close();

private:
  struct node {
    uv_timer_t handle{};
    std::function<void()> fn;
  };
  node* node_ = nullptr;
};

struct connection;

/// An acceptor's progress through the record it is reading (encrypted mode).
struct record_in {
  std::uint8_t header[record_header_bytes] = {};
  std::size_t header_len = 0;
  std::size_t len = 0;          ///< the record's length, once the header is in
  std::size_t got = 0;          ///< ciphertext bytes received
  std::uint8_t* dest = nullptr; ///< where the ciphertext goes: `staging` or the decoder's buffer
  bool direct = false;          ///< `dest` is the decoder's direct buffer
  std::uint8_t tag[record_tag_bytes] = {};
  std::size_t tag_len = 0;
  /// Nonzero after a record that went straight into the decoder's buffer (2), and for
  /// one record after that (1): read no further than the next record's header (as after
  /// the body of a record read into place), so that the next payload is not pulled into
  /// the read buffer and copied.
  int exact_tail = 0;
  std::unique_ptr<std::uint8_t[]> staging;
  std::size_t staging_size = 0;
};
/// What the loop knows about one peer it sends to.
struct peer_state {
  proc_id id = no_proc;
  std::string address;
  counter_ptr queued;
  std::deque<out_frame> delay_line; ///< shaped frames, by release time
  std::deque<out_frame> ready;      ///< frames waiting for the connection's window
  connection* out = nullptr;        ///< the outbound connection, in any phase
  loop_timer retry;                 ///< reconnect backoff
  loop_timer shaper;                ///< releases the delay line
  bool resolving = false;           ///< a host name lookup is under way
  duration backoff{0};              ///< the next reconnect delay after a failed attempt
  clock::time_point link_free{};    ///< the emulated link is busy until then
};

/// One TCP connection, inbound or outbound, from connect/accept to close.
struct connection {
  enum class role { initiator, acceptor };
  enum class phase {
    connecting,  ///< initiator: TCP connect under way
    hello,       ///< initiator: awaiting HelloAck; acceptor: awaiting Hello
    proof,       ///< acceptor: awaiting the initiator's HelloAck
    claiming,    ///< acceptor: authenticated; its claim to `peer` waits for our connection
                 ///< to `peer`'s address (id_claim.hpp); not reading meanwhile
    established, ///< initiator: sending Frames; acceptor: receiving them
    draining,    ///< a last handshake message is being written, then close
    closing,     ///< handles are closing
  };

  connection(tcp_impl* o, role r, std::size_t max_frame)
      : owner(o), side(r), decoder(max_frame), read_buf(read_chunk) {}

  tcp_impl* owner;
  std::uint64_t serial = 0; ///< unique per transport, never 0
  uv_tcp_t tcp{};
  uv_timer_t timer{};
  uv_connect_t connect_req{};
  role side;
  phase state = phase::connecting;
  proc_id peer = no_proc;  ///< initiator: whom we meant to reach; acceptor: who said hello
  std::string remote;      ///< the address, for log lines
  schema::hello hello_msg; ///< the Hello of this connection (ours or the initiator's)
  schema::nonce acceptor_nonce{};
  /// Initiator: the acceptor's session, from its HelloAck (the initiator's own is in
  /// `hello_msg`, as is an acceptor's peer's).
  std::uint64_t peer_session = 0;
  /// Acceptor, `claiming`: bytes that came behind the initiator's proof, fed to the
  /// decoder once the claim is accepted.
  std::vector<std::uint8_t> held;
  /// Initiator: the acceptor refused our processor id (`refusal::id_in_use`).
  bool refused_id = false;
  /// The handshake timer found the peer's bytes already waiting in the socket and gave
  /// the handshake another period once (`tcp_impl::on_timeout`).
  bool stall_extended = false;
  schema::handshake_reader handshake;
  schema::frame_decoder decoder;
  std::vector<char> read_buf;
  bool direct_read = false;  ///< the last read buffer given to libuv is the decoder's
  std::size_t in_flight = 0; ///< bytes handed to uv_write and not completed
  bool up = false;           ///< handshake done, peer_up reported
  bool unreachable = false;  ///< initiator: nobody (or `reached`) runs at the address
  proc_id reached = no_proc; ///< initiator: the processor that answered instead
  bool pending = false;      ///< counted in tcp_impl::pending_inbound_
  bool reset = false;        ///< closed with a TCP reset (reset_inbound), not a close
  counter_ptr link;          ///< initiator: the peer's counter, whose `fd` may be this socket
  std::string remote_ip;     ///< acceptor: the initiator's address without the port
  std::list<connection*>::iterator pending_at; ///< with `pending`: its place in the budget
  std::unique_ptr<record_sealer> sealer;       ///< initiator, established, encrypted mode
  std::unique_ptr<record_opener> opener;       ///< acceptor, established, encrypted mode
  record_in rec;                               ///< acceptor, established, encrypted mode
  int open_handles = 0;
};

/// A uv_write of one or more frames that owns their bytes.
struct write_req {
  uv_write_t req{};
  connection* conn = nullptr;
  std::vector<schema::frame_bytes> frames; ///< kept alive until written
  /// Sealed records (encrypted mode), kept alive until written: buffer and size.
  std::vector<std::pair<std::unique_ptr<std::uint8_t[]>, std::size_t>> sealed;
  std::vector<uv_buf_t> bufs;
  std::size_t bytes = 0;    ///< total of frames
  std::size_t wire_bytes = 0;   ///< what goes to the socket (sealed records: with their overhead)
  std::size_t whole_frames = 0; ///< frames whose last byte is in this write
  counter_ptr counter;      ///< charged for the frames (none for handshake messages)
  bool close_after = false; ///< close the connection once written (a final answer)
};

/// A pending host name lookup for a peer.
struct resolve_req {
  uv_getaddrinfo_t req{};
  tcp_impl* owner = nullptr;
  proc_id peer = no_proc;
  counter_ptr incarnation; ///< the peer's counter: a removed and re-added peer is another
};

/// Something `send`, `add_peer` or `remove_peer` asks the loop to do.
struct command {
  enum class kind { frame, local, add_peer, remove_peer, call, reset_inbound, drop_peer } what = kind::frame;
  proc_id peer = no_proc;
  std::string address;                 // add_peer
  counter_ptr counter;                 // add_peer, frame: the counter charged
  out_frame frame;                     // frame
  std::optional<wire::envelope> local; // local
  bool returned = false;               // local: handed back to ourselves
  std::size_t bytes = 0;               // frame, local: bytes charged
  std::function<void()> fn;            // call
};

class tcp_impl {
public:
  tcp_impl(tcp_config cfg, tcp_transport::deliver_fn deliver, tcp_transport::event_fn events);
  ~tcp_impl();

  // --- the public API (any thread) ---------------------------------------------------
  expected<std::uint16_t> start();
  void add_peer(proc_id id, std::string host_port);
  void remove_peer(proc_id id);
  void reset_inbound(proc_id id);
  void drop_peer(proc_id id);
  send_status send(wire::envelope e, send_options opt);
  std::size_t queued_bytes(proc_id id) const;
  bool drain(duration timeout) const;
  void stop();
  std::uint16_t port() const;
  bool post(std::function<void()> fn);
  bool busy_polling() const { return cfg_.busy_poll > duration::zero(); }

  // --- loop thread only (tcp_transport.cpp, tcp_peers.cpp) ------------------------------
  void on_async();
  /// The loop thread: runs the loop until it ends, polling for `busy_poll` after activity.
  void run_loop();
  void process(command& c);
  void enqueue(peer_state& p, out_frame f);
  void release_delay_line(peer_state& p);
  void flush(peer_state& p);
  /// Opens the peer's direct path (its socket in `byte_counter::fd`) when its outbound
  /// connection is established and idle and no frame is on its way to the loop; closes
  /// it otherwise. Call whenever one of those changes.
  void update_direct(peer_state& p);
  /// Connects to `p` if frames wait for it, or at once when `judging` (a claim to `p`'s id
  /// waits for the answer), even within a backoff.
  void maybe_connect(peer_state& p, bool judging = false);
  void on_resolved(resolve_req* r, int status, addrinfo* res);
  /// Arms the reconnect timer after an outbound connection closed or could not be made;
  /// returns the delay.
  duration after_outbound_closed(peer_state& p, bool was_up);
  peer_state* find_peer(proc_id id);
  peer_state& create_peer(proc_id id, std::string address, counter_ptr counter);
  /// Forgets peer `id`; `settle`: judges the claims to its id that wait (see `judge`).
  /// `give_back`: what is queued for it comes back (`undeliverable`); else it is dropped.
  void erase_peer(proc_id id, bool settle = true, bool give_back = true);
  /// reset_inbound on the loop.
  void reset_conn_from(proc_id id);
  void drop_frames(peer_state& p);
  /// Takes the frames to be returned (`out_frame::keep`) out of `p`'s queues and reports
  /// them in an `undeliverable` event; the others stay queued.
  void return_frames(peer_state& p, const std::string& why);
  void learn_peer(proc_id id, const std::string& address);
  void begin_shutdown();
  void release(const counter_ptr& c, std::size_t n);
  void emit(transport_event::kind k, proc_id peer, std::string detail);
  void emit(transport_event ev);
  /// A line about hostile input from `c` (inbound): rate-limited per remote address.
  void emit_hostile(const connection* c, transport_event ev);
  /// A line about a refused id claim from `c` (inbound): rate-limited per remote address
  /// and claimed id.
  void emit_refusal(const connection* c, transport_event ev);
  void deliver(wire::envelope&& e);

  // --- loop thread only (tcp_connection.cpp) ------------------------------------------
  void connect_to(peer_state& p, const sockaddr* addr);
  void on_accept(int status);
  /// Runs at the start of each turn of the loop: a fresh accept budget, and the
  /// connection held back by the last one accepted.
  void on_turn();
  void on_connect(connection* c, int status);
  void on_read(connection* c, ssize_t nread);
  void on_timeout(connection* c);
  void on_write(write_req* w, int status);
  void on_bytes(connection* c, const std::uint8_t* p, std::size_t n);
  void on_hello(connection* c);
  void on_acceptor_ack(connection* c);
  void on_initiator_ack(connection* c);
  void on_frames(connection* c, const std::uint8_t* p, std::size_t n);
  /// Initiator, established: a further HelloAck from the acceptor (a refusal).
  void on_refusal(connection* c, const std::uint8_t* p, std::size_t n);
  /// Acceptor, authenticated: judges `c`'s claim to its processor id (id_claim.hpp);
  /// `unanswered`: the connection opened to judge it failed.
  void judge(connection* c, bool unanswered);
  /// What we know of the process at the address we have for `id`.
  id_holder holder_of(proc_id id) const;
  /// Judges again the claims to `id` that wait (see `judge`).
  void settle_claims(proc_id id, bool unanswered);
  /// Takes `c` out of the claims that wait.
  void unpark(connection* c);
  /// Acceptor: `c`'s handshake is complete and its claim accepted: frames flow.
  void establish_inbound(connection* c);
  /// Acceptor: refuses `c`, whose initiator claims an id another process holds; `after_proof`:
  /// the initiator proved the secret (the refusal is a further HelloAck), else it is the
  /// answer to its Hello.
  void refuse_id(connection* c, bool after_proof);
  /// Acceptor, encrypted mode: record bytes after the handshake.
  void on_records(connection* c, const std::uint8_t* p, std::size_t n);
  /// The header of `c`'s next record is in: where its ciphertext goes. False: closed.
  bool begin_record(connection* c);
  /// `c`'s record is complete: authenticates, decrypts and decodes it.
  void finish_record(connection* c);
  /// Where libuv reads `c`'s next bytes (encrypted acceptor, established); false: the
  /// read buffer, in full.
  bool record_read_buffer(connection* c, uv_buf_t* buf);
  /// Encrypted mode: seals the frame at the front of `p.ready` into `w`, its head at once
  /// and its payload while the window has room; true when the frame is all sealed.
  bool seal_frame(connection* c, out_frame& f, write_req& w);
  /// Admits an accepted connection into the strangers' budget; false if refused (closed).
  bool admit_stranger(connection* c);
  void leave_budget(connection* c);
  /// Acceptor: frames decoded on `c`, delivered (or handed back) in order.
  void on_decoded(connection* c, std::vector<schema::frame>& frames);
  void pump(connection* c, peer_state& p);
  bool write_raw(connection* c, std::vector<std::uint8_t> bytes, bool close_after);
  void reject(connection* c, const std::string& why, connection_failure f);
  /// Closes `c` (idempotent). `kind`/`why` describe the cause; an empty `why` logs
  /// nothing. A connection that was up also reports peer_down. `f`: why it failed
  /// (counted in `stats_`; none for a connection that simply closed).
  void close_conn(connection* c, transport_event::kind kind, const std::string& why,
                  connection_failure f = connection_failure::none);
  /// Counts a failed connection of `side` (not while shutting down).
  void count_failure(connection::role side, connection_failure f);
  void on_handle_closed(connection* c);
  std::string describe(const connection* c) const;
  /// What each connection's decoder asks where large payloads go (null: no sink).
  const schema::payload_sink* payload_sink() const {
    return cfg_.payload_sink ? &cfg_.payload_sink : nullptr;
  }

  // --- configuration and callbacks (immutable after construction) ---------------------
  const tcp_config cfg_;
  /// This process, in Hello and HelloAck: random, never 0.
  const std::uint64_t session_;
  const tcp_transport::deliver_fn deliver_;
  const tcp_transport::event_fn events_;

  // --- shared, guarded by mtx_ --------------------------------------------------------
  enum class run_state { idle, running, stopping, stopped };
  mutable std::mutex mtx_;
  mutable std::condition_variable drained_;
  run_state state_ = run_state::idle;
  struct directory_entry {
    std::string address;
    counter_ptr queued;
  };
  std::unordered_map<proc_id, directory_entry> directory_;
  std::vector<command> commands_;
  std::uint16_t port_ = 0;
  counter_ptr self_queued_ = std::make_shared<byte_counter>();
  std::atomic<std::size_t> total_queued_{0};
  std::atomic<bool> callbacks_on_{true}; ///< false once stop() began
  std::mutex join_mtx_;                  ///< one joiner at a time
  std::thread thread_;
  std::thread::id loop_thread_;

  // --- loop thread only ---------------------------------------------------------------
  uv_loop_t loop_{};
  uv_async_t async_{};
  uv_tcp_t listener_{};
  uv_prepare_t turn_{};
  int accepts_this_turn_ = 0;
  bool accept_held_ = false; ///< libuv holds an accepted connection we have not taken
  bool shutting_down_ = false;
  /// A frame sent from a callback is being processed at once (`send`): events it causes
  /// wait in `deferred_events_` for the next turn of the loop, so that no callback runs
  /// inside a caller that may hold its own locks.
  bool direct_ = false;
  /// Callbacks run so far: `run_loop` polls on while this moves.
  std::uint64_t activity_ = 0;
  std::vector<transport_event> deferred_events_;
  std::unordered_map<proc_id, std::unique_ptr<peer_state>> peers_;
  std::unordered_set<connection*> conns_;
  std::unordered_map<proc_id, connection*> inbound_; ///< established, by peer
  std::size_t pending_inbound_ = 0;                  ///< acceptors in their handshake
  /// The same acceptors by remote IP address, oldest first.
  std::unordered_map<std::string, std::list<connection*>> pending_by_address_;
  std::uint64_t next_serial_ = 0;
  log_limiter hostile_log_{cfg_.hostile_log_interval};

  // --- counters, any thread (stats()) --------------------------------------------------
  struct counters {
    std::atomic<std::uint64_t> bytes_sent{0};
    std::atomic<std::uint64_t> bytes_received{0};
    std::atomic<std::uint64_t> frames_sent{0};
    std::atomic<std::uint64_t> frames_received{0};
    std::atomic<std::uint64_t> opened{0};
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> handshake_stalls{0};
    std::array<std::atomic<std::uint64_t>, connection_failure_count> inbound{};
    std::array<std::atomic<std::uint64_t>, connection_failure_count> outbound{};
  };
  counters stats_;
  transport_stats stats() const;
  log_limiter refusal_log_{cfg_.hostile_log_interval};
  /// Inbound connections whose claim to a processor id waits (phase `claiming`), by id.
  std::unordered_map<proc_id, std::vector<connection*>> claims_;
  std::unordered_set<resolve_req*> resolving_;
};

/// "host:port" or "[v6]:port" -> host and port; nothing when malformed.
std::optional<std::pair<std::string, std::uint16_t>> split_host_port(const std::string& hp);

/// "1.2.3.4:5" / "[::1]:5" for a socket address.
std::string format_address(const sockaddr* addr);

/// A fresh nonce from the system's CSPRNG; nothing if it fails.
std::optional<schema::nonce> random_nonce();

/// A session number for this process (`hello::session`): random and never 0. From the
/// system's CSPRNG, else (it failed) from the clock and the address of a local.
std::uint64_t random_session();

/// Encrypted mode: `f` sealed into one buffer of records (its head, then its payload, each
/// cut at max_record), as a direct write sends it.
std::vector<std::uint8_t> seal_whole(record_sealer& s, const schema::frame_bytes& f);

// Shared by the connection sources (tcp_connection.cpp, tcp_id_claims.cpp,
// tcp_records.cpp); defined in tcp_connection.cpp.
connection* conn_of(const void* handle); ///< the connection a libuv handle belongs to
uv_stream_t* stream_of(connection* c);
std::uint64_t ms_of(duration d);     ///< rounded up, for libuv timers
void on_timer(uv_timer_t* t);        ///< a connection's timer: tcp_impl::on_timeout

/// Constant-time comparison of two proofs.
bool proofs_equal(const schema::proof& a, const schema::proof& b);

} // namespace banyan::net::detail
