// The codec of the collectives' messages: broadcast segments, offers and answers,
// reduction partials and handoffs (codec_internal.hpp).

#include "codec_internal.hpp"

namespace banyan::schema::codec_internal {

thread_local external_payload* t_external = nullptr;

std::uint64_t wire_seq(const wire::collective_id& id) {
  // Life and number share the frame's 64-bit `seq` (docs/wire-protocol.md).
  assert(id.seq <= 0xffffffffu || id.life == 0);
  return (std::uint64_t{id.life} << 32) | id.seq;
}

wire::collective_id collective_id_of(proc_id origin, std::uint64_t seq, collective_kind kind) {
  return wire::collective_id{origin, seq & 0xffffffffu, kind,
                             static_cast<std::uint32_t>(seq >> 32)};
}

cs::ReduceKind to_capnp(reduce_kind k) {
  switch (k) {
    case reduce_kind::sum: return cs::ReduceKind::SUM;
    case reduce_kind::min: return cs::ReduceKind::MIN;
    case reduce_kind::max: return cs::ReduceKind::MAX;
    case reduce_kind::product: return cs::ReduceKind::PRODUCT;
    case reduce_kind::user: return cs::ReduceKind::USER;
  }
  assert(false && "unknown reduce_kind");
  return cs::ReduceKind::SUM;
}

cs::ElementType to_capnp(element_type t) {
  switch (t) {
    case element_type::int32: return cs::ElementType::INT32;
    case element_type::int64: return cs::ElementType::INT64;
    case element_type::float32: return cs::ElementType::FLOAT32;
    case element_type::float64: return cs::ElementType::FLOAT64;
    case element_type::bytes: return cs::ElementType::BYTES;
  }
  assert(false && "unknown element_type");
  return cs::ElementType::BYTES;
}

void write(const wire::bcast_segment& m, body_builder b) {
  auto r = b.initBcastSegment();
  r.setOrigin(m.op.origin);
  r.setSeq(wire_seq(m.op));
  r.setKind(to_capnp(m.kind));
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
  r.setDirect(m.direct);
  r.setHops(m.hops);
  r.setStream(m.stream);
  r.setFirst(m.first);
  r.setIndex(m.index);
  r.setCount(m.count);
  r.setTotal(m.total);
  write_data(
    m.payload, [&](unsigned n) { return r.initPayload(n); },
    [&](capnp::Orphan<capnp::Data>&& o) { r.adoptPayload(kj::mv(o)); });
}

void write(const wire::reduce_partial& m, body_builder b) {
  auto r = b.initReducePartial();
  r.setOp(m.op);
  r.setRoot(m.root);
  r.setKind(to_capnp(m.fn.kind));
  r.setType(to_capnp(m.fn.type));
  r.setUserOp(m.fn.user);
  r.setTreeKind(to_capnp(m.kind));
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
  r.setDirect(m.direct);
  r.setHops(m.hops);
  r.setTentative(m.tentative);
  write_data(
    m.data, [&](unsigned n) { return r.initData(n); },
    [&](capnp::Orphan<capnp::Data>&& o) { r.adoptData(kj::mv(o)); });
}

void write(const wire::reduce_handoff& m, body_builder b) {
  auto r = b.initReduceHandoff();
  write_list(m.records, [&](unsigned n) { return r.initRecords(n); });
  r.setHops(m.hops);
  write_list(m.completed, [&](unsigned n) { return r.initCompleted(n); });
}

void write(const wire::bcast_offer& m, body_builder b) {
  auto r = b.initBcastOffer();
  r.setOrigin(m.op.origin);
  r.setSeq(wire_seq(m.op));
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
  r.setTag(m.tag);
  r.setHops(m.hops);
}

void write(const wire::bcast_answer& m, body_builder b) {
  auto r = b.initBcastAnswer();
  r.setOrigin(m.op.origin);
  r.setSeq(wire_seq(m.op));
  r.setTag(m.tag);
  r.setAccepted(m.accepted);
}

void write(const wire::bcast_ack& m, body_builder b) {
  auto r = b.initBcastAck();
  r.setOrigin(m.op.origin);
  r.setSeq(wire_seq(m.op));
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
}

void write(const wire::reduce_ack& m, body_builder b) {
  auto r = b.initReduceAck();
  r.setOp(m.op);
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
}

void write(const wire::reduce_ask& m, body_builder b) {
  auto r = b.initReduceAsk();
  r.setOp(m.op);
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
}

// The buffer of the frame being decoded when the decoded envelope may keep it (a large
// frame's own buffer, see frame_decoder): data inside it is sliced, not copied.
thread_local const shared_bytes* backing = nullptr;

shared_bytes read_data(capnp::Data::Reader d) {
  if (backing != nullptr && d.size() > 0 && d.begin() >= backing->begin()
      && d.end() <= backing->end())
    return backing->slice(static_cast<std::size_t>(d.begin() - backing->begin()), d.size());
  return shared_bytes::copy_of(d.begin(), d.size());
}

reduce_kind from_capnp(cs::ReduceKind k) {
  switch (k) {
    case cs::ReduceKind::SUM: return reduce_kind::sum;
    case cs::ReduceKind::MIN: return reduce_kind::min;
    case cs::ReduceKind::MAX: return reduce_kind::max;
    case cs::ReduceKind::PRODUCT: return reduce_kind::product;
    case cs::ReduceKind::USER: return reduce_kind::user;
  }
  reject("unknown reduce kind " + std::to_string(static_cast<unsigned>(k)));
}

element_type from_capnp(cs::ElementType t) {
  switch (t) {
    case cs::ElementType::INT32: return element_type::int32;
    case cs::ElementType::INT64: return element_type::int64;
    case cs::ElementType::FLOAT32: return element_type::float32;
    case cs::ElementType::FLOAT64: return element_type::float64;
    case cs::ElementType::BYTES: return element_type::bytes;
  }
  reject("unknown element type " + std::to_string(static_cast<unsigned>(t)));
}

wire::bcast_segment read(cs::BcastSegment::Reader r) {
  wire::bcast_segment m;
  m.op = collective_id_of(r.getOrigin(), r.getSeq(), collective_kind::none);
  m.kind = from_capnp(r.getKind());
  m.vnodes = read_vnodes(r.getVnodes());
  m.direct = r.getDirect();
  m.hops = r.getHops();
  m.stream = r.getStream();
  m.first = r.getFirst();
  m.index = r.getIndex();
  m.count = r.getCount();
  m.total = r.getTotal();
  m.payload = read_data(r.getPayload());
  return m;
}

wire::reduce_partial read(cs::ReducePartial::Reader r) {
  wire::reduce_partial m;
  m.op = r.getOp();
  m.root = r.getRoot();
  m.fn = reduce_op{from_capnp(r.getKind()), from_capnp(r.getType()), r.getUserOp()};
  m.kind = from_capnp(r.getTreeKind());
  m.vnodes = read_vnodes(r.getVnodes());
  m.direct = r.getDirect();
  m.hops = r.getHops();
  m.data = read_data(r.getData());
  m.tentative = r.getTentative();
  return m;
}

wire::reduce_handoff read(cs::ReduceHandoff::Reader r) {
  return wire::reduce_handoff{collective_kind::none, read_list(r.getRecords()), r.getHops(),
                              read_list(r.getCompleted())};
}

wire::bcast_offer read(cs::BcastOffer::Reader r) {
  return wire::bcast_offer{collective_id_of(r.getOrigin(), r.getSeq(), collective_kind::none),
                           read_vnodes(r.getVnodes()), r.getTag(), r.getHops()};
}

wire::bcast_answer read(cs::BcastAnswer::Reader r) {
  return wire::bcast_answer{collective_id_of(r.getOrigin(), r.getSeq(), collective_kind::none), r.getTag(),
                            r.getAccepted()};
}

wire::bcast_ack read(cs::BcastAck::Reader r) {
  return wire::bcast_ack{collective_id_of(r.getOrigin(), r.getSeq(), collective_kind::none),
                         read_vnodes(r.getVnodes())};
}

wire::reduce_ack read(cs::ReduceAck::Reader r) {
  return wire::reduce_ack{collective_kind::none, r.getOp(), read_vnodes(r.getVnodes())};
}

wire::reduce_ask read(cs::ReduceAsk::Reader r) {
  return wire::reduce_ask{collective_kind::none, r.getOp(), read_vnodes(r.getVnodes())};
}

} // namespace banyan::schema::codec_internal
