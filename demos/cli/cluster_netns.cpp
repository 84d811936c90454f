// `banyan cluster --netns`: one network namespace per site of the topology, shaped to
// the site's narrowest way out (scripts/cluster/netns.sh; cluster_run.hpp).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "cluster_run.hpp"

namespace banyan::cli::cluster_detail {

namespace {

/// scripts/cluster next to the sources: above the executable (build-x/demos/cli/banyan),
/// or under the working directory.
std::string find_scripts(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty())
    return given;
  std::vector<fs::path> tries;
  auto exe = fs::path(self_exe()).parent_path();
  for (auto p = exe; !p.empty() && p != p.root_path(); p = p.parent_path())
    tries.push_back(p / "scripts" / "cluster");
  tries.push_back(fs::current_path() / "scripts" / "cluster");
  for (auto& t : tries)
    if (fs::exists(t / "netns.sh"))
      return t.string();
  return {};
}

} // namespace

void cluster_run::netns_up() {
  if (::geteuid() != 0)
    throw cluster_failure{"--netns needs root (network namespaces, veth links, htb)", 3};
  scripts_ = find_scripts(opt_.scripts_dir);
  if (scripts_.empty())
    throw cluster_failure{"--netns: cannot find scripts/cluster/netns.sh (use --scripts)", 3};
  netns_name_ = "bny" + std::to_string(::getpid() % 100000);
  // One namespace per site in use, shaped to the site's narrowest way out.
  std::map<std::string, double> rate_of; // bytes/s
  for (std::size_t k = 0; k < opt_.procs; ++k) {
    const auto p = static_cast<proc_id>(k);
    auto& site = topo_->groups[static_cast<std::size_t>(topo_->leaf_of(p))].name;
    double r = infinite_rate;
    for (proc_id q = 0; q < topo_->proc_count(); ++q)
      if (topo_->leaf_of(q) != topo_->leaf_of(p))
        r = std::min(r, topo_->path_bandwidth(p, q));
    auto it = rate_of.find(site);
    rate_of[site] = it == rate_of.end() ? r : std::min(it->second, r);
  }
  std::string cmd = "bash '" + scripts_ + "/netns.sh' up " + netns_name_;
  for (auto& [site, r] : rate_of) {
    auto mbit = std::isinf(r) ? 0.0 : r * 8 / 1e6;
    cmd += " " + site + ":" + std::to_string(static_cast<long long>(mbit));
  }
  cmd += " > '" + dir_ + "/netns.out' 2> '" + dir_ + "/netns.err'";
  progress("netns: " + std::to_string(rate_of.size()) + " namespaces (" + netns_name_ + "-*)");
  netns_made_ = true; // from here on, teardown runs `down` whatever happened
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream err(dir_ + "/netns.err");
    std::string line, first;
    while (std::getline(err, line))
      if (!line.empty())
        first = line;
    throw cluster_failure{"--netns: network namespaces not permitted here (" + first + ")", 3};
  }
  std::ifstream out(dir_ + "/netns.out");
  std::string site, ip;
  while (out >> site >> ip)
    site_ip_[site] = ip;
  if (site_ip_.size() != rate_of.size())
    throw cluster_failure{"--netns: netns.sh printed no address for some site", 3};
}

} // namespace banyan::cli::cluster_detail
