#include "banyan/schema/codec.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include "banyan.capnp.h"
#include "codec_internal.hpp"

namespace banyan::schema {

using namespace codec_internal;

namespace {

wire::message read_body(body_reader b) {
  using W = cs::Frame::Body::Which;
  switch (b.which()) {
    case W::PING: return read(b.getPing());
    case W::PONG: return read(b.getPong());
    case W::BW_REQUEST: return read(b.getBwRequest());
    case W::BW_REPLY: return read(b.getBwReply());
    case W::ADOPT_REQUEST: return read(b.getAdoptRequest());
    case W::ADOPT_REPLY: return read(b.getAdoptReply());
    case W::RELEASE: return read(b.getRelease());
    case W::ORPHAN: return read(b.getOrphan());
    case W::TREE_UPDATE: return read(b.getTreeUpdate());
    case W::SUBTREE_UPDATE: return read(b.getSubtreeUpdate());
    case W::JOIN_REQUEST: return read(b.getJoinRequest());
    case W::JOIN_ACCEPT: return read(b.getJoinAccept());
    case W::MEMBER_JOINED: return read(b.getMemberJoined());
    case W::MEMBER_LEFT: return read(b.getMemberLeft());
    case W::HANDOVER_REQUEST: return read(b.getHandoverRequest());
    case W::ROUTING_UPDATE: return read(b.getRoutingUpdate());
    case W::VNODE_HANDOVER: return read(b.getVnodeHandover());
    case W::VNODE_HANDOVER_ACK: return read(b.getVnodeHandoverAck());
    case W::BCAST_SEGMENT: return read(b.getBcastSegment());
    case W::REDUCE_PARTIAL: return read(b.getReducePartial());
    case W::REDUCE_HANDOFF: return read(b.getReduceHandoff());
    case W::BCAST_OFFER: return read(b.getBcastOffer());
    case W::BCAST_ANSWER: return read(b.getBcastAnswer());
    case W::BCAST_ACK: return read(b.getBcastAck());
    case W::PING_REQ: return read(b.getPingReq());
    case W::PING_ACK: return read(b.getPingAck());
    case W::MERGE_OFFER: return read(b.getMergeOffer());
    case W::REDUCE_ACK: return read(b.getReduceAck());
    case W::REDUCE_ASK: return read(b.getReduceAsk());
    case W::TREE_SUMMARY: return read(b.getTreeSummary());
    case W::TREES_OPEN: return read(b.getTreesOpen());
  }
  reject("unknown message type " + std::to_string(static_cast<unsigned>(b.which())));
}

// --- frames -------------------------------------------------------------------------

void build(const wire::envelope& e, capnp::MessageBuilder& builder, bool returned = false) {
  auto frame = builder.initRoot<cs::Frame>();
  frame.setVersion(protocol_version);
  frame.setFrom(e.from);
  frame.setTo(e.to);
  frame.setReturned(returned);
  frame.setCollective(to_capnp(wire::kind_of(e.body)));
  std::visit([&](const auto& m) { write(m, frame.getBody()); }, e.body);
}

// The model's size, in words, of everything after the segment table: a first segment of
// exactly this size holds the whole message, so the encoding is a single segment.
unsigned first_segment_words(const wire::envelope& e) {
  const std::size_t model = wire::wire_size(e.body);
  return static_cast<unsigned>((model - frame_prefix_bytes - 8) / sizeof(capnp::word));
}

void put_le32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v >> 16);
  p[3] = static_cast<std::uint8_t>(v >> 24);
}

std::uint32_t get_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

error malformed(std::string what) {
  return make_error(errc::malformed_frame, "malformed frame: " + std::move(what));
}

error oversized(std::size_t n, std::size_t max_frame) {
  return make_error(errc::oversized_frame, "frame of " + std::to_string(n) +
                                               " bytes exceeds the limit of " +
                                               std::to_string(max_frame) + " bytes");
}

// Checks common to decode_body() and the stream decoder, before any bytes are copied.
std::optional<error> check_length(std::size_t n, std::size_t max_frame) {
  if (n > max_frame)
    return oversized(n, max_frame);
  if (n == 0)
    return malformed("empty body");
  if (n % sizeof(capnp::word) != 0)
    return malformed("body length " + std::to_string(n) + " is not a multiple of 8");
  return std::nullopt;
}

// The frame in `reader`; throws what decode_words() catches.
expected<schema::frame> read_frame(capnp::MessageReader& reader) {
  auto frame = reader.getRoot<cs::Frame>();
  if (frame.getVersion() != protocol_version)
    return make_error(errc::version_mismatch,
                      "peer speaks protocol version " + std::to_string(frame.getVersion()) +
                          ", this processor " + std::to_string(protocol_version));
  auto body = read_body(frame.getBody());
  const auto kind = from_capnp(frame.getCollective());
  // A collective's message names its engine; the supervisor's messages name none.
  const bool collective = std::holds_alternative<wire::bcast_segment>(body) ||
                          std::holds_alternative<wire::bcast_offer>(body) ||
                          std::holds_alternative<wire::bcast_answer>(body) ||
                          std::holds_alternative<wire::bcast_ack>(body) ||
                          std::holds_alternative<wire::reduce_partial>(body) ||
                          std::holds_alternative<wire::reduce_handoff>(body) ||
                          std::holds_alternative<wire::reduce_ack>(body) ||
                          std::holds_alternative<wire::reduce_ask>(body);
  // (A collective's message of kind `none` is nobody's: an engine host hands it back.)
  if (!collective && kind != collective_kind::none)
    reject("a supervisor message of collective kind " + std::string(to_string(kind)));
  wire::set_kind(body, kind);
  return schema::frame{wire::envelope{frame.getFrom(), frame.getTo(), std::move(body)},
                       frame.getReturned()};
}

// Decodes a body already in word-aligned storage. Length checks are the caller's.
expected<schema::frame> decode_words(const std::uint64_t* words, std::size_t count) {
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_factor * count + traversal_slack_words;
    options.nestingLimit = nesting_limit;
    const kj::ArrayPtr<const capnp::word> array(reinterpret_cast<const capnp::word*>(words),
                                                count);
    capnp::FlatArrayMessageReader reader(array, options);
    if (reader.getEnd() != array.end())
      return malformed("bytes left over after the message");
    return read_frame(reader);
  } catch (const rejection& r) {
    return malformed(r.what);
  } catch (const kj::Exception& x) {
    return malformed(std::string(x.getDescription().cStr()));
  }
}

// Decodes a message given as its segments (the sink path of frame_decoder), `words` in all.
expected<schema::frame> decode_segments(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments,
                                        std::size_t words) {
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_factor * words + traversal_slack_words;
    options.nestingLimit = nesting_limit;
    capnp::SegmentArrayMessageReader reader(segments, options);
    return read_frame(reader);
  } catch (const rejection& r) {
    return malformed(r.what);
  } catch (const kj::Exception& x) {
    return malformed(std::string(x.getDescription().cStr()));
  }
}

/// The stream framing of `segments` (capnp::writeMessage): length prefix, segment table
/// (count - 1, each size in words, padded to a whole word), then the first `inline_count`
/// segments' words; the rest are written by the caller.
std::vector<std::uint8_t> frame_head(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments,
                                     std::size_t inline_count) {
  const std::size_t body = capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word);
  assert(body <= std::numeric_limits<std::uint32_t>::max() && "message too large to encode");
  std::size_t head = frame_prefix_bytes + (segments.size() / 2 + 1) * sizeof(capnp::word);
  for (std::size_t i = 0; i < inline_count; ++i)
    head += segments[i].size() * sizeof(capnp::word);
  std::vector<std::uint8_t> out;
  out.reserve(head);
  auto append32 = [&out](std::uint32_t v) {
    std::uint8_t b[4];
    put_le32(b, v);
    out.insert(out.end(), b, b + 4);
  };
  append32(static_cast<std::uint32_t>(body));
  append32(static_cast<std::uint32_t>(segments.size() - 1));
  for (auto& seg : segments)
    append32(static_cast<std::uint32_t>(seg.size()));
  if (segments.size() % 2 == 0)
    append32(0);
  for (std::size_t i = 0; i < inline_count; ++i) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(segments[i].begin());
    out.insert(out.end(), p, p + segments[i].size() * sizeof(capnp::word));
  }
  assert(out.size() == head);
  return out;
}

} // namespace

std::vector<std::uint8_t> encode(const wire::envelope& e, bool returned) {
  capnp::MallocMessageBuilder builder(first_segment_words(e));
  build(e, builder, returned);
  auto segments = builder.getSegmentsForOutput();
  return frame_head(segments, segments.size());
}

namespace {

/// The payload `encode_frame` may leave in place: a broadcast segment's or a reduction
/// partial's, large enough to matter, word-aligned and a whole number of words.
const shared_bytes* external_candidate(const wire::envelope& e) {
  const shared_bytes* b = nullptr;
  if (auto* s = std::get_if<wire::bcast_segment>(&e.body))
    b = &s->payload;
  else if (auto* r = std::get_if<wire::reduce_partial>(&e.body))
    b = &r->data;
  if (b == nullptr || b->size() < external_min_bytes || b->size() % sizeof(capnp::word) != 0
      || reinterpret_cast<std::uintptr_t>(b->data()) % alignof(capnp::word) != 0)
    return nullptr;
  return b;
}

} // namespace

frame_bytes encode_frame(const wire::envelope& e, bool returned) {
  const shared_bytes* big = external_candidate(e);
  if (big == nullptr)
    return {encode(e, returned), {}};
  // The model's single segment, less the payload, plus room for the far pointer's
  // landing pad (two words).
  const unsigned words = first_segment_words(e);
  const unsigned payload_words = static_cast<unsigned>(big->size() / sizeof(capnp::word));
  capnp::MallocMessageBuilder builder(words > payload_words ? words - payload_words + 4 : 64);
  external_payload x{big, builder.getOrphanage(), false};
  t_external = &x;
  try {
    build(e, builder, returned);
  } catch (...) {
    t_external = nullptr;
    throw;
  }
  t_external = nullptr;
  auto segments = builder.getSegmentsForOutput();
  const auto& last = segments[segments.size() - 1];
  if (!x.used || segments.size() < 2
      || reinterpret_cast<const std::uint8_t*>(last.begin()) != big->data()
      || last.size() * sizeof(capnp::word) != big->size())
    return {frame_head(segments, segments.size()), {}}; // not where expected: copy it all
  return {frame_head(segments, segments.size() - 1), *big};
}

std::size_t encoded_size(const wire::envelope& e) {
  capnp::MallocMessageBuilder builder(first_segment_words(e));
  build(e, builder);
  return frame_prefix_bytes + capnp::computeSerializedSizeInWords(builder) * sizeof(capnp::word);
}

expected<frame> decode_frame_body(const std::uint8_t* p, std::size_t n, std::size_t max_frame) {
  if (auto e = check_length(n, max_frame))
    return std::move(*e);
  const std::size_t count = n / sizeof(capnp::word);
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(capnp::word) == 0)
    return decode_words(reinterpret_cast<const std::uint64_t*>(p), count);
  std::vector<std::uint64_t> aligned(count);
  std::memcpy(aligned.data(), p, n);
  return decode_words(aligned.data(), count);
}

expected<wire::envelope> decode_body(const std::uint8_t* p, std::size_t n, std::size_t max_frame) {
  auto f = decode_frame_body(p, n, max_frame);
  if (!f)
    return f.err();
  return std::move(f->envelope);
}

frame_decoder::frame_decoder(std::size_t max_frame) : max_frame_(max_frame) {}

void frame_decoder::reset_frame() {
  prefix_len_ = 0;
  frame_len_ = 0;
  body_len_ = 0;
  mode_ = mode::plain;
  stage_ = 0;
  want_ = 0;
  head_bytes_ = 0;
  place_ = {};
  // The buffer is kept (up to a size) with its size: growing it for the next frame then
  // zero-fills only what is new, not every frame's worth of bytes again.
  if (body_.capacity() > retained_buffer_words)
    std::vector<std::uint64_t>().swap(body_);
}

expected<std::vector<wire::envelope>> frame_decoder::feed(const std::uint8_t* p, std::size_t n) {
  auto frames = feed_frames(p, n);
  if (!frames)
    return frames.err();
  std::vector<wire::envelope> out;
  out.reserve(frames->size());
  for (auto& f : *frames)
    out.push_back(std::move(f.envelope));
  return out;
}

bool frame_decoder::finish_frame(std::vector<frame>& out) {
  expected<frame> e = make_error(errc::malformed_frame, "");
  if (mode_ == mode::sunk) {
    // The head's segments from `head_`, the payload (the last segment) from the sink's place.
    const std::size_t n = seg_words_.size();
    std::vector<kj::ArrayPtr<const capnp::word>> segments;
    segments.reserve(n);
    const auto* w = reinterpret_cast<const capnp::word*>(head_.data()) + (n / 2 + 1);
    for (std::size_t i = 0; i + 1 < n; ++i) {
      segments.emplace_back(w, seg_words_[i]);
      w += seg_words_[i];
    }
    segments.emplace_back(reinterpret_cast<const capnp::word*>(place_.dest), seg_words_[n - 1]);
    const shared_bytes region = place_.region;
    backing = &region;
    e = decode_segments(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>(segments.data(),
                                                                            segments.size()),
                        frame_len_ / sizeof(capnp::word));
    backing = nullptr;
  } else if (large()) {
    // The envelope keeps the buffer: payloads are slices of it. Cap'n Proto needs word
    // alignment, which operator new gives; were it missing, the words are copied.
    big_.resize(frame_len_);
    const shared_bytes whole(std::move(big_));
    big_ = {};
    if (reinterpret_cast<std::uintptr_t>(whole.data()) % alignof(capnp::word) == 0) {
      backing = &whole;
      e = decode_words(reinterpret_cast<const std::uint64_t*>(whole.data()),
                       frame_len_ / sizeof(std::uint64_t));
      backing = nullptr;
    } else {
      e = decode_frame_body(whole.data(), frame_len_, max_frame_);
    }
  } else {
    e = decode_words(body_.data(), frame_len_ / sizeof(std::uint64_t));
  }
  reset_frame();
  if (!e) {
    failure_ = e.err();
    return false;
  }
  out.push_back(std::move(*e));
  return true;
}

void frame_decoder::grow_big(std::size_t n) {
  // Capacity for the whole body at once, so that growing never moves the bytes; only
  // the part in use is written (zero-filled, then received), so untouched pages of a
  // body announced but not sent cost address space, not memory.
  if (big_.capacity() < frame_len_)
    big_.reserve(frame_len_);
  if (big_.size() < n)
    big_.resize(n);
}

std::pair<std::uint8_t*, std::size_t> frame_decoder::target(std::size_t at_least) {
  switch (mode_) {
    case mode::probe: {
      const std::size_t words = (want_ + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
      if (head_.size() < words)
        head_.resize(words);
      return {reinterpret_cast<std::uint8_t*>(head_.data()) + body_len_, want_ - body_len_};
    }
    case mode::sunk:
      return {place_.dest + (body_len_ - head_bytes_), frame_len_ - body_len_};
    case mode::plain:
      break;
  }
  if (large()) {
    grow_big(std::min(frame_len_, std::max(body_len_ + at_least, body_len_ + 1)));
    return {big_.data() + body_len_, big_.size() - body_len_};
  }
  const std::size_t words =
      (std::min(frame_len_, body_len_ + at_least) + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
  if (body_.size() < words)
    body_.resize(words);
  return {reinterpret_cast<std::uint8_t*>(body_.data()) + body_len_,
          words * sizeof(std::uint64_t) - body_len_};
}

void frame_decoder::to_plain() {
  mode_ = mode::plain;
  grow_big(body_len_);
  std::memcpy(big_.data(), head_.data(), body_len_);
}

void frame_decoder::look() {
  const auto* b = reinterpret_cast<const std::uint8_t*>(head_.data());
  if (stage_ == 0) {
    const std::size_t n = std::size_t{get_le32(b)} + 1;
    const std::size_t table = (n / 2 + 1) * sizeof(capnp::word);
    if (n < 2 || n > max_sink_segments || table >= frame_len_)
      return to_plain();
    seg_words_.assign(n, 0);
    stage_ = 1;
    want_ = table;
    return;
  }
  if (stage_ == 1) {
    const std::size_t n = seg_words_.size();
    std::size_t head = want_;
    for (std::size_t i = 0; i < n; ++i) {
      seg_words_[i] = get_le32(b + 4 * (i + 1));
      if (i + 1 < n)
        head += std::size_t{seg_words_[i]} * sizeof(capnp::word);
    }
    const std::size_t last = std::size_t{seg_words_[n - 1]} * sizeof(capnp::word);
    if (head > max_sink_head || last < external_min_bytes || head + last != frame_len_)
      return to_plain();
    stage_ = 2;
    want_ = head;
    return;
  }
  // The head is in: what does it say? (The payload's segment is not there yet, so the
  // reader gets only the others; the payload is not read.)
  const std::size_t n = seg_words_.size();
  std::vector<kj::ArrayPtr<const capnp::word>> segments;
  const auto* w = reinterpret_cast<const capnp::word*>(head_.data()) + (n / 2 + 1);
  for (std::size_t i = 0; i + 1 < n; ++i) {
    segments.emplace_back(w, seg_words_[i]);
    w += seg_words_[i];
  }
  payload_head h;
  h.length = std::size_t{seg_words_[n - 1]} * sizeof(capnp::word);
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_factor * (want_ / sizeof(capnp::word)) + traversal_slack_words;
    options.nestingLimit = nesting_limit;
    capnp::SegmentArrayMessageReader reader(
        kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>(segments.data(), segments.size()),
        options);
    auto f = reader.getRoot<cs::Frame>();
    if (f.getVersion() != protocol_version || f.getReturned()
        || f.getBody().which() != cs::Frame::Body::BCAST_SEGMENT)
      return to_plain();
    auto r = f.getBody().getBcastSegment();
    h.from = f.getFrom();
    h.to = f.getTo();
    h.op = codec_internal::collective_id_of(
      r.getOrigin(), r.getSeq(),
      static_cast<collective_kind>(static_cast<std::uint16_t>(f.getCollective())));
    h.index = r.getIndex();
    h.count = r.getCount();
    h.total = r.getTotal();
  } catch (const kj::Exception&) {
    return to_plain(); // the full decode reports it
  }
  auto place = (*sink_)(h);
  if (!place || place->region.size() != h.length || place->dest == nullptr
      || place->dest != place->region.data()
      || reinterpret_cast<std::uintptr_t>(place->dest) % alignof(capnp::word) != 0)
    return to_plain();
  place_ = std::move(*place);
  head_bytes_ = want_;
  mode_ = mode::sunk;
}

bool frame_decoder::wrote(std::size_t n, std::vector<frame>& out) {
  body_len_ += n;
  while (mode_ == mode::probe && body_len_ == want_)
    look();
  if (body_len_ == frame_len_)
    return finish_frame(out);
  return true;
}

std::pair<std::uint8_t*, std::size_t> frame_decoder::direct_buffer() {
  if (failure_ || prefix_len_ < frame_prefix_bytes || !large() || body_len_ >= frame_len_)
    return {nullptr, 0};
  // Grow with the bytes that arrive (at most doubling), at least zero_copy_min per read.
  return target(std::max(body_len_, zero_copy_min));
}

expected<std::vector<frame>> frame_decoder::commit_direct(std::size_t n) {
  if (failure_)
    return *failure_;
  std::vector<frame> out;
  assert(large() && body_len_ + n <= frame_len_);
  if (!wrote(n, out))
    return *failure_;
  return out;
}

expected<std::vector<frame>> frame_decoder::feed_frames(const std::uint8_t* p, std::size_t n) {
  if (failure_)
    return *failure_;
  std::vector<frame> out;
  while (n > 0) {
    if (prefix_len_ < frame_prefix_bytes) {
      const std::size_t take = std::min(frame_prefix_bytes - prefix_len_, n);
      std::memcpy(prefix_ + prefix_len_, p, take);
      prefix_len_ += take;
      p += take;
      n -= take;
      if (prefix_len_ < frame_prefix_bytes)
        break;
      frame_len_ = get_le32(prefix_);
      if (auto e = check_length(frame_len_, max_frame_)) {
        failure_ = std::move(*e);
        return *failure_;
      }
      if (large() && sink_ != nullptr && *sink_) {
        mode_ = mode::probe;
        want_ = sizeof(capnp::word);
      }
      continue;
    }
    // Grow with the bytes that actually arrived (vector growth is geometric).
    auto [into, room] = target(n);
    const std::size_t take = std::min(room, n);
    std::memcpy(into, p, take);
    p += take;
    n -= take;
    if (!wrote(take, out))
      return *failure_;
  }
  return out;
}

} // namespace banyan::schema

