#include "banyan/net/id_claim.hpp"

namespace banyan::net {

claim_verdict judge_claim(proc_id self, proc_id id, std::uint64_t session, id_holder holder) {
  if (id == self)
    return claim_verdict::refuse;
  switch (holder.what) {
  case id_holder::kind::none:
  case id_holder::kind::unanswered:
    return claim_verdict::accept;
  case id_holder::kind::answered:
    return holder.session == session ? claim_verdict::accept : claim_verdict::refuse;
  case id_holder::kind::pending:
    return claim_verdict::wait;
  case id_holder::kind::idle:
    return claim_verdict::connect;
  }
  return claim_verdict::refuse;
}

const char* to_string(claim_verdict v) {
  switch (v) {
  case claim_verdict::accept:
    return "accept";
  case claim_verdict::refuse:
    return "refuse";
  case claim_verdict::wait:
    return "wait";
  case claim_verdict::connect:
    return "connect";
  }
  return "?";
}

} // namespace banyan::net
