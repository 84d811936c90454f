#include "node_control.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/gather.hpp"
#include "node_control_parse.hpp"

namespace banyan::cli {

using namespace control_detail;

namespace {

using namespace std::chrono_literals;

/// How long an operation may stay pending before it is reported as timed out.
constexpr auto op_timeout = 300s;

} // namespace

namespace control_detail {

/// Payloads are made and checked 256 bytes at a time: the pattern repeats with that period.
std::array<std::uint8_t, 256> pattern_period(std::uint64_t seq) {
  std::array<std::uint8_t, 256> p{};
  for (std::size_t i = 0; i < p.size(); ++i)
    p[i] = pattern_byte(i, seq);
  return p;
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

std::string op_name(const wire::collective_id& id) {
  return wire::to_string(id);
}

std::string vnodes_text(const vnode_set& v) {
  auto s = v.to_string();
  if (s.size() >= 2 && s.front() == '{' && s.back() == '}')
    s = s.substr(1, s.size() - 2);
  return s;
}

std::optional<reduce_kind> parse_kind(const std::string& s) {
  if (s == "sum")
    return reduce_kind::sum;
  if (s == "min")
    return reduce_kind::min;
  if (s == "max")
    return reduce_kind::max;
  if (s == "prod")
    return reduce_kind::product;
  return std::nullopt;
}

std::optional<element_type> parse_type(const std::string& s) {
  if (s == "int32")
    return element_type::int32;
  if (s == "int64")
    return element_type::int64;
  if (s == "float")
    return element_type::float32;
  if (s == "double")
    return element_type::float64;
  return std::nullopt;
}

bool trailing(std::istringstream& in) {
  std::string rest;
  return static_cast<bool>(in >> rest);
}

std::optional<reduction_args> parse_reduction(std::istringstream& in) {
  std::string seq_s, root_s, count_s, op_s, type_s;
  in >> seq_s >> root_s >> count_s >> op_s >> type_s;
  auto seq = parse_uint(seq_s, std::numeric_limits<std::uint64_t>::max());
  auto root = parse_uint(root_s, vnode_set::max_member);
  auto count = parse_uint(count_s, max_payload / 8);
  auto kind = parse_kind(op_s);
  auto type = parse_type(type_s);
  if (!seq || !root || !count || !kind || !type || trailing(in))
    return std::nullopt;
  return reduction_args{*seq, static_cast<vnode_id>(*root), *count, *kind, *type};
}

} // namespace control_detail

namespace {

template <class T>
std::vector<std::uint8_t> contribution_of(vnode_id v, std::size_t count, std::uint64_t seq) {
  // reduce_element step by step: (base + 7 i) % 17 without a division per element.
  std::vector<std::uint8_t> out(count * sizeof(T));
  std::uint64_t r = (std::uint64_t{v} * 31 + seq) % 17;
  for (std::size_t i = 0; i < count; ++i) {
    const T x = static_cast<T>(static_cast<std::int64_t>(r) - 8);
    std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
    r += 7;
    if (r >= 17)
      r -= 17;
  }
  return out;
}

/// Integers wrap (computed unsigned, as reduce_op_table does); floats in long double.
template <class T>
T combine(reduce_kind k, T a, T b) {
  using U = std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>;
  switch (k) {
  case reduce_kind::sum:
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    else
      return a + b;
  case reduce_kind::product:
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    else
      return a * b;
  case reduce_kind::min:
    return b < a ? b : a;
  case reduce_kind::max:
    return a < b ? b : a;
  default:
    return a;
  }
}

template <class T>
bool result_ok(reduce_kind k, const vnode_set& vnodes, std::size_t count, std::uint64_t seq,
               const shared_bytes& value) {
  if (value.size() != count * sizeof(T) || vnodes.empty())
    return false;
  using A = std::conditional_t<std::is_integral_v<T>, T, long double>;
  // The combination over `vnodes` of element i, from each vnode's residue: element i of
  // vnode v is ((v*31 + i*7 + seq) % 17) - 8, a function of (i*7 + seq) % 17 alone
  // while that sum cannot wrap around.
  auto expect = [&](auto element_of) {
    bool first = true;
    A acc{};
    vnodes.for_each([&](vnode_id v) {
      const A x = static_cast<A>(static_cast<T>(element_of(v)));
      acc = first ? x : combine<A>(k, acc, x);
      first = false;
    });
    return acc;
  };
  auto matches = [&](std::size_t i, A want) {
    T got;
    std::memcpy(&got, value.data() + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      return got == want;
    } else {
      const long double w = want;
      const long double tol = 1e-5L * std::max<long double>(1.0L, std::fabs(w));
      return std::fabs(static_cast<long double>(got) - w) <= tol
             || (std::isinf(w) && static_cast<long double>(got) == w);
    }
  };
  std::uint64_t vmax = 0;
  vnodes.for_each([&](vnode_id v) { vmax = std::max<std::uint64_t>(vmax, v); });
  const std::uint64_t top = vmax * 31 + std::uint64_t{count - 1} * 7;
  if (count - 1 <= std::numeric_limits<std::uint64_t>::max() / 8
      && seq <= std::numeric_limits<std::uint64_t>::max() - top) {
    // No wrap-around: 17 expected values, one per residue (a check in about the time of
    // reading the result, instead of one pass over the vnodes per element).
    std::array<A, 17> want{};
    for (std::uint64_t r = 0; r < 17; ++r)
      want[r] = expect([r](vnode_id v) {
        return static_cast<std::int64_t>((std::uint64_t{v} * 31 % 17 + r) % 17) - 8;
      });
    std::uint64_t r = seq % 17;
    for (std::size_t i = 0; i < count; ++i) {
      if (!matches(i, want[r]))
        return false;
      r += 7;
      if (r >= 17)
        r -= 17;
    }
    return true;
  }
  for (std::size_t i = 0; i < count; ++i)
    if (!matches(i, expect([&](vnode_id v) { return reduce_element(v, i, seq); })))
      return false;
  return true;
}

} // namespace

std::string delivered_line(const wire::collective_id& op, bool message, std::size_t vnodes,
                           std::size_t size, bool ok, std::int64_t t_us) {
  // Keys in nlohmann's order (sorted).
  char buf[224];
  const int n = std::snprintf(
    buf, sizeof buf,
    R"({"ev":"delivered","kind":"%s","ok":%s,"op":"%llu:%llu","size":%llu,"t_us":%lld,"vnodes":%llu})",
    message ? "message" : "broadcast", ok ? "true" : "false",
    static_cast<unsigned long long>(op.origin), static_cast<unsigned long long>(op.seq),
    static_cast<unsigned long long>(size), static_cast<long long>(t_us),
    static_cast<unsigned long long>(vnodes));
  return std::string(buf, static_cast<std::size_t>(std::max(n, 0)));
}

std::optional<std::uint64_t> parse_uint(const std::string& s, std::uint64_t max) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  try {
    auto v = std::stoull(s);
    if (v > max)
      return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::uint8_t pattern_byte(std::size_t i, std::uint64_t seq) {
  return static_cast<std::uint8_t>((i * 131 + seq) & 0xff);
}

shared_bytes pattern_bytes(std::size_t n, std::uint64_t seq) {
  const auto period = pattern_period(seq);
  std::vector<std::uint8_t> b(n);
  for (std::size_t at = 0; at < n; at += period.size())
    std::memcpy(b.data() + at, period.data(), std::min(period.size(), n - at));
  return shared_bytes(std::move(b));
}

bool is_pattern(const shared_bytes& b, std::uint64_t seq) {
  const auto period = pattern_period(seq);
  const auto n = b.size();
  for (std::size_t at = 0; at < n; at += period.size())
    if (std::memcmp(b.data() + at, period.data(), std::min(period.size(), n - at)) != 0)
      return false;
  return true;
}

std::int64_t reduce_element(vnode_id v, std::size_t i, std::uint64_t seq) {
  const std::uint64_t x = std::uint64_t{v} * 31 + std::uint64_t{i} * 7 + seq;
  return static_cast<std::int64_t>(x % 17) - 8;
}

std::vector<std::uint8_t> reduce_contribution(element_type type, vnode_id v, std::size_t count,
                                              std::uint64_t seq) {
  switch (type) {
  case element_type::int32:
    return contribution_of<std::int32_t>(v, count, seq);
  case element_type::int64:
    return contribution_of<std::int64_t>(v, count, seq);
  case element_type::float32:
    return contribution_of<float>(v, count, seq);
  case element_type::float64:
    return contribution_of<double>(v, count, seq);
  default:
    return {};
  }
}

bool reduce_result_ok(const reduce_op& op, const vnode_set& vnodes, std::size_t count,
                      std::uint64_t seq, const shared_bytes& value) {
  switch (op.type) {
  case element_type::int32:
    return result_ok<std::int32_t>(op.kind, vnodes, count, seq, value);
  case element_type::int64:
    return result_ok<std::int64_t>(op.kind, vnodes, count, seq, value);
  case element_type::float32:
    return result_ok<float>(op.kind, vnodes, count, seq, value);
  case element_type::float64:
    return result_ok<double>(op.kind, vnodes, count, seq, value);
  default:
    return false;
  }
}

// --- control_session ----------------------------------------------------------------

control_session::control_session(banyan::node& n, vnode_set wanted, emit_fn emit,
                                 std::chrono::microseconds hold)
  : n_(n), wanted_(std::move(wanted)), emit_(std::move(emit)), hold_us_(hold.count()) {
  n_.on_deliver([this](const node_delivery& d) { on_delivery(d); });
}

control_session::~control_session() {
  n_.on_deliver({});
  finish(std::chrono::milliseconds(0));
}

void control_session::ready() {
  const auto s = n_.status();
  {
    // The node numbers its broadcasts and messages 1, 2, 3, ... across memberships
    // (node_delivery::op), and this session starts all of them, so the count goes on;
    // `started` corrects a wrong guess.
    std::lock_guard<std::mutex> lk(mtx_);
    received_.clear();
    awaiting_.clear();
  }
  put({{"ev", "ready"},
         {"id", s.id},
         {"port", n_.port()},
         {"vnodes", vnodes_text(s.own_vnodes)}});
}

void control_session::error(const std::string& detail) {
  put({{"ev", "error"}, {"detail", detail}});
}

bool control_session::member_for(const std::string& what) {
  if (n_.state() == supervisor::status::member)
    return true;
  error(what + ": not a member");
  return false;
}

std::uint64_t control_session::next_seq() {
  std::lock_guard<std::mutex> lk(mtx_);
  return next_seq_++;
}

void control_session::started(const wire::collective_id& id, std::uint64_t predicted) {
  const auto seq = id.seq;
  if (seq == predicted)
    return;
  // The guess was wrong (the payload will not check out at the receivers): say so, and
  // guess right from now on.
  std::lock_guard<std::mutex> lk(mtx_);
  next_seq_ = seq + 1;
  put({{"ev", "error"},
       {"detail", "operation " + op_name(id) + " was expected to be number "
                        + std::to_string(predicted) + ": its payload pattern is off"}});
}

void control_session::put(nlohmann::json j) {
  if (!j.contains("t_us"))
    j["t_us"] = now_us();
  emit_(j.dump());
}

void control_session::emit_or_hold(nlohmann::json j) {
  if (!j.contains("t_us"))
    j["t_us"] = now_us(); // when it happened, not when it is written
  emit_or_hold(j.dump());
}

void control_session::emit_or_hold(std::string line) {
  {
    std::lock_guard<std::mutex> lk(mtx_);
    const auto now = now_us();
    for (auto& [seq, a] : awaiting_) {
      if (a.acked_at >= 0 || now - a.started_at >= hold_us_)
        continue;
      if (held_.empty())
        held_since_ = now;
      held_.push_back(std::move(line));
      return;
    }
    if (!held_.empty())
      flush_held_locked(); // the held lines first
  }
  emit_(line);
}

void control_session::flush_held_locked() {
  for (auto& h : held_)
    emit_(h);
  held_.clear();
}

template <class T, class F>
void control_session::await(std::future<T> f, std::string what, F then) {
  auto task = [this, f = std::move(f), what = std::move(what), then = std::move(then)]() mutable {
    if (f.wait_for(op_timeout) != std::future_status::ready) {
      error(what + ": no outcome after " + std::to_string(op_timeout.count()) + " s");
      return;
    }
    then(f.get());
  };
  std::lock_guard<std::mutex> lk(mtx_);
  pending_.push_back(std::async(std::launch::async, std::move(task)));
}

void control_session::watch(std::future<expected<wire::collective_id>> f, std::string what,
                            std::function<void(expected<wire::collective_id>)> then) {
  std::lock_guard<std::mutex> lk(mtx_);
  watched_.push_back({std::move(f), std::chrono::steady_clock::now() + op_timeout, std::move(what),
                      std::move(then)});
}

bool control_session::busy() {
  std::lock_guard<std::mutex> lk(mtx_);
  return !watched_.empty();
}

void control_session::collect() {
  std::vector<std::pair<std::uint64_t, expected<wire::collective_id>>> acks;
  std::vector<std::pair<watched, expected<wire::collective_id>>> done;
  std::vector<std::string> late;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    if (!held_.empty() && now_us() - held_since_ >= hold_us_)
      flush_held_locked();
    const auto now = std::chrono::steady_clock::now();
    for (auto it = watched_.begin(); it != watched_.end();) {
      if (it->f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        auto r = it->f.get();
        done.emplace_back(std::move(*it), std::move(r));
      } else if (now >= it->deadline) {
        late.push_back(it->what);
      } else {
        ++it;
        continue;
      }
      it = watched_.erase(it);
    }
    pending_.remove_if(
      [](std::future<void>& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    for (auto it = acks_sent_.begin(); it != acks_sent_.end();) {
      if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      acks.emplace_back(it->first, it->second.get());
      it = acks_sent_.erase(it);
    }
  }
  for (auto& [seq, id] : acks) {
    if (!id)
      error("ack: " + id.err().to_string());
    else
      started(*id, seq);
  }
  for (auto& [w, r] : done)
    w.then(std::move(r));
  for (auto& what : late)
    error(what + ": no outcome after " + std::to_string(op_timeout.count()) + " s");
}

void control_session::finish(std::chrono::milliseconds limit) {
  collect(); // after `node::stop`, every watched operation has its outcome
  {
    std::lock_guard<std::mutex> lk(mtx_);
    flush_held_locked(); // no acks will come any more
  }
  std::list<std::future<void>> all;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    all.swap(pending_);
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (auto& f : all)
    f.wait_until(deadline);
  // What is still running is waited for by the futures' destructors: `node::stop` has
  // completed every operation of the node, so they end at once.
}

bool control_session::handle(const std::string& line) {
  std::istringstream in(line);
  std::string cmd;
  if (!(in >> cmd))
    return true; // an empty line
  if (cmd == "quit")
    return false;
  if (cmd == "bcast")
    cmd_bcast(in);
  else if (cmd == "send")
    cmd_send(in);
  else if (cmd == "acks")
    cmd_acks(in);
  else if (cmd == "trace")
    cmd_trace(in);
  else if (cmd == "reduce")
    cmd_reduce(in);
  else if (cmd == "allreduce" || cmd == "barrier" || cmd == "allgather")
    cmd_everywhere(cmd, in);
  else if (cmd == "synced")
    cmd_synced(in);
  else if (cmd == "leave")
    cmd_leave();
  else if (cmd == "join")
    cmd_join(in);
  else if (cmd == "status") {
    const auto s = n_.status();
    nlohmann::json members = nlohmann::json::array();
    for (auto& m : s.members)
      members.push_back(m.id);
    put({{"ev", "status"},
           {"id", s.id},
           {"state", to_string(s.state)},
           {"members", members},
           {"vnodes", vnodes_text(s.own_vnodes)},
           {"all_parented", s.all_parented},
           {"busy", s.busy}});
  } else {
    error("unknown command \"" + cmd
          + "\" (bcast, send, acks, trace, reduce, allreduce, barrier, allgather, synced, leave, "
            "join, status, quit)");
  }
  return true;
}

void control_session::cmd_bcast(std::istringstream& in) {
  std::string bytes_s;
  in >> bytes_s;
  auto bytes = parse_uint(bytes_s, max_payload);
  if (!bytes || trailing(in))
    return error("usage: bcast BYTES (at most 4 GiB)");
  if (!member_for("bcast"))
    return;
  const auto seq = next_seq();
  auto payload = pattern_bytes(*bytes, seq);
  const auto members = n_.members();
  const auto t0 = now_us(); // the start: the payload is ready, the broadcast goes next
  {
    // Acks may come before the future below resolves: expect them already.
    std::lock_guard<std::mutex> lk(mtx_);
    if (acks_) {
      auto& a = awaiting_[seq];
      a.started_at = t0;
      for (auto m : members)
        if (m != n_.id())
          a.expected.insert(m);
      if (a.expected.empty()) // alone: acked at once
        a.acked_at = t0;
    }
  }
  auto size = *bytes;
  watch(n_.broadcast(std::move(payload)), "bcast",
        [this, seq, size, t0](expected<wire::collective_id> id) {
          if (!id) {
            std::lock_guard<std::mutex> lk(mtx_);
            awaiting_.erase(seq);
            put({{"ev", "error"}, {"detail", "bcast: " + id.err().to_string()}});
            return;
          }
          started(*id, seq);
          bool trace = false;
          {
            std::lock_guard<std::mutex> lk(mtx_);
            trace = trace_;
          }
          if (trace)
            await(n_.broadcast_outcome(*id), "outcome", [this, op = op_name(*id)](expected<broadcast_completion> r) {
              if (r)
                put({{"ev", "outcome"}, {"op", op}, {"ok", true}, {"resends", r->resends}});
              else
                put({{"ev", "outcome"}, {"op", op}, {"ok", false}, {"detail", r.err().to_string()}});
            });
          {
            // Now that its name is known, "acked" can be said (if it is not too early).
            std::lock_guard<std::mutex> lk(mtx_);
            auto it = awaiting_.find(seq);
            if (it != awaiting_.end()) {
              it->second.name = op_name(*id);
              if (it->second.acked_at >= 0) {
                flush_held_locked();
                put({{"ev", "acked"}, {"op", it->second.name}, {"acks", it->second.acked.size()},
                       {"t_us", it->second.acked_at}});
                awaiting_.erase(it);
              }
            }
          }
          // t_us is when the broadcast was started, not when this line is written.
          emit_or_hold({{"ev", "bcast"}, {"op", op_name(*id)}, {"size", size}, {"t_us", t0}});
        });
}

void control_session::cmd_send(std::istringstream& in) {
  std::string to_s, bytes_s;
  in >> to_s >> bytes_s;
  auto to = parse_uint(to_s, vnode_set::max_member);
  auto bytes = parse_uint(bytes_s, max_payload);
  if (!to || !bytes || trailing(in))
    return error("usage: send VNODE BYTES");
  if (!member_for("send"))
    return;
  const auto seq = next_seq();
  const auto t0 = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  auto size = *bytes;
  watch(n_.send(static_cast<vnode_id>(*to), pattern_bytes(*bytes, seq)), "send",
        [this, seq, size, t0](expected<wire::collective_id> id) {
          if (!id)
            return error("send: " + id.err().to_string());
          started(*id, seq);
          put({{"ev", "sent"}, {"op", op_name(*id)}, {"size", size}, {"t_us", t0}});
        });
}

void control_session::cmd_trace(std::istringstream& in) {
  std::string mode;
  in >> mode;
  if ((mode != "on" && mode != "off") || trailing(in))
    return error("usage: trace on|off");
  std::lock_guard<std::mutex> lk(mtx_);
  trace_ = mode == "on";
}

void control_session::cmd_acks(std::istringstream& in) {
  std::string mode;
  in >> mode;
  if (mode == "off") {
    if (trailing(in))
      return error("usage: acks on [PROC:VNODE ...] | acks off");
    std::lock_guard<std::mutex> lk(mtx_);
    acks_ = false;
    return;
  }
  if (mode != "on")
    return error("usage: acks on [PROC:VNODE ...] | acks off");
  std::map<proc_id, vnode_id> targets;
  std::string t;
  while (in >> t) {
    auto colon = t.find(':');
    auto p = colon == std::string::npos ? std::nullopt : parse_uint(t.substr(0, colon), max_node_id);
    auto v = colon == std::string::npos ? std::nullopt
                                        : parse_uint(t.substr(colon + 1), vnode_set::max_member);
    if (!p || !v)
      return error("acks on: bad target \"" + t + "\" (want PROC:VNODE)");
    targets[static_cast<proc_id>(*p)] = static_cast<vnode_id>(*v);
  }
  std::lock_guard<std::mutex> lk(mtx_);
  acks_ = true;
  for (auto& [p, v] : targets)
    ack_to_[p] = v;
}

void control_session::cmd_reduce(std::istringstream& in) {
  const auto a = parse_reduction(in);
  if (!a)
    return error("usage: reduce SEQ ROOT COUNT sum|min|max|prod int32|int64|float|double");
  if (!member_for("reduce"))
    return;
  node_reduction r;
  r.seq = a->seq;
  r.root = a->root;
  r.op = reduce_op{a->kind, a->type, 0};
  r.count = a->count;
  const auto s = a->seq;
  const auto n = a->count;
  const auto ty = a->type;
  r.values = [s, n, ty](vnode_id v) { return reduce_contribution(ty, v, n, s); };
  const auto op = r.op;
  await(n_.reduce(std::move(r)), "reduce " + std::to_string(s),
        [this, s, n, op](expected<reduce_result> res) {
          if (!res)
            return error("reduce " + std::to_string(s) + ": " + res.err().to_string());
          if (res->vnodes.empty() && res->value.empty()) {
            put({{"ev", "reduce_sent"}, {"seq", std::to_string(s)}});
            return;
          }
          const auto t = now_us(); // when it came, not when it was checked
          const bool ok = reduce_result_ok(op, res->vnodes, n, s, res->value);
          put({{"ev", "reduced"},
                 {"seq", std::to_string(s)},
                 {"vnodes", res->vnodes.size()},
                 {"ok", ok},
                 {"t_us", t}});
        });
}

void control_session::cmd_leave() {
  if (!member_for("leave"))
    return;
  await(n_.leave(), "leave", [this](banyan::node::result r) {
    if (r)
      return error("leave: " + r->to_string());
    put({{"ev", "left"}});
  });
}

void control_session::cmd_join(std::istringstream& in) {
  std::string addr;
  in >> addr;
  if (addr.empty() || trailing(in))
    return error("usage: join HOST:PORT");
  const auto st = n_.state();
  if (st == supervisor::status::member || st == supervisor::status::joining)
    return error("join: already a member or joining");
  node_contact c;
  auto at = addr.find('@');
  c.address = at == std::string::npos ? addr : addr.substr(at + 1);
  if (at != std::string::npos) {
    auto id = parse_uint(addr.substr(0, at), max_node_id);
    if (!id)
      return error("join: bad contact \"" + addr + "\" (want [ID@]HOST:PORT)");
    c.id = static_cast<proc_id>(*id);
  }
  if (c.address.rfind(':') == std::string::npos)
    return error("join: bad contact \"" + addr + "\" (want [ID@]HOST:PORT)");
  await(n_.join({c}, wanted_), "join", [this](banyan::node::result r) {
    if (r)
      return error("join: " + r->to_string());
    ready();
  });
}

void control_session::on_delivery(const node_delivery& d) {
  // On the node's actor: acknowledge first, check the payload after (a 64 MiB check
  // should not delay the ack the benchmark times).
  const bool message = d.what == node_delivery::kind::message;
  std::optional<vnode_id> ack_to;
  bool print = true;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    if (message && d.payload.empty() && acks_) {
      // An ack for our oldest broadcast the sender has not acked yet.
      for (auto it = awaiting_.begin(); it != awaiting_.end(); ++it) {
        auto& a = it->second;
        if (a.acked_at >= 0 || !a.expected.count(d.op.origin) || a.acked.count(d.op.origin))
          continue;
        a.acked.insert(d.op.origin);
        print = false;
        if (a.acked.size() >= a.expected.size()) {
          a.acked_at = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
          if (!a.name.empty()) {
            flush_held_locked();
            put({{"ev", "acked"}, {"op", a.name}, {"acks", a.acked.size()}, {"t_us", a.acked_at}});
            awaiting_.erase(it);
          }
        }
        break;
      }
    } else if (!message && acks_ && d.op.origin != n_.id()) {
      auto& r = received_[d.op];
      r.vnodes |= d.vnodes;
      if (!r.acked && r.vnodes.includes(n_.own_vnodes())) {
        r.acked = true;
        auto t = ack_to_.find(d.op.origin);
        if (t == ack_to_.end()) // no target given: one of the origin's vnodes, as we know them
          if (auto vs = n_.vnodes_of(d.op.origin); !vs.empty())
            t = ack_to_.emplace(d.op.origin, vs.front()).first;
        if (t != ack_to_.end())
          ack_to = t->second;
        else
          put({{"ev", "error"},
               {"detail", "acks: processor " + std::to_string(d.op.origin)
                              + " owns no vnode this node knows of (acks on PROC:VNODE ...)"}});
      }
    }
  }
  if (ack_to) {
    const auto seq = next_seq();
    // Not waited for here (a handler must not wait on the node), nor on a thread of its
    // own (starting one would delay the actor): `collect` looks at it later.
    auto f = n_.send(*ack_to, shared_bytes{});
    std::lock_guard<std::mutex> lk(mtx_);
    acks_sent_.emplace_back(seq, std::move(f));
  }
  if (!print)
    return;
  bool trace = false;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    trace = trace_;
  }
  if (trace)
    emit_or_hold(nlohmann::json{{"ev", "delivered_to"}, {"op", op_name(d.op)}, {"set", vnodes_text(d.vnodes)}});
  const auto seq = d.op.seq;
  const auto t = now_us(); // when it came, not when it was checked
  emit_or_hold(delivered_line(d.op, message, d.vnodes.size(), d.payload.size(),
                              is_pattern(d.payload, seq), t));
}

} // namespace banyan::cli
