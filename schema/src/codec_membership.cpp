// The codec of membership and vnode ownership messages: joins, leaves, handovers and
// routing updates (codec_internal.hpp).

#include "codec_internal.hpp"

namespace banyan::schema::codec_internal {

void write(const wire::join_request& m, body_builder b) {
  auto r = b.initJoinRequest();
  write(m.newcomer, r.initNewcomer());
  write_vnodes(m.wanted, [&](unsigned n) { return r.initWanted(n); });
}

void write(const wire::join_accept& m, body_builder b) {
  auto r = b.initJoinAccept();
  write_list(m.members, [&](unsigned n) { return r.initMembers(n); });
  write_list(m.routes, [&](unsigned n) { return r.initRoutes(n); });
}

void write(const wire::member_joined& m, body_builder b) {
  write(m.who, b.initMemberJoined().initWho());
}

void write(const wire::merge_offer& m, body_builder b) {
  auto r = b.initMergeOffer();
  write_list(m.members, [&](unsigned n) { return r.initMembers(n); });
}

void write(const wire::member_left& m, body_builder b) {
  auto r = b.initMemberLeft();
  r.setWho(m.who);
  r.setIncarnation(m.incarnation);
  r.setCrashed(m.crashed);
  write_list(m.routes, [&](unsigned n) { return r.initRoutes(n); });
}

void write(const wire::handover_request& m, body_builder b) {
  auto r = b.initHandoverRequest();
  write_vnodes(m.vnodes, [&](unsigned n) { return r.initVnodes(n); });
  r.setTo(m.to);
}

void write(const wire::routing_update& m, body_builder b) {
  auto r = b.initRoutingUpdate();
  write_list(m.routes, [&](unsigned n) { return r.initRoutes(n); });
}

void write(const wire::vnode_handover& m, body_builder b) {
  write(m.route, b.initVnodeHandover().initRoute());
}

void write(const wire::vnode_handover_ack& m, body_builder b) {
  auto r = b.initVnodeHandoverAck();
  r.setEpoch(m.epoch);
  r.setAccepted(m.accepted);
}

wire::join_request read(cs::JoinRequest::Reader r) {
  return wire::join_request{read(r.getNewcomer()), read_vnodes(r.getWanted())};
}

wire::join_accept read(cs::JoinAccept::Reader r) {
  return wire::join_accept{read_list(r.getMembers()), read_list(r.getRoutes())};
}

void write(const wire::trees_open& m, body_builder b) {
  auto r = b.initTreesOpen();
  write_list(m.roots, [&](unsigned n) { return r.initRoots(n); });
}

wire::trees_open read(cs::TreesOpen::Reader r) {
  return wire::trees_open{read_list(r.getRoots())};
}

wire::member_joined read(cs::MemberJoined::Reader r) {
  return wire::member_joined{read(r.getWho())};
}

wire::merge_offer read(cs::MergeOffer::Reader r) {
  return wire::merge_offer{read_list(r.getMembers())};
}

wire::member_left read(cs::MemberLeft::Reader r) {
  return wire::member_left{r.getWho(), read_list(r.getRoutes()), r.getIncarnation(),
                          r.getCrashed()};
}

wire::handover_request read(cs::HandoverRequest::Reader r) {
  return wire::handover_request{read_vnodes(r.getVnodes()), r.getTo()};
}

wire::routing_update read(cs::RoutingUpdate::Reader r) {
  return wire::routing_update{read_list(r.getRoutes())};
}

wire::vnode_handover read(cs::VnodeHandover::Reader r) {
  return wire::vnode_handover{read(r.getRoute())};
}

wire::vnode_handover_ack read(cs::VnodeHandoverAck::Reader r) {
  return wire::vnode_handover_ack{r.getEpoch(), r.getAccepted()};
}

} // namespace banyan::schema::codec_internal
