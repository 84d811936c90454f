#include "health.hpp"

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace banyan::cli {

namespace {

int run_health(const std::string& path) {
  auto fail = [](const std::string& what) {
    std::cerr << "banyan health: " << what << "\n";
    return 1;
  };
  std::ifstream in(path);
  if (!in)
    return fail("cannot read " + path + " (no node keeps it yet?)");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("state") || !j["state"].is_string())
    return fail(path + " is not a node's --json-status");
  const auto state = j["state"].get<std::string>();
  if (j.contains("error") && j["error"].is_string())
    return fail("node " + j.value("id", nlohmann::json()).dump() + " failed: "
                + j["error"].get<std::string>());
  if (state != "member")
    return fail("node " + j.value("id", nlohmann::json()).dump() + " is " + state
                + ", not a member");
  return 0;
}

} // namespace

void add_health_command(CLI::App& app, std::function<int()>& action) {
  auto path = std::make_shared<std::string>();
  auto cmd = app.add_subcommand("health", "exit 0 if the node keeping this --json-status is a member");
  cmd->add_option("file", *path, "the node's --json-status file")->required()->type_name("FILE");
  cmd->callback([path, &action] { action = [path] { return run_health(*path); }; });
}

} // namespace banyan::cli
