// `banyan cluster`: the event pump. The children's stdout lines (JSON events of the
// control protocol, node_control.hpp) are read, indexed, and waited for; commands go
// to their stdin (cluster_run.hpp).
#include <cerrno>
#include <cstring>
#include <iostream>

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_run.hpp"

namespace banyan::cli::cluster_detail {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now().time_since_epoch())
    .count();
}

void progress(const std::string& s) {
  std::cerr << "cluster: " << s << std::endl;
}

void cluster_run::pump(std::chrono::milliseconds limit, int only) {
  std::vector<pollfd> fds;
  std::vector<child*> who;
  fds.push_back({sfd_, POLLIN, 0});
  who.push_back(nullptr);
  for (auto& c : children_)
    if (c && c->alive && (only < 0 || c->index == static_cast<std::size_t>(only))) {
      fds.push_back({c->out, POLLIN, 0});
      who.push_back(c.get());
    }
  int r = ::poll(fds.data(), fds.size(), static_cast<int>(limit.count()));
  if (r < 0 && errno != EINTR)
    throw cluster_failure{"poll: " + std::string(std::strerror(errno))};
  if (r == 0 && only >= 0) {
    pump(std::chrono::milliseconds(0)); // nothing from it: the others (a death, say)
    return;
  }
  if (fds[0].revents & POLLIN) {
    signalfd_siginfo si;
    if (::read(sfd_, &si, sizeof si) > 0)
      throw cluster_failure{"interrupted by signal " + std::to_string(si.ssi_signo), 130};
  }
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (!fds[i].revents)
      continue;
    auto& c = *who[i];
    char chunk[65536];
    for (;;) {
      auto n = ::read(c.out, chunk, sizeof chunk);
      if (n > 0) {
        c.buffer.append(chunk, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        c.alive = false; // its stdout closed: it exited
        int status = 0;
        if (::waitpid(c.pid, &status, 0) == c.pid)
          c.pid = -1;
        if (!c.expected_exit) {
          failed_ = true;
          throw cluster_failure{"process " + std::to_string(c.index) + " exited unexpectedly ("
                                + (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                       : "code " + std::to_string(WEXITSTATUS(status)))
                                + "); its log ends:\n" + log_tail(c)};
        }
      }
      break;
    }
    std::size_t nl;
    while ((nl = c.buffer.find('\n')) != std::string::npos) {
      auto line = c.buffer.substr(0, nl);
      c.buffer.erase(0, nl + 1);
      on_line(c, line);
    }
  }
}

namespace {

/// A reduction's number in a `reduced` / `reduce_sent` line: a decimal string (64-bit
/// numbers are strings in the control protocol); 0 when absent or malformed.
std::uint64_t seq_of(const json& j) {
  auto it = j.find("seq");
  if (it == j.end() || !it->is_string())
    return 0;
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return 0;
  }
}

} // namespace

void cluster_run::on_line(child& c, const std::string& line) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ev")) {
    progress("process " + std::to_string(c.index) + " wrote a line that is not an event: " + line);
    return;
  }
  const auto ev = j["ev"].get<std::string>();
  const auto k = c.index;
  if (ev == "ready") {
    c.port = j.value("port", std::uint16_t{0});
    ev_.ready[k] = j;
    ++ev_.readies[k];
  } else if (ev == "status") {
    ev_.status[k] = j;
    ++ev_.statuses[k];
  } else if (ev == "bcast") {
    ev_.started[k].push_back(j);
  } else if (ev == "sent") {
    ev_.sent[k].push_back(j);
  } else if (ev == "delivered") {
    ev_.delivered[j.value("op", "")].emplace_back(k, j);
  } else if (ev == "acked") {
    ev_.acked[j.value("op", "")] = j;
  } else if (ev == "reduced") {
    ev_.reduced[seq_of(j)] = j;
  } else if (ev == "reduce_sent") {
    ev_.reduce_sent[seq_of(j)].insert(k);
  } else if (ev == "allreduced") {
    ev_.finished["allreduce"][seq_of(j)][k] = j;
  } else if (ev == "released") {
    ev_.finished["barrier"][seq_of(j)][k] = j;
  } else if (ev == "allgathered" || ev == "allgather_sent") {
    ev_.finished["allgather"][seq_of(j)][k] = j;
  } else if (ev == "left") {
    ++ev_.left[k];
  } else if (ev == "error") {
    auto d = j.value("detail", "");
    progress("process " + std::to_string(k) + ": error: " + d);
    ev_.errors[k].push_back(d);
  }
}

void cluster_run::command(std::size_t k, const std::string& line) {
  auto& c = *children_.at(k);
  if (!c.alive)
    throw cluster_failure{"process " + std::to_string(k) + " is gone"};
  auto text = line + "\n";
  std::size_t at = 0;
  while (at < text.size()) {
    auto n = ::write(c.in, text.data() + at, text.size() - at);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      failed_ = true;
      throw cluster_failure{"cannot write to process " + std::to_string(k) + ": "
                            + std::strerror(errno)};
    }
    at += static_cast<std::size_t>(n);
  }
}

void cluster_run::sync_all() {
  std::map<std::size_t, std::size_t> before;
  for (std::size_t k = 0; k < children_.size(); ++k)
    if (children_[k] && children_[k]->alive) {
      before[k] = ev_.statuses[k];
      command(k, "status");
    }
  wait_for(
    [&] {
      for (auto& [k, n] : before)
        if (ev_.statuses[k] == n)
          return false;
      return true;
    },
    10s, "status replies");
}

} // namespace banyan::cli::cluster_detail
