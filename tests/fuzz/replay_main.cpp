// Replays fuzz inputs through a fuzz target's LLVMFuzzerTestOneInput, without libFuzzer:
// built with the project's compiler, so that every build runs the seed corpus (and any
// input a fuzzer found and was committed) through the target's checks, which abort on a
// violation.
//
//   fuzz_replay_TARGET DIR_OR_FILE...
//
// Every regular file under each directory, in name order. Exit 0 after replaying at least
// one input; 1 when there was none (a corpus that went missing must not pass).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file())
          inputs.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::cerr << "fuzz replay: no such file or directory: " << p.string() << "\n";
      return 1;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::cerr << "fuzz replay: no inputs\n";
    return 1;
  }
  std::size_t total = 0;
  for (auto& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::cerr << "fuzz replay: cannot read " << p.string() << "\n";
      return 1;
    }
    // A fresh allocation of exactly the input's size, as libFuzzer gives, so that a read
    // past the end is caught by the sanitizers.
    std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[data.size() + (data.empty() ? 1 : 0)]);
    std::copy(data.begin(), data.end(), copy.get());
    LLVMFuzzerTestOneInput(copy.get(), data.size());
    total += data.size();
  }
  std::cout << "fuzz replay: " << inputs.size() << " inputs, " << total << " bytes, no violation\n";
  return 0;
}
