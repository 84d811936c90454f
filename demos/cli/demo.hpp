#pragma once
// `banyan demo`: the main demonstration on an embedded default.
#include <string>
namespace banyan::cli {
struct demo_options {
  std::string topology = "paper-3c201";
  std::uint64_t seed = 1;
  std::string out_dir = "out/demo";
};
int run_demo(const demo_options& opt);
} // namespace banyan::cli
