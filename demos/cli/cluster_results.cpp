// `banyan cluster`: the results as a summary on stdout and as pictures (--plot-dir).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cluster_run.hpp"
#include "svg_plot.hpp"

namespace banyan::cli::cluster_detail {

void print_summary(const json& out) {
  std::printf("banyan cluster: %zu processes%s%s\n", out["procs"].get<std::size_t>(),
              out["topology"].is_null() ? "" : (" on " + out["topology"].get<std::string>()).c_str(),
              out["netns"].get<bool>() ? " in network namespaces" : "");
  if (out.contains("overhead"))
    std::printf("overhead (empty messages to process 0): %.3f ms\n",
                out["overhead"]["overhead_ms"].get<double>());
  if (out.contains("bcast-latency")) {
    auto& r = out["bcast-latency"]["results"][0];
    std::printf("bcast 1 B: completion %.3f ms, median %.3f ms, acked %.3f ms, lower bound %.3f ms%s\n",
                r["completion_ms"].get<double>(), r["median_ms"].get<double>(),
                r.value("acked_ms", -1.0), out["bcast-latency"]["lower_bound_ms"].get<double>(),
                r["complete"].get<bool>() ? "" : "  INCOMPLETE");
  }
  if (out.contains("bcast-bandwidth"))
    for (auto& r : out["bcast-bandwidth"]["results"])
      std::printf("bcast %llu B: completion %.3f ms, %.1f MB/s, acked %.3f ms%s\n",
                  static_cast<unsigned long long>(r["size"].get<std::uint64_t>()),
                  r["completion_ms"].get<double>(), r["bandwidth_MBps"].get<double>(),
                  r.value("acked_ms", -1.0), r["complete"].get<bool>() ? "" : "  INCOMPLETE");
  if (out.contains("reduce"))
    for (auto& r : out["reduce"]["results"])
      std::printf("reduce %llu B int32 sum: %.3f ms%s\n",
                  static_cast<unsigned long long>(r["size"].get<std::uint64_t>()),
                  r["completion_ms"].get<double>(), r["ok"].get<bool>() ? "" : "  WRONG RESULT");
  if (out.contains("allreduce"))
    for (auto& r : out["allreduce"]["results"])
      std::printf("allreduce %llu B int32 sum: last process %.3f ms, first %.3f ms, from the last "
                  "start %.3f ms%s\n",
                  static_cast<unsigned long long>(r["size"].get<std::uint64_t>()),
                  r["completion_ms"].get<double>(), r["first_ms"].get<double>(),
                  r["from_last_start_ms"].get<double>(),
                  r["ok"].get<bool>() ? "" : "  WRONG RESULT");
  if (out.contains("barrier"))
    for (auto& r : out["barrier"]["results"])
      std::printf("barrier: last process %.3f ms, first %.3f ms, from the last start %.3f ms%s\n",
                  r["completion_ms"].get<double>(), r["first_ms"].get<double>(),
                  r["from_last_start_ms"].get<double>(), r["ok"].get<bool>() ? "" : "  FAILED");
  if (out.contains("allgather"))
    for (auto& r : out["allgather"]["results"])
      std::printf("allgather %llu B per process: last process %.3f ms, first %.3f ms, from the "
                  "last start %.3f ms%s\n",
                  static_cast<unsigned long long>(r["size"].get<std::uint64_t>()),
                  r["completion_ms"].get<double>(), r["first_ms"].get<double>(),
                  r["from_last_start_ms"].get<double>(),
                  r["ok"].get<bool>() ? "" : "  WRONG RESULT");
  if (out.contains("churn")) {
    auto& c = out["churn"];
    std::printf("churn: %zu broadcasts, %zu/%zu deliveries, %zu duplicates, %zu lost\n",
                c["timeline"].size(), c["deliveries"].get<std::size_t>(),
                c["deliveries_expected"].get<std::size_t>(), c["duplicates"].get<std::size_t>(),
                c["lost"].get<std::size_t>());
  }
}

} // namespace banyan::cli::cluster_detail

namespace banyan::cli {

bool write_cluster_plots(const std::string& dir, const std::string& who, const nlohmann::json& out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::cerr << "banyan cluster: --plot-dir " << dir << ": " << ec.message() << "\n";
    return false;
  }
  std::vector<std::pair<std::string, plot_spec>> plots;
  if (out.contains("bcast-latency")) {
    plot_spec p;
    p.title = "1-byte broadcast from process 0, " + who + " (median per process)";
    p.x_label = "processes, sorted by delivery time";
    p.y_label = "delivered after (ms)";
    p.draw = plot_spec::style::points;
    plot_series s;
    s.label = "banyan";
    std::vector<double> t;
    for (auto& v : out["bcast-latency"]["results"][0]["per_proc_ms"])
      if (v.get<double>() >= 0)
        t.push_back(v.get<double>());
    std::sort(t.begin(), t.end());
    for (std::size_t k = 0; k < t.size(); ++k) {
      s.x.push_back(static_cast<double>(k + 1));
      s.y.push_back(t[k]);
    }
    p.series.push_back(std::move(s));
    plots.emplace_back("latency.svg", std::move(p));
  }
  if (out.contains("bcast-bandwidth")) {
    plot_spec p;
    p.title = "Broadcast bandwidth by size, " + who + " (size x processes / completion)";
    p.x_label = "message size (bytes)";
    p.y_label = "MB/s";
    p.log_x = true;
    plot_series s;
    s.label = "banyan";
    for (auto& r : out["bcast-bandwidth"]["results"]) {
      s.x.push_back(r["size"].get<double>());
      s.y.push_back(r["bandwidth_MBps"].get<double>());
    }
    p.series.push_back(std::move(s));
    plots.emplace_back("bandwidth.svg", std::move(p));
  }
  if (out.contains("churn")) {
    auto& c = out["churn"];
    plot_spec p;
    p.title = "Broadcasts of " + std::to_string(c["size"].get<std::uint64_t>() >> 10)
              + " KiB under churn, " + who;
    p.x_label = "time (ms)";
    p.y_label = "MB/s per broadcast (size x processes / completion)";
    p.draw = plot_spec::style::steps;
    plot_series s;
    s.label = "banyan";
    for (auto& pt : c["timeline"]) {
      s.x.push_back(pt["t_ms"].get<double>());
      s.y.push_back(pt["bandwidth_MBps"].get<double>());
    }
    p.series.push_back(std::move(s));
    for (auto& e : c["restabilize_ms"])
      if (e["at_ms"].is_number() && e["at_ms"].get<double>() >= 0)
        p.markers.push_back({e["at_ms"].get<double>(), e["event"].get<std::string>()});
    plots.emplace_back("churn.svg", std::move(p));
  }
  bool ok = true;
  for (auto& [name, p] : plots) {
    auto path = (std::filesystem::path(dir) / name).string();
    if (auto err = write_svg(path, p)) {
      std::cerr << "banyan cluster: " << *err << "\n";
      ok = false;
    } else {
      std::fprintf(stderr, "cluster: wrote %s\n", path.c_str());
    }
  }
  return ok;
}

} // namespace banyan::cli
