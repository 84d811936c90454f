// libFuzzer entry point for the frame decoder. Built with clang's libFuzzer when clang is
// found, and replayed over its seed corpus (tests/schema/fuzz_corpus) in every build
// (tests/fuzz/fuzz.cmake; docs/wire-protocol.md, "Fuzzing").
//
// The input is a byte stream. It is decoded twice, whole by `decode_body` (as one frame
// body) and in chunks by `frame_decoder` (chunk size taken from the first byte). Every
// envelope that decodes must re-encode to a frame that decodes to the same bytes again,
// and whose size the wire-size model predicts exactly; anything else aborts.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "banyan/schema/codec.hpp"

namespace {

void check(const banyan::wire::envelope& e) {
  const std::vector<std::uint8_t> frame = banyan::schema::encode(e);
  if (banyan::wire::wire_size(e.body) != frame.size())
    std::abort();
  auto again = banyan::schema::decode_body(frame.data() + 4, frame.size() - 4);
  if (!again || banyan::schema::encode(*again) != frame)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t max_frame = 1 << 20; // keep the fuzzer's allocations small
  if (auto e = banyan::schema::decode_body(data, size, max_frame))
    check(*e);

  if (size == 0)
    return 0;
  const std::size_t chunk = 1 + data[0] % 64;
  banyan::schema::frame_decoder decoder(max_frame);
  for (std::size_t at = 1; at < size; at += chunk) {
    const std::size_t n = size - at < chunk ? size - at : chunk;
    auto r = decoder.feed(data + at, n);
    if (!r) {
      if (!decoder.failed())
        std::abort();
      break;
    }
    for (const auto& e : *r)
      check(e);
  }
  return 0;
}
