#include "banyan/schema/handshake.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "banyan.capnp.h"

namespace banyan::schema {

namespace {

namespace cs = banyan::capnp_schema;

// A handshake message is a handful of words; these limits only stop hostile input.
constexpr std::uint64_t traversal_limit_words = 4 * max_handshake_bytes / sizeof(capnp::word);
constexpr int nesting_limit = 4;

error malformed(const char* what, std::string detail) {
  return make_error(errc::malformed_frame,
                    std::string("malformed ") + what + ": " + std::move(detail));
}

void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::vector<std::uint8_t> frame_of(capnp::MessageBuilder& builder) {
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  std::vector<std::uint8_t> out;
  out.reserve(frame_prefix_bytes + bytes.size());
  put_le(out, bytes.size(), static_cast<int>(frame_prefix_bytes));
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

capnp::Data::Reader data_of(const std::uint8_t* p, std::size_t n) {
  return capnp::Data::Reader(p, n);
}

// Runs `read` on the word-aligned copy of a body; Cap'n Proto's exceptions and our own
// rejections become `malformed_frame` errors.
template <class T, class Read>
expected<T> decode(const char* what, const std::uint8_t* p, std::size_t n, Read&& read) {
  if (n > max_handshake_bytes)
    return make_error(errc::oversized_frame, std::string(what) + " of " + std::to_string(n)
                                                 + " bytes exceeds the limit of "
                                                 + std::to_string(max_handshake_bytes));
  if (n == 0 || n % sizeof(capnp::word) != 0)
    return malformed(what, "body length " + std::to_string(n) + " is not a positive multiple of 8");
  std::vector<capnp::word> aligned(n / sizeof(capnp::word));
  std::memcpy(aligned.data(), p, n);
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_limit_words;
    options.nestingLimit = nesting_limit;
    const kj::ArrayPtr<const capnp::word> array(aligned.data(), aligned.size());
    capnp::FlatArrayMessageReader reader(array, options);
    if (reader.getEnd() != array.end())
      return malformed(what, "bytes left over after the message");
    std::string problem;
    T out = read(reader, problem);
    if (!problem.empty())
      return malformed(what, std::move(problem));
    return out;
  } catch (const kj::Exception& x) {
    return malformed(what, x.getDescription().cStr());
  }
}

template <std::size_t N> bool copy_exact(capnp::Data::Reader d, std::array<std::uint8_t, N>& out) {
  if (d.size() != N)
    return false;
  std::copy(d.begin(), d.end(), out.begin());
  return true;
}

} // namespace

std::vector<std::uint8_t> encode(const hello& h) {
  capnp::MallocMessageBuilder builder(16);
  auto root = builder.initRoot<cs::Hello>();
  root.setVersion(h.version);
  root.setProcId(h.id);
  root.setNonce(data_of(h.challenge.data(), h.challenge.size()));
  root.setListenPort(h.listen_port);
  root.setPlaintext(h.plaintext);
  root.setSession(h.session);
  return frame_of(builder);
}

std::vector<std::uint8_t> encode(const hello_ack& a) {
  capnp::MallocMessageBuilder builder(16);
  auto root = builder.initRoot<cs::HelloAck>();
  root.setVersion(a.version);
  root.setProcId(a.id);
  root.setPlaintext(a.plaintext);
  root.setSession(a.session);
  root.setRefusal(static_cast<cs::Refusal>(a.verdict));
  if (a.mac)
    root.setProof(data_of(a.mac->data(), a.mac->size()));
  if (a.challenge)
    root.setNonce(data_of(a.challenge->data(), a.challenge->size()));
  return frame_of(builder);
}

expected<hello> decode_hello(const std::uint8_t* p, std::size_t n) {
  return decode<hello>("Hello", p, n, [](capnp::MessageReader& reader, std::string& problem) {
    auto root = reader.getRoot<cs::Hello>();
    hello h;
    h.version = root.getVersion();
    h.id = root.getProcId();
    h.listen_port = root.getListenPort();
    h.plaintext = root.getPlaintext();
    h.session = root.getSession();
    if (!copy_exact(root.getNonce(), h.challenge))
      problem = "nonce of " + std::to_string(root.getNonce().size()) + " bytes, expected "
                + std::to_string(nonce_bytes);
    return h;
  });
}

expected<hello_ack> decode_hello_ack(const std::uint8_t* p, std::size_t n) {
  return decode<hello_ack>("HelloAck", p, n,
                           [](capnp::MessageReader& reader, std::string& problem) {
                             auto root = reader.getRoot<cs::HelloAck>();
                             hello_ack a;
                             a.version = root.getVersion();
                             a.id = root.getProcId();
                             a.plaintext = root.getPlaintext();
                             a.session = root.getSession();
                             switch (root.getRefusal()) {
                             case cs::Refusal::NONE:
                               a.verdict = refusal::none;
                               break;
                             case cs::Refusal::ID_IN_USE:
                               a.verdict = refusal::id_in_use;
                               break;
                             default:
                               problem = "unknown refusal "
                                         + std::to_string(static_cast<unsigned>(root.getRefusal()));
                             }
                             if (root.hasNonce()) {
                               a.challenge.emplace();
                               if (!copy_exact(root.getNonce(), *a.challenge))
                                 problem = "nonce of " + std::to_string(root.getNonce().size())
                                           + " bytes, expected " + std::to_string(nonce_bytes);
                             }
                             if (root.hasProof()) {
                               a.mac.emplace();
                               if (!copy_exact(root.getProof(), *a.mac))
                                 problem = "proof of " + std::to_string(root.getProof().size())
                                           + " bytes, expected " + std::to_string(proof_bytes);
                             }
                             return a;
                           });
}

const char* to_string(refusal r) {
  switch (r) {
  case refusal::none:
    return "none";
  case refusal::id_in_use:
    return "id in use";
  }
  return "?";
}

std::vector<std::uint8_t> proof_transcript(proof_role role, const hello& h, proc_id acceptor,
                                           const nonce& acceptor_challenge,
                                           std::uint64_t acceptor_session, refusal verdict) {
  static constexpr char label[] = "banyan-v1";
  std::vector<std::uint8_t> out;
  out.reserve(sizeof label + 2 + 2 * nonce_bytes + 28);
  out.insert(out.end(), label, label + sizeof label - 1);
  out.push_back(static_cast<std::uint8_t>(role));
  put_le(out, h.version, 2);
  out.insert(out.end(), h.challenge.begin(), h.challenge.end());
  out.insert(out.end(), acceptor_challenge.begin(), acceptor_challenge.end());
  put_le(out, h.id, 4);
  put_le(out, acceptor, 4);
  put_le(out, h.listen_port, 2);
  out.push_back(h.plaintext ? 1 : 0);
  put_le(out, h.session, 8);
  put_le(out, acceptor_session, 8);
  out.push_back(static_cast<std::uint8_t>(verdict));
  return out;
}

expected<std::size_t> handshake_reader::feed(const std::uint8_t* p, std::size_t n) {
  if (failure_)
    return *failure_;
  std::size_t used = 0;
  if (prefix_len_ < frame_prefix_bytes) {
    const std::size_t take = std::min(frame_prefix_bytes - prefix_len_, n);
    std::memcpy(prefix_ + prefix_len_, p, take);
    prefix_len_ += take;
    used += take;
    if (prefix_len_ < frame_prefix_bytes)
      return used;
    body_len_ = static_cast<std::size_t>(prefix_[0]) | static_cast<std::size_t>(prefix_[1]) << 8
                | static_cast<std::size_t>(prefix_[2]) << 16
                | static_cast<std::size_t>(prefix_[3]) << 24;
    if (body_len_ > max_handshake_bytes) {
      failure_ =
          make_error(errc::oversized_frame, "handshake message of " + std::to_string(body_len_)
                                                + " bytes exceeds the limit of "
                                                + std::to_string(max_handshake_bytes));
      return *failure_;
    }
    if (body_len_ == 0) {
      failure_ = make_error(errc::malformed_frame, "malformed handshake message: empty body");
      return *failure_;
    }
    body_.reserve(body_len_);
  }
  const std::size_t take = std::min(body_len_ - body_.size(), n - used);
  body_.insert(body_.end(), p + used, p + used + take);
  return used + take;
}

void handshake_reader::reset() {
  prefix_len_ = 0;
  body_len_ = 0;
  body_.clear();
  failure_.reset();
}

} // namespace banyan::schema
