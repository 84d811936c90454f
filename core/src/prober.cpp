#include "prober.hpp"

#include <algorithm>

#include "banyan/core/lan_search.hpp"
#include "supervisor_parts.hpp"
#include "view_buckets.hpp"
#include "view_digest.hpp"

namespace banyan::sup {

std::uint64_t prober::view_digest_now() {
  const auto members = s_.members.version();
  const auto routes = s_.owners.routes().version();
  if (digest_ == 0 || members != digest_members_ || routes != digest_routes_) {
    digest_ = view_digest(s_.members.all_info(), s_.members.tombstones(), s_.owners.routes());
    digest_members_ = members;
    digest_routes_ = routes;
  }
  return digest_;
}

const std::vector<std::uint32_t>& prober::bucket_digests(std::uint64_t view, std::size_t n) {
  if (view != buckets_view_ || buckets_.size() != n) { // equal digests: the same view
    buckets_ = view_bucket_digests(s_.members.all_info(), s_.members.tombstones(),
                                   s_.owners.routes(), n);
    buckets_view_ = view;
  }
  return buckets_;
}

std::string prober::describe() const {
  static const char* phases[] = {"pause", "ping", "download", "adopt"};
  std::string r;
  if (schedule_.active())
    r += ", measuring (" + std::to_string(schedule_.extra_left()) + " extra left)";
  if (probe_)
    r += ", probe " + std::to_string(probe_->seq) + " of " + std::to_string(probe_->cand) +
         " in " + phases[static_cast<int>(probe_->at)];
  return r;
}

void prober::trigger(timestamp now, outbox& out) {
  if (s_.status != supervisor::status::member)
    return;
  s_.drift.round_ended(); // a round that judges every tree
  if (!schedule_.active())
    round_probed_.clear(); // a new round
  schedule_.trigger();
  maybe_probe(now, out);
}

void prober::reexamine(timestamp now, outbox& out) {
  if (s_.status != supervisor::status::member)
    return;
  if (!schedule_.active())
    round_probed_.clear();
  schedule_.trigger();
  maybe_probe(now, out);
}

bool prober::start_background(timestamp now, proc_id cand, outbox& out) {
  if (probe_ || schedule_.active() || s_.status != supervisor::status::member
      || !s_.members.is_member(cand) || cand == s_.self)
    return false;
  probe p;
  p.seq = s_.next_seq++;
  p.cand = cand;
  p.background = true;
  probe_ = std::move(p);
  start_probe(now, out);
  return true;
}

void prober::progress() {
  schedule_.progress(s_.decision.extra_from_last_change && !settling_);
}

void prober::remeasure(proc_id p) {
  if (std::find(remeasure_.begin(), remeasure_.end(), p) == remeasure_.end())
    remeasure_.push_back(p);
}

void prober::maybe_probe(timestamp now, outbox& out) {
  if (probe_ || s_.status != supervisor::status::member)
    return;

  // Trees waiting for their seed do not keep the schedule going (they get a parent
  // without probing, or measuring starts for them after `seed_wait`).
  auto& trees = s_.trees.all();
  const bool parented = std::all_of(trees.begin(), trees.end(), [&](auto& t) {
    return !t || t->connected() || s_.seeding.waiting(t->key().root);
  });
  const bool was_active = schedule_.active();
  // On demand, a round searches for the LAN before its extra probes count (not in a
  // joiner's or a repaired processor's round: those stay in the LAN they were placed in).
  const bool searched = !s_.cfg.lan_search || !s_.roots.on_demand() || settling_
                        || repair_round_ || lan_searched();
  if (!(s_.members.size() >= 2 && schedule_.next(parented && searched))) {
    if (was_active) {
      settling_ = repair_round_ = false;
      s_.drift.round_ended();
    }
    if (s_.members.size() < 2)
      schedule_ = measurement_schedule(s_.cfg.extra_measurements);
    return;
  }
  probe p;
  p.seq = s_.next_seq++;
  p.cand = no_proc;
  while (!remeasure_.empty() && p.cand == no_proc) {
    auto r = remeasure_.front();
    remeasure_.erase(remeasure_.begin());
    if (s_.members.is_member(r) && r != s_.self)
      p.cand = r; // adopted without a measurement: measure it now
  }
  if (p.cand == no_proc && !s_.drift.reexamining().empty()) {
    // Re-examining after a drift: the best alternatives first, each once.
    for (auto q : s_.drift.alternatives(4))
      if (std::find(round_probed_.begin(), round_probed_.end(), q) == round_probed_.end()) {
        p.cand = q;
        break;
      }
  }
  if (p.cand == no_proc)
    p.cand = pick_candidate(parented && (repair_round_ || settling_));
  round_probed_.push_back(p.cand);
  probe_ = std::move(p);
  auto pause = s_.cfg.probe_jitter.count() > 0
                 ? duration{std::uniform_int_distribution<duration::rep>(
                     0, s_.cfg.probe_jitter.count())(s_.rng)}
                 : duration{0};
  if (pause.count() == 0) {
    start_probe(now, out);
  } else {
    s_.start_timer(out, pause, timer_token::probe_start(probe_->seq));
  }
}

bool prober::lan_searched() const {
  const auto ctx = s_.paths.context();
  std::size_t measured = 0, local = 0;
  for (auto& [peer, fig] : s_.paths.figures())
    if (peer != s_.self && fig.rtt != duration::max() && s_.members.is_member(peer)) {
      ++measured;
      local += ctx.local(fig.rtt) ? 1 : 0;
    }
  return lan_search_done(s_.members.size(), measured, local);
}

proc_id prober::pick_candidate(bool local_only) {
  const auto bias = s_.decision.local_bias;
  if (local_only || (bias > 0 && std::bernoulli_distribution(bias)(s_.rng))) {
    auto ctx = s_.paths.context();
    std::vector<proc_id> local;
    for (auto& [peer, fig] : s_.paths.figures())
      if (peer != s_.self && s_.members.is_member(peer) && ctx.local(fig.rtt))
        local.push_back(peer);
    if (local_only && settling_) {
      // A joiner's round, kept to its LAN: each known LAN peer once before any again.
      // It sits under its giver, and learns most from the LAN peers it has not measured
      // since it joined. Repair rounds draw at random.
      std::vector<proc_id> fresh;
      for (auto q : local)
        if (std::find(round_probed_.begin(), round_probed_.end(), q) == round_probed_.end())
          fresh.push_back(q);
      if (!fresh.empty())
        local = std::move(fresh);
    }
    if (!local.empty())
      return local[std::uniform_int_distribution<std::size_t>(0, local.size() - 1)(s_.rng)];
  }
  // The member list is sorted and holds us: draw among the others by skipping us.
  auto& members = s_.members.list();
  auto pick = std::uniform_int_distribution<std::size_t>(0, members.size() - 2)(s_.rng);
  auto self_pos = static_cast<std::size_t>(
    std::lower_bound(members.begin(), members.end(), s_.self) - members.begin());
  return members[pick < self_pos ? pick : pick + 1];
}

void prober::start_probe(timestamp now, outbox& out) {
  probe_->at = probe::phase::ping;
  probe_->sent = now;
  s_.send(out, probe_->cand, wire::ping{probe_->seq});
  s_.start_timer(out, s_.cfg.probe_timeout, timer_token::reply_due(probe_->seq));
}

void prober::finish_probe(timestamp now, bool completed, outbox& out) {
  probe_.reset();
  if (completed)
    ++completed_;
  else
    ++abandoned_;
  if (confirm_ != no_proc && !schedule_.active()) {
    const auto c = confirm_;
    confirm_ = no_proc;
    if (start_background(now, c, out))
      return;
  }
  confirm_ = no_proc;
  maybe_probe(now, out);
}

void prober::on(timestamp, proc_id from, const wire::ping& m, outbox& out) {
  s_.send(out, from, wire::pong{m.seq});
}

void prober::on(timestamp now, proc_id from, const wire::pong& m, outbox& out) {
  if (!probe_ || probe_->seq != m.seq || probe_->cand != from)
    return;
  if (probe_->at == probe::phase::download) {
    probe_->mark = now; // the download's first frame: its transfer starts here
    return;
  }
  if (probe_->at != probe::phase::ping)
    return;
  strikes_.erase(from);
  probe_->rtt = now - probe_->sent;
  s_.paths.note_rtt(from, probe_->rtt);
  probe_->at = probe::phase::download;
  probe_->sent = now;
  probe_->mark.reset();
  wire::bw_request req{m.seq, view_digest_now()};
  if (auto n = std::min(s_.cfg.view_buckets, max_view_buckets); n > 0) {
    req.buckets = bucket_digests(req.view, n);
    req.buckets_from = buckets_from_ < n ? buckets_from_ : std::uint16_t{0};
  }
  s_.send(out, from, std::move(req));
}

void prober::on(timestamp, proc_id from, const wire::bw_request& m, outbox& out) {
  wire::bw_reply reply;
  reply.seq = m.seq;
  // Room for the trees there are (on demand, a few roots' of the members'), not a slot
  // per member: the reply is held until its 128 KiB have crossed the network.
  reply.trees.reserve(static_cast<std::size_t>(std::count_if(
    s_.trees.all().begin(), s_.trees.all().end(), [](auto& t) { return t != nullptr; })));
  for (auto& t : s_.trees.all())
    if (t) {
      // The path only serves the prober's loop check (is it our ancestor?), which we
      // answer for it: its id, or nothing. (Deep trees' paths would fill the reply.)
      auto info = t->info();
      info.path.clear();
      if (t->has_ancestor(from))
        info.path.push_back(from);
      reply.trees.push_back(std::move(info));
    }
  if (s_.roots.on_demand())
    reply.open_roots = s_.roots.snapshot();
  const auto view = view_digest_now();
  if (m.view != 0 && m.view == view) {
    reply.view_omitted = true; // the prober holds this very view
  } else {
    // Only the buckets that differ, when the prober sent their digests and they differ
    // in at most half (else the whole view is about as large, and simpler); the whole
    // view when no bucket differs although the views do (a collision of bucket digests).
    // With a byte budget, the buckets that fit in it (the rest from later probes),
    // rather than a whole view that does not.
    const auto n = m.view != 0 && m.buckets.size() <= max_view_buckets ? m.buckets.size()
                                                                        : std::size_t{0};
    const auto budget = s_.cfg.reply_budget;
    std::vector<std::uint16_t> differ;
    if (n > 0)
      differ = differing_buckets(bucket_digests(view, n), m.buckets);
    const auto& members = s_.members.all_info();
    const auto& departed = s_.members.tombstones();
    const auto& routes = s_.owners.routes();
    if (differ.empty()) {
      put_view(reply, members, departed, routes, n, {});
    } else if (2 * differ.size() > n) {
      auto full = reply;
      put_view(full, members, departed, routes, n, {});
      if (budget == 0 || wire::wire_size(full) <= budget)
        reply = std::move(full);
      else
        put_view_within(reply, members, departed, routes, n, differ, m.buckets_from, budget);
    } else if (budget == 0) {
      put_view(reply, members, departed, routes, n, differ);
    } else {
      put_view_within(reply, members, departed, routes, n, differ, m.buckets_from, budget);
    }
  }
  auto bare = wire::wire_size(reply);
  reply.padding = bare < wire::bw_probe_bytes
                    ? static_cast<std::uint32_t>(wire::bw_probe_bytes - bare)
                    : 0u;
  // The mark: a pong right before the reply, on the same path. The prober times the
  // reply from the mark's arrival, so neither the RTT nor the queue both waited in
  // counts as transfer time.
  s_.send(out, from, wire::pong{m.seq});
  s_.send(out, from, std::move(reply));
}

void prober::on(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out) {
  if (!probe_ || probe_->seq != m.seq || probe_->cand != from
      || probe_->at != probe::phase::download)
    return;
  // The download took one RTT plus the transfer itself. The RTT subtracted is the
  // smallest measured to this peer; when what is left is implausibly short (under an
  // eighth of the download: the RTT samples were inflated, e.g. a ping queued behind a
  // burst of the candidate's sends), the whole download time is taken, a rate that can
  // only be too low: subtracting an inflated RTT leaves transfers of ~0 and absurd
  // rates, which the best-figure rule would keep for good.
  //
  // With the mark (a pong the candidate sent right before the reply, on the same path),
  // the transfer is the time from the mark's arrival to the reply's: the reply's own
  // bytes, at the rate the path gives it now. The RTT samples do not enter: every one
  // can be inflated by queues while broadcasts run.
  auto elapsed = now - probe_->sent;
  duration transfer{0};
  if (probe_->mark) {
    transfer = now - *probe_->mark;
  } else {
    auto base_rtt = std::min(probe_->rtt, s_.paths.best_rtt(from));
    transfer = elapsed - base_rtt;
    if (transfer < elapsed / 8)
      transfer = elapsed;
  }
  transfer = std::max(transfer, duration{1000});
  auto bytes = static_cast<double>(wire::wire_size(m));
  probe_->bw = bytes * 1e9 / static_cast<double>(transfer.count());
  const auto raw_rtt = probe_->rtt;
  const auto raw_bw = probe_->bw;
  auto bw = s_.paths.note_bw(from, probe_->bw);
  if (s_.decision.sender_capacity && probe_->bw > s_.paths.widest()) {
    // A wider sender capacity changes every bandwidth estimate (bandwidth_rule.hpp).
    s_.paths.set_widest(probe_->bw);
    for (auto& t : s_.trees.all()) {
      if (!t || t->key().kind != tree_kind::bandwidth)
        continue;
      auto before = t->info();
      t->set_sender_capacity(s_.paths.widest());
      if (!(t->info() == before))
        s_.updates.mark_info(*t);
    }
    s_.updates.mark_all_summaries(); // every hop's share of a parent's capacity
  }
  if (probe_->background) {
    // The path may have changed since the trees took its figures (drift_watch); a drift
    // replaces the best figures by those measured now.
    s_.drift.on_measured(now, from, raw_rtt, raw_bw, out);
    if (!probe_ || probe_->seq != m.seq)
      return;
    bw = *s_.paths.measured_bw(from);
  }
  // A re-examination after a drift judges by what the candidate gives now: the path
  // that drifted may be behind other candidates too, whose best figures predate it.
  if (schedule_.active() && !s_.drift.reexamining().empty())
    bw = raw_bw;
  // So does a background probe of an alternative (not a parent of ours): its best
  // figure may predate a change of the network, and taking it would move a tree back
  // onto a path that got slower. (A parent keeps its best figure: drift_watch decides.)
  if (probe_->background
      && std::none_of(s_.trees.all().begin(), s_.trees.all().end(),
                      [&](auto& t) { return t && t->parent() == from; }))
    bw = raw_bw;
  // Judged by the best figures measured so far (minimum RTT, maximum bandwidth):
  // contention only ever makes a measurement look worse.
  const auto rtt = s_.paths.best_rtt(from);
  probe_->rtt = rtt;
  probe_->bw = bw;

  merge_view(now, from, m, out);
  // The view may have ended this probe: it can name a new incarnation of the
  // candidate itself, which buries the one we were probing.
  if (!probe_ || probe_->seq != m.seq)
    return;
  s_.roots.merge(now, m.open_roots, out); // trees opened: judged with this candidate too
  judge_scope scope;
  if (probe_->background)
    scope.bw_margin = scope.dist_margin = s_.cfg.adapt_margin;
  if (schedule_.active())
    scope.only = &s_.drift.reexamining();
  auto wanted = s_.parents.judge_candidate(now, from, rtt, bw, m.trees, scope);
  if (wanted.empty()) {
    finish_probe(now, true, out);
    return;
  }
  probe_->at = probe::phase::adopt;
  probe_->requested = wanted;
  s_.send(out, from, wire::adopt_request{m.seq, std::move(wanted)});
}

void prober::merge_view(timestamp now, proc_id from, const wire::bw_reply& m, outbox& out) {
  if (m.view_omitted)
    return; // the candidate's view is ours (view_digest.hpp): merging it changes nothing
  // With `view_buckets`, the reply holds only the candidate's buckets that differ from
  // ours (view_buckets.hpp): merged like the whole view, they teach us the same. Those
  // that did not fit in its budget come with our next probes, which ask from there.
  if (m.view_buckets_left > 0)
    buckets_from_ = next_buckets_from(m.view_buckets, buckets_from_,
                                      std::min(s_.cfg.view_buckets, max_view_buckets));
  for (auto& d : m.departed) {
    if (d.id == s_.self && d.incarnation == s_.members.me().incarnation
        && s_.status == supervisor::status::member) {
      // Taken for gone (a bounce meant for an earlier incarnation, or a silence).
      s_.watch.refute(now, no_proc, out);
      continue;
    }
    s_.members.depart(now, d.id, d.incarnation, membership::departure::hearsay, out);
  }
  bool news = false;
  for (auto& mem : m.members) // (what the candidate says of itself is first-hand)
    news = s_.members.admit(now, mem, out, mem.id != from) || news;
  s_.owners.apply_told_routes(now, no_proc, s_.owners.foreign_routes(m.routes), out);
  if (news)
    trigger(now, out); // new trees exist
}

void prober::on_adopt_reply(timestamp now, proc_id from, const wire::adopt_reply& m,
                            outbox& out) {
  if (!probe_ || probe_->seq != m.seq || probe_->cand != from
      || probe_->at != probe::phase::adopt) {
    // We gave up on this probe (timeout, or took the candidate for gone): undo
    // whatever it accepted, or it would count us as a child for ever.
    wire::release undo;
    for (auto& v : m.verdicts)
      if (auto t = s_.trees.find(v.tree); v.accepted && (!t || t->parent() != from))
        undo.trees.push_back(v.tree); // (not when it is our parent there by another request)
    if (!undo.trees.empty())
      s_.send(out, from, std::move(undo));
    return;
  }
  std::map<proc_id, wire::release> releases;
  for (auto& v : m.verdicts) {
    if (!v.accepted)
      continue;
    auto t = s_.trees.find(v.tree);
    auto req = std::find_if(probe_->requested.begin(), probe_->requested.end(),
                            [&](auto& r) { return r.tree == v.tree; });
    if (!t || req == probe_->requested.end()) { // the root left (or closed its trees) meanwhile
      releases[from].trees.push_back(v.tree);
      continue;
    }
    auto old = t->parent();
    if (old != no_proc && old != from)
      releases[old].trees.push_back(v.tree);
    const bool was = t->reattaching();
    t->set_parent(from, probe_->rtt, probe_->bw, v.info);
    s_.parents.note_reattaching(now, *t, was);
    t->set_reported(req->vnodes);
    s_.updates.mark_info(*t);
    s_.updates.mark_subtree(*t);
    if (old != from)
      s_.event(out, tree_event::kind::parent_changed, now, v.tree, old, from);
  }
  for (auto& [p, r] : releases)
    s_.send(out, p, std::move(r));
  bool any = std::any_of(m.verdicts.begin(), m.verdicts.end(), [](auto& v) { return v.accepted; });
  if (any)
    progress();
  finish_probe(now, true, out);
}

void prober::on_start_timer(timestamp now, std::uint64_t seq, outbox& out) {
  if (!probe_ || seq != probe_->seq)
    return; // belongs to a probe that already ended
  if (probe_->at == probe::phase::pause)
    start_probe(now, out);
  s_.updates.flush(out);
}

void prober::on_reply_timer(timestamp now, std::uint64_t seq, outbox& out) {
  if (!probe_ || seq != probe_->seq)
    return; // belongs to a probe that already ended
  // Unanswered: after `probe_strikes` in a row, the candidate is taken to be gone.
  auto cand = probe_->cand;
  if (probe_->background) {
    // No strike: under a running broadcast the reply may queue behind the segments.
    finish_probe(now, false, out);
    s_.updates.flush(out);
    return;
  }
  if (s_.cfg.probe_strikes > 0 && ++strikes_[cand] >= s_.cfg.probe_strikes
      && s_.members.is_member(cand)) {
    strikes_.erase(cand);
    probe_.reset();
    ++abandoned_;
    s_.suspects.suspect(now, cand, out); // declared crashed unless it answers someone
    maybe_probe(now, out);
  } else {
    finish_probe(now, false, out);
  }
  s_.updates.flush(out);
}

void prober::drop_root(proc_id p) {
  if (!probe_)
    return;
  auto& r = probe_->requested;
  r.erase(std::remove_if(r.begin(), r.end(), [&](auto& e) { return e.tree.root == p; }),
          r.end());
}

void prober::forget(proc_id p) {
  remeasure_.erase(std::remove(remeasure_.begin(), remeasure_.end(), p), remeasure_.end());
  if (confirm_ == p)
    confirm_ = no_proc;
  s_.drift.forget(p);
  s_.rtts.forget(p);
}

void prober::reset() {
  schedule_ = measurement_schedule(s_.cfg.extra_measurements);
  probe_.reset();
  strikes_.clear();
  remeasure_.clear();
  round_probed_.clear();
  settling_ = repair_round_ = false;
  confirm_ = no_proc;
  buckets_from_ = 0;
  s_.drift.reset();
  s_.background.reset();
  s_.rtts.reset();
}

} // namespace banyan::sup
