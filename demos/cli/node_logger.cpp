#include "node_logger.hpp"

#include <cstdio>
#include <ctime>
#include <utility>

namespace banyan::cli {

const char* to_string(log_level l) {
  switch (l) {
  case log_level::error:
    return "error";
  case log_level::warn:
    return "warn";
  case log_level::info:
    return "info";
  case log_level::debug:
    return "debug";
  }
  return "info";
}

std::optional<log_level> parse_log_level(std::string_view s) {
  for (auto l : {log_level::error, log_level::warn, log_level::info, log_level::debug})
    if (s == to_string(l))
      return l;
  return std::nullopt;
}

std::optional<log_format> parse_log_format(std::string_view s) {
  if (s == "text")
    return log_format::text;
  if (s == "json")
    return log_format::json;
  return std::nullopt;
}

std::string utc_timestamp(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  long frac = static_cast<long>(ms % 1000);
  if (frac < 0) { // before 1970
    --secs;
    frac += 1000;
  }
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%.*s.%03ldZ", static_cast<int>(n), buf, frac);
  return out;
}

std::string format_log_line(const log_record& r, log_format f, proc_id node,
                            std::chrono::system_clock::time_point ts) {
  if (f == log_format::json) {
    nlohmann::ordered_json j;
    j["ts"] = utc_timestamp(ts);
    j["level"] = to_string(r.level);
    j["node"] = node;
    j["event"] = r.event;
    j["msg"] = r.message;
    j["fields"] = r.fields.is_object() ? r.fields : nlohmann::ordered_json::object();
    // Bytes that are not UTF-8 (from a peer's input) are replaced, not fatal.
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::string line = "node " + std::to_string(node) + ": ";
  if (r.level != log_level::info)
    line += std::string(to_string(r.level)) + ": ";
  return line + r.message;
}

bool untrusted_input(const node_event& e) {
  return e.what == node_event::kind::transport && e.hostile
         && e.failure != net::connection_failure::handshake_closed;
}

log_record record_of(const node_event& e) {
  using k = node_event::kind;
  using json = nlohmann::ordered_json;
  log_record r;
  r.event = to_string(e.what);
  r.message = to_string(e);
  auto& f = r.fields;
  if (e.peer != no_proc)
    f["peer"] = e.peer;
  auto proc = [](proc_id p) { return p == no_proc ? json() : json(p); };
  switch (e.what) {
  case k::parent_changed:
  case k::cycle_broken:
    f["tree"] = to_string(e.tree.kind);
    f["root"] = e.tree.root;
    f["old_parent"] = proc(e.old_parent);
    if (e.what == k::parent_changed)
      f["new_parent"] = proc(e.new_parent);
    break;
  case k::vnodes_adopted:
  case k::vnodes_disowned:
  case k::vnodes_gained:
  case k::vnodes_released:
    f["vnodes"] = e.vnodes.to_string();
    f["vnode_count"] = e.vnodes.size();
    break;
  case k::member_joined:
    f["address"] = e.detail;
    break;
  default:
    if (e.failure != net::connection_failure::none)
      f["reason"] = net::to_string(e.failure);
    if (!e.detail.empty())
      f["detail"] = e.detail;
  }
  switch (e.what) {
  case k::parent_changed:
  case k::busy:
  case k::idle:
    r.level = log_level::debug;
    break;
  case k::transport:
    if (untrusted_input(e)) {
      r.level = log_level::warn;
      r.event = "hostile_input";
    } else if (e.failure == net::connection_failure::wrong_secret
               || e.failure == net::connection_failure::version_mismatch
               || e.failure == net::connection_failure::mode_mismatch) {
      r.level = log_level::warn;
      r.event = "misconfigured_peer";
    } else if (e.failure == net::connection_failure::id_in_use) {
      r.level = log_level::warn; // a second process under a member's id (rate-limited)
      r.event = "id_in_use";
    } else {
      r.level = log_level::debug;
    }
    break;
  case k::member_crashed:
  case k::vnodes_disowned:
  case k::join_failed:
  case k::collective:
    r.level = log_level::warn;
    break;
  default:
    r.level = log_level::info;
  }
  return r;
}

node_logger::node_logger(proc_id node, log_level level, log_format format, std::ostream& out,
                         duration hostile_interval)
    : node_(node), level_(level), format_(format), out_(out), limiter_(hostile_interval) {}

void node_logger::log(log_record r) {
  if (!enabled(r.level))
    return;
  if (r.fields.is_null())
    r.fields = nlohmann::ordered_json::object();
  auto line = format_log_line(r, format_, node_, std::chrono::system_clock::now());
  std::lock_guard<std::mutex> lk(mtx_);
  out_ << line << std::endl;
}

void node_logger::error(std::string event, std::string message, nlohmann::ordered_json fields) {
  log({log_level::error, std::move(event), std::move(message), std::move(fields)});
}

void node_logger::warn(std::string event, std::string message, nlohmann::ordered_json fields) {
  log({log_level::warn, std::move(event), std::move(message), std::move(fields)});
}

void node_logger::info(std::string event, std::string message, nlohmann::ordered_json fields) {
  log({log_level::info, std::move(event), std::move(message), std::move(fields)});
}

void node_logger::debug(std::string event, std::string message, nlohmann::ordered_json fields) {
  log({log_level::debug, std::move(event), std::move(message), std::move(fields)});
}

void node_logger::hostile(std::string category, log_record r) {
  if (!enabled(r.level))
    return;
  std::optional<std::size_t> held;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    held = limiter_.admit(category, std::chrono::steady_clock::now());
  }
  if (!held)
    return;
  if (r.fields.is_null())
    r.fields = nlohmann::ordered_json::object();
  r.fields["held_back"] = *held;
  if (*held > 0)
    r.message += " [" + std::to_string(*held) + " more line" + (*held == 1 ? "" : "s")
                 + " about untrusted input held back]";
  log(std::move(r));
}

} // namespace banyan::cli
