#include "timer_token.hpp"

namespace banyan::sup {

// Packing: payload * 16 + code. Flushes, join attempts and the giver wait share code 3,
// told apart by the payload: 0 a flush, 1 + n join attempt n, and 10 the giver wait.
namespace {
constexpr std::uint64_t codes = 16;
constexpr std::uint64_t code_of_reply = 0, code_of_start = 1, code_of_offer = 2,
                        code_of_flush = 3, code_of_watch = 4, code_of_adopt = 5,
                        code_of_seed = 6, code_of_lend = 7, code_of_suspect = 8,
                        code_of_background = 9, code_of_rtt_watch = 10,
                        code_of_summary = 11, code_of_retire = 12,
                        code_of_lease = 13;
constexpr std::uint64_t giver_wait_payload = 10;
} // namespace

std::uint64_t timer_token::encode() const {
  switch (what) {
    case kind::reply_due: return seq * codes + code_of_reply;
    case kind::probe_start: return seq * codes + code_of_start;
    case kind::offer_due: return seq * codes + code_of_offer;
    case kind::flush: return code_of_flush;
    case kind::join_attempt: return (1 + seq) * codes + code_of_flush;
    case kind::giver_wait: return giver_wait_payload * codes + code_of_flush;
    case kind::watch: return seq * codes + code_of_watch;
    case kind::adopt: return code_of_adopt;
    case kind::seed: return seq * codes + code_of_seed;
    case kind::lend: return seq * codes + code_of_lend;
    case kind::suspect: return seq * codes + code_of_suspect;
    case kind::background: return seq * codes + code_of_background;
    case kind::rtt_watch: return seq * codes + code_of_rtt_watch;
    case kind::summary: return code_of_summary;
    case kind::retire: return seq * codes + code_of_retire;
    case kind::lease: return seq * codes + code_of_lease;
  }
  return 0;
}

std::optional<timer_token> timer_token::decode(std::uint64_t token) {
  const auto seq = token / codes;
  switch (token % codes) {
    case code_of_reply: return reply_due(seq);
    case code_of_start: return probe_start(seq);
    case code_of_offer: return offer_due(seq);
    case code_of_flush:
      if (seq < 2)
        return flush();
      return seq == giver_wait_payload ? giver_wait() : join_attempt(seq - 1);
    case code_of_watch: return watch(seq);
    case code_of_adopt: return adopt();
    case code_of_seed: return seed(seq);
    case code_of_lend: return lend(seq);
    case code_of_suspect: return suspect(seq);
    case code_of_background: return background(seq);
    case code_of_rtt_watch: return rtt_watch(seq);
    case code_of_summary: return summary();
    case code_of_retire: return retire(seq);
    case code_of_lease: return lease(seq);
    default: return std::nullopt;
  }
}

} // namespace banyan::sup
