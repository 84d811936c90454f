// banyan::node: the public face of one processor over TCP. It owns (or borrows) the
// actor system, the transport and the node actor (node_actor.cpp), and reads the
// actor's snapshot for inspection.

#include "banyan/actors/node.hpp"

#include <algorithm>
#include <mutex>
#include <random>
#include <utility>

#include "node_actor.hpp"
#include "banyan/core/gather.hpp"

#include "banyan/core/buffer_pool.hpp"
#include "banyan/core/segment_placement.hpp"

namespace banyan {

using namespace banyan::actors;

namespace {

/// "host:port" or "[v6]:port" -> host and port.
std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& s) {
  std::string host;
  std::string port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return std::nullopt;
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon)
      return std::nullopt;
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5
      || port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto p = std::stoul(port);
  if (p > 65535)
    return std::nullopt;
  return std::make_pair(host, static_cast<std::uint16_t>(p));
}

std::string tree_name(tree_key k) {
  return std::string(to_string(k.kind)) + " tree of " + std::to_string(k.root);
}

std::string proc_name(proc_id p) {
  return p == no_proc ? std::string("none") : std::to_string(p);
}

} // namespace

const char* to_string(node_event::kind k) {
  switch (k) {
  case node_event::kind::joined:
    return "joined";
  case node_event::kind::join_failed:
    return "join_failed";
  case node_event::kind::left:
    return "left";
  case node_event::kind::member_joined:
    return "member_joined";
  case node_event::kind::member_left:
    return "member_left";
  case node_event::kind::member_crashed:
    return "member_crashed";
  case node_event::kind::vnodes_adopted:
    return "vnodes_adopted";
  case node_event::kind::vnodes_disowned:
    return "vnodes_disowned";
  case node_event::kind::vnodes_gained:
    return "vnodes_gained";
  case node_event::kind::vnodes_released:
    return "vnodes_released";
  case node_event::kind::parent_changed:
    return "parent_changed";
  case node_event::kind::cycle_broken:
    return "cycle_broken";
  case node_event::kind::busy:
    return "busy";
  case node_event::kind::idle:
    return "idle";
  case node_event::kind::transport:
    return "transport";
  case node_event::kind::collective:
    return "collective";
  case node_event::kind::member_suspected:
    return "member_suspected";
  case node_event::kind::suspicion_cleared:
    return "suspicion_cleared";
  }
  return "?";
}

std::string to_string(const node_event& e) {
  std::string s = to_string(e.what);
  switch (e.what) {
  case node_event::kind::parent_changed:
    return s + ": " + tree_name(e.tree) + ": " + proc_name(e.old_parent) + " -> "
           + proc_name(e.new_parent);
  case node_event::kind::cycle_broken:
    return s + ": " + tree_name(e.tree) + ": left " + proc_name(e.old_parent);
  case node_event::kind::member_joined:
  case node_event::kind::member_left:
    s += ": " + std::to_string(e.peer);
    return e.detail.empty() ? s : s + " at " + e.detail;
  case node_event::kind::transport:
    return e.detail;
  default:
    return e.detail.empty() ? s : s + ": " + e.detail;
  }
}

const char* to_string(supervisor::status s) {
  switch (s) {
  case supervisor::status::idle:
    return "idle";
  case supervisor::status::joining:
    return "joining";
  case supervisor::status::member:
    return "member";
  case supervisor::status::leaving:
    return "leaving";
  case supervisor::status::left:
    return "left";
  }
  return "?";
}

struct node::impl {
  node_config cfg;
  std::unique_ptr<caf::actor_system_config> own_cfg; // when the node owns its system
  std::unique_ptr<caf::actor_system> own_sys;
  caf::actor_system* sys = nullptr;
  std::shared_ptr<node_shared> shared = std::make_shared<node_shared>();

  /// Where received long-broadcast segments go (the transport's payload sink).
  struct receive_buffers {
    /// Idle message buffers kept per node: one 64 MiB message and change.
    static constexpr std::size_t max_idle_bytes = 160u << 20;
    /// Largest message received in place (its buffer is allocated when its first
    /// segment arrives, so this bounds what a peer's announced total can make us
    /// allocate ahead of the data: at most 8 such messages at once). Larger ones take
    /// the copying path.
    static constexpr std::size_t max_message = std::size_t{256} << 20;
    buffer_pool pool{max_idle_bytes};
    segment_placement placement{pool, max_message};
  };

  enum class phase { fresh, running, stopped };
  std::mutex stop_mtx;    // one stop at a time
  mutable std::mutex mtx; // guards the members below
  phase at = phase::fresh;
  std::shared_ptr<net::tcp_transport> transport;
  /// The state machine; the transport's callbacks use it: made before the transport
  /// starts, kept until it has stopped.
  std::unique_ptr<node_core> core;
  std::uint16_t port = 0;
  std::string address;
  net::transport_stats last_transport; ///< the transport's counters when it stopped

  explicit impl(node_config c) : cfg(std::move(c)) {}

  expected<std::uint16_t> start() {
    std::lock_guard<std::mutex> lk(mtx);
    if (at != phase::fresh)
      return make_error(errc::invalid_argument, "node already started");
    if (cfg.id > max_node_id)
      return make_error(errc::invalid_argument,
                        "processor id " + std::to_string(cfg.id) + " is not in [0, "
                            + std::to_string(max_node_id) + "]");
    auto listen = parse_host_port(cfg.listen);
    if (!listen)
      return make_error(errc::invalid_argument,
                        "bad listen address \"" + cfg.listen + "\" (want host:port or [v6]:port)");
    if (cfg.advertise.empty() && (listen->first == "0.0.0.0" || listen->first == "::"))
      return make_error(errc::invalid_argument, "listening on " + listen->first
                                                    + " needs an advertised address");
    if (cfg.op_timeout < std::chrono::milliseconds(1))
      return make_error(errc::invalid_argument, "op_timeout must be at least 1 ms");
    if (!cfg.advertise.empty() && !parse_host_port(cfg.advertise))
      return make_error(errc::invalid_argument, "bad advertised address \"" + cfg.advertise
                                                    + "\" (want host:port or [v6]:port)");
    // The engines' largest frame must fit the transport's: a whole message up to
    // `max_whole`, or a segment (plus a header far below 1 MiB).
    const std::size_t frame_limit = net::tcp_config{}.max_frame - (1u << 20);
    if (cfg.bcast.max_whole > frame_limit || cfg.bcast.segment_size > frame_limit
        || cfg.bcast.max_segment > frame_limit)
      return make_error(errc::invalid_argument,
                        "bcast.max_whole (" + std::to_string(cfg.bcast.max_whole)
                            + "), bcast.segment_size (" + std::to_string(cfg.bcast.segment_size)
                            + ") and bcast.max_segment (" + std::to_string(cfg.bcast.max_segment)
                            + ") must be at most " + std::to_string(frame_limit)
                            + " bytes: larger frames exceed the transport's limit");
    net::tcp_config tc;
    tc.self = cfg.id;
    tc.listen_host = listen->first;
    tc.listen_port = listen->second;
    tc.secret = cfg.secret;
    tc.plaintext = cfg.plaintext;
    tc.shaper = cfg.shaper;
    tc.busy_poll = cfg.busy_poll;
    tc.max_pending_per_address = cfg.handshakes_per_address;
    if (cfg.handshake_timeout > duration{0})
      tc.handshake_timeout = tc.accept_timeout = cfg.handshake_timeout;
    // The whole budget holds at least one address's share.
    tc.max_pending_inbound = std::max(tc.max_pending_inbound, cfg.handshakes_per_address);
    // Receive-in-place: long broadcasts' segments are read straight into their message's
    // buffer (reused through a pool), on the loop thread (docs/transport.md).
    auto placement = std::make_shared<receive_buffers>();
    tc.payload_sink = [placement](const schema::payload_head& h) -> std::optional<schema::payload_place> {
      auto slot = placement->placement.place(h.op, h.index, h.count, h.total, h.length);
      if (!slot)
        return std::nullopt;
      return schema::payload_place{std::move(slot->region), slot->dest};
    };
    // The callbacks run on the loop thread, which starts after `core` is made and is
    // joined (transport->stop) before `core` goes.
    transport = std::make_shared<net::tcp_transport>(
        tc, [this](wire::envelope&& e) { core->deliver(std::move(e)); },
        [this](const net::transport_event& ev) { core->net_event(ev); });
    auto seed = cfg.seed;
    if (seed == 0)
      seed = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    core = std::make_unique<node_core>(*sys, cfg, seed, transport, shared);
    auto p = transport->start();
    if (!p) {
      at = phase::stopped;
      core->shutdown();
      transport.reset();
      return p.err();
    }
    port = *p;
    if (!cfg.advertise.empty())
      address = cfg.advertise;
    else if (listen->first.find(':') != std::string::npos)
      address = "[" + listen->first + "]:" + std::to_string(port);
    else
      address = listen->first + ":" + std::to_string(port);
    core->set_address(address);
    at = phase::running;
    return port;
  }

  std::future<result> submit(node_request::kind what, vnode_set vnodes,
                             std::vector<node_contact> contacts, completion done) {
    auto req = std::make_shared<node_request>();
    req->what = what;
    req->vnodes = std::move(vnodes);
    req->contacts = std::move(contacts);
    return submit(std::move(req), std::move(done));
  }

  /// Runs `req` on the state machine; `refused`: answer it with that at once instead.
  std::future<result> submit(node_request_ptr req, completion done,
                             std::optional<error> refused = std::nullopt) {
    auto promise = std::make_shared<std::promise<result>>();
    auto future = promise->get_future();
    req->done = [promise, done = std::move(done)](const result& r) {
      if (done)
        done(r);
      promise->set_value(r);
    };
    std::unique_lock<std::mutex> lk(mtx);
    if (refused) {
      lk.unlock();
      auto fn = std::move(req->done);
      req->done = nullptr;
      fn(*refused);
      return future;
    }
    if (at == phase::running) {
      auto* c = core.get();
      lk.unlock(); // the node's own handlers may read it meanwhile
      c->request(std::move(req));
    } else {
      auto fn = std::move(req->done);
      req->done = nullptr;
      fn(make_error(at == phase::fresh ? errc::invalid_argument : errc::stopped,
                    at == phase::fresh ? "node not started" : "node stopped"));
    }
    return future;
  }

  /// Runs `r` on the state machine, or answers it at once when the node is not running.
  void submit(collective_request_ptr r) {
    if (r->what != collective_request::kind::outcome) { // not an operation of its own
      r->counters = shared->counters;
      r->counters->collective(r->counted_kind(), node_counters::started);
    }
    std::unique_lock<std::mutex> lk(mtx);
    if (at == phase::running) {
      auto* c = core.get();
      lk.unlock();
      c->collective(r);
      return;
    }
    auto err = make_error(at == phase::fresh ? errc::invalid_argument : errc::stopped,
                          at == phase::fresh ? "node not started" : "node stopped");
    if (r->what == collective_request::kind::reduce)
      r->answer(expected<reduce_result>(err));
    else if (r->what == collective_request::kind::outcome)
      r->answer(expected<broadcast_completion>(err));
    else
      r->answer(expected<wire::collective_id>(err));
  }

  void stop() {
    // Not under `mtx`: the actor's event handler may read the node while we wait for it.
    std::lock_guard<std::mutex> serial(stop_mtx);
    std::shared_ptr<net::tcp_transport> tp;
    {
      std::lock_guard<std::mutex> lk(mtx);
      if (at != phase::running) {
        at = phase::stopped;
        return;
      }
      tp = transport;
    }
    // A node that has left keeps its engines running until they have drained, so that
    // frames bounced back to them find them (at most `linger_timeout`).
    auto drained = std::make_shared<std::promise<void>>();
    auto done = drained->get_future();
    core->linger(drained);
    done.wait_for(cfg.linger_timeout);
    {
      std::lock_guard<std::mutex> lk(mtx);
      at = phase::stopped; // requests from now on fail with `stopped`
    }
    tp->drain(cfg.drain_timeout);
    tp->stop();       // no callback runs after this
    core->shutdown(); // pending requests complete with `stopped`
    std::lock_guard<std::mutex> lk(mtx);
    last_transport = transport->stats();
    transport.reset();
  }
};

node::node(node_config cfg) : impl_(std::make_unique<impl>(std::move(cfg))) {
  impl_->own_cfg = std::make_unique<caf::actor_system_config>();
  impl_->own_cfg->set("scheduler.max-threads", impl_->cfg.threads);
  impl_->own_sys = std::make_unique<caf::actor_system>(*impl_->own_cfg);
  impl_->sys = impl_->own_sys.get();
  impl_->shared->status.id = impl_->cfg.id;
}

node::node(caf::actor_system& sys, node_config cfg)
  : impl_(std::make_unique<impl>(std::move(cfg))) {
  impl_->sys = &sys;
  impl_->shared->status.id = impl_->cfg.id;
}

node::~node() {
  stop();
}

void node::on_event(event_handler h) {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  impl_->shared->on_event = std::move(h);
}

expected<std::uint16_t> node::start() {
  return impl_->start();
}

std::future<node::result> node::found(vnode_set vnodes, completion done) {
  return impl_->submit(node_request::kind::found, std::move(vnodes), {}, std::move(done));
}

std::future<node::result> node::join(std::vector<node_contact> contacts, vnode_set wanted,
                                     completion done) {
  std::optional<error> bad;
  for (auto& c : contacts)
    if (!parse_host_port(c.address))
      bad = make_error(errc::invalid_argument, "cannot join: contact \"" + c.address
                                                   + "\" is not host:port or [v6]:port");
    else if (c.id != no_proc && c.id > max_node_id)
      bad = make_error(errc::invalid_argument, "cannot join: contact " + c.address
                                                   + " has processor id " + std::to_string(c.id)
                                                   + ", above max_node_id");
  auto req = std::make_shared<node_request>();
  req->what = node_request::kind::join;
  req->vnodes = std::move(wanted);
  req->contacts = std::move(contacts);
  return impl_->submit(std::move(req), std::move(done), std::move(bad));
}

bool node::cancel_join() {
  std::unique_lock<std::mutex> lk(impl_->mtx);
  if (impl_->at != impl::phase::running)
    return false;
  auto* c = impl_->core.get();
  lk.unlock();
  return c->cancel_join();
}

bool node::cancel_reduction(std::uint64_t seq, collective_kind over) {
  std::unique_lock<std::mutex> lk(impl_->mtx);
  if (impl_->at != impl::phase::running)
    return false;
  auto* c = impl_->core.get();
  lk.unlock();
  return c->cancel_reduction(over, seq);
}

std::uint64_t node::next_reduction_seq(collective_kind over) const {
  std::unique_lock<std::mutex> lk(impl_->mtx);
  if (impl_->at != impl::phase::running)
    return 0;
  auto* c = impl_->core.get();
  lk.unlock();
  return c->next_reduction_seq(over);
}

void node::on_deliver(delivery_handler h) {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  impl_->shared->on_deliver = std::move(h);
}

std::future<expected<wire::collective_id>> node::broadcast(shared_bytes message,
                                                          collective_kind over) {
  auto r = std::make_shared<collective_request>();
  r->what = collective_request::kind::broadcast;
  r->over = over;
  r->message = std::move(message);
  auto f = r->started.get_future();
  impl_->submit(std::move(r));
  return f;
}

std::future<expected<broadcast_completion>> node::broadcast_outcome(const wire::collective_id& op) {
  auto r = std::make_shared<collective_request>();
  r->what = collective_request::kind::outcome;
  r->op = op;
  auto f = r->finished.get_future();
  impl_->submit(std::move(r));
  return f;
}

std::future<expected<wire::collective_id>> node::send(vnode_id to, shared_bytes message) {
  auto r = std::make_shared<collective_request>();
  r->what = collective_request::kind::send;
  r->to = to;
  r->message = std::move(message);
  auto f = r->started.get_future();
  impl_->submit(std::move(r));
  return f;
}

std::future<expected<reduce_result>> node::allreduce(node_reduction red) {
  red.over = collective_kind::allreduce;
  return reduce(std::move(red));
}

std::future<expected<reduce_result>> node::barrier(std::uint64_t seq, duration timeout) {
  node_reduction red;
  red.seq = seq;
  red.over = collective_kind::barrier;
  red.timeout = timeout;
  return reduce(std::move(red));
}

std::future<expected<reduce_result>> node::reduce(node_reduction red) {
  auto r = std::make_shared<collective_request>();
  r->what = collective_request::kind::reduce;
  r->on_reduced = std::move(red.done);
  r->reduction = std::move(red);
  auto f = r->reduced.get_future();
  impl_->submit(std::move(r));
  return f;
}

std::future<expected<reduce_result>> node::gather(node_gather g) {
  node_reduction red;
  red.seq = g.seq;
  red.root = g.root;
  red.op = gather_fn;
  red.count = g.block;
  red.values = std::move(g.values);
  red.over = collective_kind::gather;
  red.timeout = g.timeout;
  red.done = std::move(g.done);
  return reduce(std::move(red));
}

std::future<expected<reduce_result>> node::allgather(node_gather g) {
  node_reduction red;
  red.seq = g.seq;
  red.root = g.root;
  red.op = gather_fn;
  red.count = g.block;
  red.values = std::move(g.values);
  red.over = collective_kind::allgather;
  red.timeout = g.timeout;
  red.done = std::move(g.done);
  return reduce(std::move(red));
}

std::future<expected<reduce_result>> node::alltoall(node_gather g) {
  node_reduction red;
  red.seq = g.seq;
  red.root = g.root;
  red.op = gather_fn;
  red.count = g.block;
  red.values = std::move(g.values);
  red.over = collective_kind::alltoall;
  red.timeout = g.timeout;
  red.done = std::move(g.done);
  return reduce(std::move(red));
}

std::future<expected<wire::collective_id>> node::scatter(vnode_id root,
                                                        std::map<vnode_id, shared_bytes> blocks) {
  auto r = std::make_shared<collective_request>();
  r->what = collective_request::kind::broadcast;
  r->over = collective_kind::scatter;
  r->root = root;
  r->blocks = std::move(blocks);
  auto f = r->started.get_future();
  impl_->submit(std::move(r));
  return f;
}

std::future<node::result> node::install_static_tree(banyan::tree t) {
  auto req = std::make_shared<node_request>();
  req->what = node_request::kind::plan;
  req->plan = std::make_shared<const banyan::tree>(std::move(t));
  return impl_->submit(std::move(req), {});
}

std::future<node::result> node::install_scatter_allgather(std::size_t procs) {
  auto req = std::make_shared<node_request>();
  req->what = node_request::kind::plan;
  req->procs = procs;
  return impl_->submit(std::move(req), {});
}

std::future<node::result> node::leave(completion done) {
  return impl_->submit(node_request::kind::leave, {}, {}, std::move(done));
}

std::future<node::result> node::prepare() {
  return impl_->submit(node_request::kind::prepare, {}, {}, {});
}

void node::stop() {
  impl_->stop();
}

proc_id node::id() const noexcept {
  return impl_->cfg.id;
}

std::uint16_t node::port() const {
  std::lock_guard<std::mutex> lk(impl_->mtx);
  return impl_->port;
}

std::string node::address() const {
  std::lock_guard<std::mutex> lk(impl_->mtx);
  return impl_->address;
}

node_status node::status() const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  return impl_->shared->status;
}

node_metrics node::metrics() const {
  node_metrics m;
  m.id = impl_->cfg.id;
  node_core* core = nullptr;
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    m.transport = impl_->transport ? impl_->transport->stats() : impl_->last_transport;
    core = impl_->core.get(); // kept until the node goes
  }
  if (core)
    core->fill_metrics(m);
  const auto& c = *impl_->shared->counters;
  auto get = [](const node_counters::counter& x) { return x.load(std::memory_order_relaxed); };
  for (std::size_t k = 0; k < m.deliveries.size(); ++k)
    m.deliveries[k] = {get(c.deliveries[k][0]), get(c.deliveries[k][1]), get(c.deliveries[k][2])};
  for (std::size_t k = 0; k < m.collectives.size(); ++k)
    m.collectives[k] = {get(c.collectives[k][node_counters::started]),
                        get(c.collectives[k][node_counters::completed]),
                        get(c.collectives[k][node_counters::failed])};
  m.members_joined = get(c.members_joined);
  m.members_left = get(c.members_left);
  m.crashes_detected = get(c.crashes_detected);
  m.vnodes_adopted = get(c.vnodes_adopted);
  m.vnodes_disowned = get(c.vnodes_disowned);
  m.frames_from_buried = get(c.frames_from_buried);
  m.suspicions = get(c.suspicions);
  m.suspicions_cleared = get(c.suspicions_cleared);
  return m;
}

supervisor::status node::state() const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  return impl_->shared->status.state;
}

std::vector<proc_id> node::members() const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  std::vector<proc_id> ids;
  for (auto& m : impl_->shared->status.members)
    ids.push_back(m.id);
  return ids;
}

vnode_set node::own_vnodes() const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  return impl_->shared->status.own_vnodes;
}

proc_id node::parent(tree_key k) const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  for (auto& t : impl_->shared->status.trees)
    if (t.tree == k)
      return t.parent;
  return no_proc;
}

proc_id node::owner_of(vnode_id v) const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  return impl_->shared->status.routes.owner(v);
}

vnode_set node::vnodes_of(proc_id p) const {
  std::lock_guard<std::mutex> lk(impl_->shared->mtx);
  return impl_->shared->status.routes.owned_by(p);
}

} // namespace banyan
