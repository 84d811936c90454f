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
