// tcp_transport's connections: the record layer and the frames of an established
// connection. The initiator seals what it writes into records (record_cipher.hpp); the
// acceptor opens them before the frame decoder sees a byte, reading a large payload's
// records straight into the place the decoder gives and decrypting them there; decoded
// frames go to the transport's receiver. Loop thread only.

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <utility>

#include "tcp_impl.hpp"

namespace banyan::net {
namespace detail {

// Seals what is left of `f` (a frame `send` writes directly: at most direct_write_max
// bytes) into one buffer of records: the head, then the payload.
std::vector<std::uint8_t> seal_whole(record_sealer& s, const schema::frame_bytes& f) {
  const std::size_t n = f.size();
  std::size_t records = 0;
  for (std::size_t part : {f.head.size(), f.tail.size()})
    records += (part + sealed_record - 1) / sealed_record;
  std::vector<std::uint8_t> out(n + records * record_overhead);
  std::uint8_t* o = out.data();
  auto seal_part = [&](const std::uint8_t* p, std::size_t len) {
    while (len > 0) {
      const std::size_t k = std::min(len, sealed_record);
      s.seal(p, k, o);
      o += k + record_overhead;
      p += k;
      len -= k;
    }
  };
  seal_part(f.head.data(), f.head.size());
  seal_part(f.tail.data(), f.tail.size());
  return out;
}

// Acceptor: Frames after the handshake.
void tcp_impl::on_frames(connection* c, const std::uint8_t* p, std::size_t n) {
  auto frames = c->decoder.feed_frames(p, n);
  if (!frames) {
    close_conn(c, transport_event::kind::error, frames.err().to_string(),
               connection_failure::malformed_input);
    return;
  }
  on_decoded(c, *frames);
}

// Acceptor, encrypted mode: the record layer between the socket and the frame decoder.
//
//   | len (4, clear) | ciphertext (len) | tag (16) |   -> open -> decoder
//
// A record's ciphertext goes to `staging`, or, when the decoder offers a place for the
// whole record (the rest of a large frame's body, or a payload sink's place), straight
// there; it is decrypted in place, and the decoder sees it only once authenticated.
void tcp_impl::on_records(connection* c, const std::uint8_t* p, std::size_t n) {
  auto& r = c->rec;
  while (n > 0 && c->state == connection::phase::established) {
    if (r.header_len < record_header_bytes) {
      const std::size_t take = std::min(record_header_bytes - r.header_len, n);
      std::memcpy(r.header + r.header_len, p, take);
      r.header_len += take;
      p += take;
      n -= take;
      if (r.header_len == record_header_bytes && !begin_record(c))
        return;
      continue;
    }
    if (r.got < r.len) {
      const std::size_t take = std::min(r.len - r.got, n);
      std::memcpy(r.dest + r.got, p, take);
      r.got += take;
      p += take;
      n -= take;
      continue;
    }
    const std::size_t take = std::min(record_tag_bytes - r.tag_len, n);
    std::memcpy(r.tag + r.tag_len, p, take);
    r.tag_len += take;
    p += take;
    n -= take;
    if (r.tag_len == record_tag_bytes)
      finish_record(c);
  }
}

bool tcp_impl::begin_record(connection* c) {
  auto& r = c->rec;
  const auto len = record_length(r.header);
  if (!len) {
    const std::size_t said = std::size_t{r.header[0]} | std::size_t{r.header[1]} << 8
                             | std::size_t{r.header[2]} << 16 | std::size_t{r.header[3]} << 24;
    close_conn(c, transport_event::kind::error,
               "bad record: length " + std::to_string(said) + " (1 to " + std::to_string(max_record)
                   + " allowed): not from a processor holding the "
                     "secret, or altered on the way",
               connection_failure::malformed_input);
    return false;
  }
  r.len = *len;
  r.got = 0;
  r.tag_len = 0;
  const auto [dp, dn] = c->decoder.direct_buffer();
  r.direct = r.len >= min_direct_read && dn >= r.len;
  if (r.direct) {
    r.dest = dp;
  } else {
    if (r.staging_size < r.len) {
      r.staging_size = std::max(r.len, std::size_t{4096});
      r.staging.reset(new std::uint8_t[r.staging_size]);
    }
    r.dest = r.staging.get();
  }
  return true;
}

void tcp_impl::finish_record(connection* c) {
  auto& r = c->rec;
  const bool direct = r.direct;
  const std::size_t len = r.len;
  std::uint8_t* dest = r.dest;
  r.header_len = 0;
  r.exact_tail = direct ? 2 : std::max(r.exact_tail, 1) - 1;
  if (!c->opener->open(r.header, dest, len, r.tag)) {
    close_conn(c, transport_event::kind::error,
               "record " + std::to_string(c->opener->count() - 1)
                   + " failed authentication (forged, altered, replayed or out of order)",
               connection_failure::malformed_input);
    return;
  }
  auto frames = direct ? c->decoder.commit_direct(len) : c->decoder.feed_frames(dest, len);
  if (!frames) {
    close_conn(c, transport_event::kind::error, frames.err().to_string(),
               connection_failure::malformed_input);
    return;
  }
  on_decoded(c, *frames);
}

bool tcp_impl::record_read_buffer(connection* c, uv_buf_t* buf) {
  auto& r = c->rec;
  if (c->side != connection::role::acceptor)
    return false;
  if (r.header_len == record_header_bytes && r.got < r.len) {
    if (!r.direct && r.exact_tail > 0) {
      // A frame's head between two payloads: it, its tag and the next header, no more.
      *buf = uv_buf_init(
          c->read_buf.data(),
          static_cast<unsigned>(std::min(c->read_buf.size(),
                                         r.len - r.got + record_tag_bytes + record_header_bytes)));
      return true;
    }
    if (!r.direct || r.len - r.got < min_direct_read / 4)
      return false;
    c->direct_read = true;
    *buf = uv_buf_init(reinterpret_cast<char*>(r.dest + r.got),
                       static_cast<unsigned>(std::min(r.len - r.got, max_direct_read)));
    return true;
  }
  if ((r.direct || r.exact_tail > 0) && r.header_len == record_header_bytes && r.got == r.len) {
    // The tag of a record read into place, and the next record's header: alone.
    *buf = uv_buf_init(c->read_buf.data(),
                       static_cast<unsigned>(record_tag_bytes - r.tag_len + record_header_bytes));
    return true;
  }
  if (r.exact_tail > 0 && r.header_len < record_header_bytes) {
    *buf =
        uv_buf_init(c->read_buf.data(), static_cast<unsigned>(record_header_bytes - r.header_len));
    return true;
  }
  return false;
}

void tcp_impl::on_decoded(connection* c, std::vector<schema::frame>& frames) {
  for (auto& f : frames) {
    auto& e = f.envelope;
    stats_.frames_received.fetch_add(1, std::memory_order_relaxed);
    if (e.from != c->peer || e.to != cfg_.self) {
      close_conn(c, transport_event::kind::error,
                 "protocol error: frame from " + std::to_string(e.from) + " to "
                     + std::to_string(e.to) + " on this connection",
                 connection_failure::malformed_input);
      return;
    }
    if (f.returned) {
      // Handed back: as we sent it, to the peer that gave it back.
      transport_event ev{transport_event::kind::undeliverable, c->peer,
                         describe(c) + ": 1 frame handed back"};
      ev.returned.push_back(wire::envelope{cfg_.self, c->peer, std::move(e.body)});
      emit(std::move(ev));
      if (c->state == connection::phase::closing)
        return;
      continue;
    }
    deliver(std::move(e));
  }
}

// Records cut at the head/payload boundary, at most max_record each, so that a receiver
// can read a payload's records straight into the payload's place:
//
//   frame:    | prefix + head (owned) |            payload (shared, never modified)            |
//   records:  [ head                  ][ <= 1 MiB ][ <= 1 MiB ] ... sealed while the window has
//   room
//
// The payload is shared (a forwarded broadcast segment), so it is sealed into new buffers,
// not in place; each holds at most a window's worth, so a 64 MiB frame is sealed and
// written 1 MiB at a time and its ciphertext never exists whole.
bool tcp_impl::seal_frame(connection* c, out_frame& f, write_req& w) {
  const std::size_t head = f.bytes.head.size();
  const std::size_t total = f.bytes.size();
  const std::size_t start = f.sent;
  std::size_t end = start;
  std::size_t records = 0;
  while (end < head) {
    end += std::min(sealed_record, head - end);
    ++records;
  }
  while (end < total && (end == start || c->in_flight + w.bytes + (end - start) < write_window)) {
    end += std::min(sealed_record, total - end);
    ++records;
  }
  const std::size_t size = end - start + records * record_overhead;
  std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[size]);
  std::uint8_t* o = buf.get();
  for (std::size_t at = start; at < end;) {
    const bool in_head = at < head;
    const std::size_t k = std::min(sealed_record, (in_head ? head : end) - at);
    const std::uint8_t* src =
        in_head ? f.bytes.head.data() + at : f.bytes.tail.data() + (at - head);
    c->sealer->seal(src, k, o);
    o += k + record_overhead;
    at += k;
  }
  assert(o == buf.get() + size);
  w.bufs.push_back(uv_buf_init(reinterpret_cast<char*>(buf.get()), static_cast<unsigned>(size)));
  w.sealed.emplace_back(std::move(buf), size);
  w.bytes += end - start;
  f.sent = end;
  return end == total;
}

} // namespace detail
} // namespace banyan::net
