#include "actors/session.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/session_data.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "core/ticket_id.hpp"

namespace mm::session_detail {

std::shared_ptr<spdlog::logger> ses_log() {
  static auto log = logger("session");
  return log;
}

session_actor::behavior_type idle_b(ses_ptr self);
session_actor::behavior_type claiming_b(ses_ptr self);
session_actor::behavior_type queued_b(ses_ptr self);
session_actor::behavior_type finalizing_b(ses_ptr self);
session_actor::behavior_type done_b(ses_ptr self);
void on_claimed(ses_ptr self, uint64_t gen, claim_result& r);

bool terminal(session_phase p) {
  return p == session_phase::matched || p == session_phase::cancelled
         || p == session_phase::failed || p == session_phase::timed_out;
}

bool live(session_phase p) {
  return p == session_phase::claiming || p == session_phase::queued
         || p == session_phase::finalizing;
}

/// Idle release: a request or a state change restarts the quiet time; one
/// release timer is armed at a time.
void touch(ses_ptr self) {
  auto& d = self->state;
  d.last_touch = self->clock().now();
  if (d.cfg.idle_release_ms == 0 || d.idle_armed)
    return;
  d.idle_armed = true;
  self->delayed_send(self, std::chrono::milliseconds(d.cfg.idle_release_ms),
                     release_atom_v);
}

/// The release timer: a session that is not live, that nobody waits on and
/// that was quiet for idle_release_ms stops (the directory and the engine
/// forget it). A live or held one is armed again when it leaves that
/// phase or is let go.
void release_if_idle(ses_ptr self) {
  auto& d = self->state;
  d.idle_armed = false;
  if (live(d.st.phase) || d.holder)
    return;
  auto grace = std::chrono::duration_cast<caf::actor_clock::duration_type>(
    std::chrono::milliseconds(d.cfg.idle_release_ms));
  auto quiet = self->clock().now() - d.last_touch;
  if (quiet < grace || !d.join_waiters.empty() || !d.cancel_waiters.empty()
      || d.ends_pending > 0) {
    d.idle_armed = true;
    self->delayed_send(self, quiet < grace ? grace - quiet : grace,
                       release_atom_v);
    return;
  }
  if (d.cfg.metrics)
    d.cfg.metrics->sessions_released.fetch_add(1, std::memory_order_relaxed);
  self->quit();
}

/// The holder let go, or died: the quiet time counts from now.
void let_go(ses_ptr self) {
  self->state.holder = nullptr;
  touch(self);
}

/// A connection of the user opened (`on`) or closed, as its holder says:
/// held, the session stays without a timer; let go, its quiet time counts
/// again.
void hold(ses_ptr self, bool on) {
  auto& d = self->state;
  auto who = self->current_sender();
  if (on && who) {
    auto addr = caf::actor_cast<caf::actor_addr>(who);
    if (d.holder == addr)
      return;
    if (d.holder)
      self->demonitor(d.holder);
    d.holder = addr;
    self->monitor(who);
  } else if (d.holder) {
    self->demonitor(d.holder);
    let_go(self);
  }
}

void publish(ses_ptr self) {
  auto& d = self->state;
  touch(self); // every state change
  if (d.links.subscriber)
    self->send(d.links.subscriber, d.st);
}

/// Hands our waiting ticket to the broker's heartbeats (a watch of the
/// current state generation replaces the one before).
void watch_ticket(ses_ptr self) {
  auto& d = self->state;
  if (!d.links.broker)
    return;
  self->send(d.links.broker, watch_atom_v, d.gen, spec_of(d),
             next_look_at_ms(d, self->clock().now()), d.cfg.heartbeat_ms,
             d.cfg.heartbeat_align_ms);
  d.watching = true;
}

/// A heartbeat re-scan of the broker's that changed something (problem 4:
/// a live waiter beside us, e.g. one put back after its claimer cancelled,
/// is paired with us by it).
void rescanned(ses_ptr self, uint64_t gen, int64_t sent_ns, claim_result& r) {
  auto& d = self->state;
  if (gen != d.gen || d.st.phase != session_phase::queued)
    return;
  if (r.outcome == claim_outcome::queued) {
    auto before = d.st.windows;
    note_windows(d, r); // the ticket's state shows its windows
    if (d.st.windows != before)
      publish(self);
    return;
  }
  if (r.outcome == claim_outcome::matched) {
    // The finalizer's claim window counts from the re-scan's request.
    d.claim_sent = caf::actor_clock::time_point{
      std::chrono::duration_cast<caf::actor_clock::duration_type>(
        std::chrono::nanoseconds{sent_ns})};
    on_claimed(self, gen, r);
    return;
  }
  if (!r.partner.node.empty())
    d.owner_node = r.partner.node; // our claimer's node
  if (r.partner.user.empty()) {
    // Our ticket vanished without a match (yet): a claimer may be
    // committing us right now, so wait a grace time for its event.
    self->delayed_send(self, std::chrono::milliseconds(d.cfg.grace_ms),
                       grace_atom_v, gen);
  }
}

/// Enters `phase` (and its behavior), invalidating older timers.
void enter(ses_ptr self, session_phase phase) {
  auto& d = self->state;
  d.st.phase = phase;
  ++d.gen;
  if (d.watching && (phase != session_phase::queued || !d.party.empty())) {
    self->send(d.links.broker, unwatch_atom_v);
    d.watching = false;
  }
  if (phase == session_phase::cancelled && d.cfg.metrics)
    d.cfg.metrics->cancels.fetch_add(1, std::memory_order_relaxed);
  if (!live(phase))
    d.party.clear();
  if (!d.party.empty()) // a party of one drives this join
    self->become(grouped_b(self));
  else
    switch (phase) {
      case session_phase::claiming:
        self->become(claiming_b(self));
        break;
      case session_phase::queued:
        self->become(queued_b(self));
        watch_ticket(self);
        break;
      case session_phase::finalizing:
        self->become(finalizing_b(self));
        break;
      default:
        self->become(done_b(self));
    }
  publish(self);
  if (phase != session_phase::claiming) {
    for (auto& rp : d.join_waiters)
      rp.deliver(d.st);
    d.join_waiters.clear();
  }
  if (terminal(phase)) {
    for (auto& rp : d.cancel_waiters)
      rp.deliver(d.st);
    d.cancel_waiters.clear();
  }
}

void finish(ses_ptr self, session_phase phase, std::string session_id,
            std::string detail) {
  auto& d = self->state;
  if (phase == session_phase::matched) {
    d.free_known = false;
    if (d.cfg.metrics && d.join_started != caf::actor_clock::time_point{}) {
      auto waited = std::chrono::duration_cast<std::chrono::microseconds>(
        self->clock().now() - d.join_started);
      d.cfg.metrics->observe_time_to_match(
        d.st.queue,
        static_cast<uint64_t>(std::max<int64_t>(0, waited.count())));
    }
  }
  d.join_started = {};
  if (phase == session_phase::cancelled && self->state.giving_up) {
    // The cancel was ours: the ticket waited give_up_after_s in vain.
    phase = session_phase::timed_out;
    detail = "gave up after " + std::to_string(self->state.give_up_after_s)
             + " s";
  }
  self->state.st.session_id = std::move(session_id);
  self->state.st.detail = std::move(detail);
  enter(self, phase);
}

void fail(ses_ptr self, const caf::error& err) {
  // Whatever happened, the database knows best whether the user is free.
  self->state.free_known = false;
  auto what = self->system().render(err);
  MM_LOG_LIMITED(ses_log(), warn, "{}: join of {} failed: {}",
                 self->state.st.user, self->state.st.ticket, what);
  finish(self, session_phase::failed, {}, what);
}

void session_over(ses_ptr self, const std::string& session_id,
                  const std::string& reason) {
  auto& d = self->state;
  if (d.st.phase != session_phase::matched || d.st.session_id != session_id)
    return;
  d.free_known = true;
  d.st.phase = session_phase::idle;
  d.st.token.clear();
  d.st.detail = "session " + session_id + " ended: " + reason;
  ++d.gen;
  self->become(idle_b(self));
  publish(self);
}

/// Asks the lifecycle actor to end (`end_atom`) or leave (`leave_atom`)
/// `session_id` on behalf of this user (`what` names it in a refusal);
/// once it answered, the user is free of that session (`why` of the
/// answer says how). Someone waits on us meanwhile (no idle release).
template <class Result, class Atom, class Why>
caf::result<Result> lifecycle_call(ses_ptr self, Atom atom, const char* what,
                                   std::string session_id, std::string reason,
                                   Why why) {
  auto& d = self->state;
  if (!d.links.lifecycle)
    return caf::make_error(errc::shutting_down,
                           std::string{"sessions cannot be "} + what
                             + " on this engine");
  auto rp = self->make_response_promise<Result>();
  ++d.ends_pending;
  self
    ->request(d.links.lifecycle,
              std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms), atom,
              std::move(session_id), d.base_user, std::move(reason))
    .then(
      [self, rp, why](Result& r) mutable {
        --self->state.ends_pending;
        session_over(self, r.session_id, why(r));
        rp.deliver(std::move(r));
      },
      [self, rp](caf::error& err) mutable {
        --self->state.ends_pending;
        rp.deliver(std::move(err));
      });
  return rp;
}

// -- a store that did not answer ----------------------------------------------

void retry_store_later(ses_ptr self) {
  auto& d = self->state;
  d.store_backoff_ms = d.store_backoff_ms == 0
                         ? store_retry_min_ms
                         : std::min(2 * d.store_backoff_ms, store_retry_max_ms);
  self->delayed_send(self, std::chrono::milliseconds(d.store_backoff_ms),
                     retry_atom_v, d.gen);
}

/// The retry timer of state `gen`: the claim or the cancel at the queue
/// that met a store outage goes again.
void retry_store(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  if (gen != d.gen || terminal(d.st.phase))
    return;
  if (d.st.phase == session_phase::claiming)
    start_claim(self, d.claim_rescan);
  else if (d.st.phase == session_phase::queued && d.cancel_requested)
    cancel_at_queue(self);
}

// -- handlers shared by every state -------------------------------------------

session_actor::behavior_type make(ses_ptr self, join_fn on_join,
                                  cancel_fn on_cancel, timer_fn on_grace) {
  return {
    [self, on_join](join_atom, join_request& r) {
      touch(self);
      auto rp = self->make_response_promise<session_state>();
      on_join(r, rp);
      return rp;
    },
    [self, on_cancel](cancel_atom) {
      touch(self);
      auto rp = self->make_response_promise<session_state>();
      on_cancel(rp);
      return rp;
    },
    [self](state_atom) {
      touch(self);
      return self->state.st;
    },
    [self](end_atom, std::string& session_id, std::string& reason) {
      touch(self);
      return lifecycle_call<end_result>(
        self, end_atom_v, "ended", std::move(session_id), std::move(reason),
        [](const end_result& r) { return r.reason; });
    },
    [self](leave_atom, std::string& session_id, std::string& reason) {
      touch(self);
      return lifecycle_call<leave_result>(
        self, leave_atom_v, "left", std::move(session_id), std::move(reason),
        [](const leave_result&) { return std::string{"left"}; });
    },
    [self](deliver_atom, match_event& ev) {
      auto& d = self->state;
      if (!d.seen.insert(ev.event_id))
        return; // a redelivery: already handled
      if (d.links.subscriber) {
        // Subscribers see the tickets the clients chose.
        auto out = ev;
        out.ticket_a = client_ticket_of(ev.ticket_a, ev.user_a);
        out.ticket_b = client_ticket_of(ev.ticket_b, ev.user_b);
        self->send(d.links.subscriber, std::move(out));
      }
      if (ev.type == party_updated_event) {
        party_event(self, ev);
        return;
      }
      if (d.links.party_members && d.links.parties) {
        // The user's party learns of its match, and of its end, from here.
        auto party = d.links.party_members->party_of(d.base_user);
        if (!party.empty())
          self->send(d.links.parties, deliver_atom_v, party, ev);
      }
      if (is_proposal_event(ev.type))
        return; // the client's and the party's only (docs/groups.md)
      if (ev.type == session_ended_event) {
        session_over(self, ev.session_id, "ended");
        return;
      }
      if (group_event(self, ev))
        return;
      auto mine = (ev.user_a == d.st.user && d.tickets.count(ev.ticket_a))
                  || (ev.user_b == d.st.user && d.tickets.count(ev.ticket_b));
      if (mine)
        note_partner(d, ev.user_a == d.st.user ? ev.user_b : ev.user_a);
      if (!mine || terminal(d.st.phase))
        return;
      if (d.st.phase == session_phase::queued && !d.st.token.empty()
          && ev.ticket_a != d.store_ticket && ev.ticket_b != d.store_ticket) {
        // Matched under an earlier ticket of this join while a self-heal
        // re-enqueued us: take the newer ticket down.
        self
          ->request(d.links.broker, store_timeout(d), cancel_atom_v,
                    ticket_ref{d.st.queue, d.st.user, d.st.token})
          .then([](cancel_result&) {}, [](caf::error&) {});
      }
      finish(self, session_phase::matched, ev.session_id, {});
    },
    [self](rescan_atom, uint64_t gen, int64_t sent_ns, claim_result& r) {
      rescanned(self, gen, sent_ns, r);
    },
    [on_grace](grace_atom, uint64_t gen) { on_grace(gen); },
    [self](give_up_atom, uint64_t join_no) { give_up(self, join_no); },
    [self](settle_atom, uint64_t gen) { owner_recheck(self, gen); },
    [self](retry_atom, uint64_t gen) { retry_store(self, gen); },
    [self](release_atom) { release_if_idle(self); },
    [self](pin_atom, bool on) { hold(self, on); },
  };
}

void ignore_timer(uint64_t) {
  // timers of a state that is gone
}

// -- states -------------------------------------------------------------------
//
// One behavior per state; `enter` switches between them (docs/engine.md has
// the long form, docs/design.md the problems cited here).
//
//            join                  claim: queued
//   idle ──────────► claiming ──────────────────► queued ◄─┐
//    ▲                 │  ▲                         │  │   │ re-scan: still
//    │ join again      │  │ finalizer: retry        │  │   │ waiting (heartbeat)
//    │ (other ticket   │  └───────────┐             │  └───┘
//    │  or failed)     │ claim:       │             │ ticket gone, no match
//    │                 │ claimed B    │             │ within grace: re-enqueue
//    │                 ▼              │             ▼ (new ticket, -> claiming)
//    │             finalizing ────────┘          match event
//    │                 │ committed / refused        │
//    │                 ▼                            ▼
//    └──────────── done (matched | cancelled | failed) ◄── cancel, once certain,
//    ▲                    │                               from any state
//    └────────────────────┘ matched: the session ended (session.ended event
//                           or our own end) -> idle, the user is free again
//
// A join from idle or done first asks the lifecycle actor whether the user
// is still in an active session (unless this actor saw it end): if so the
// join is refused with `in_session` and nothing changes.

session_actor::behavior_type idle_b(ses_ptr self) {
  return make(
    self, start_join(self),
    [self](state_promise rp) {
      rp.deliver(caf::make_error(errc::not_found, "no join to cancel"));
    },
    ignore_timer);
}

session_actor::behavior_type done_b(ses_ptr self) {
  // Terminal: cancel is idempotent (answers the final state). A retry of the
  // join that ended matched or cancelled answers that final state (a client
  // that lost the first answer must not be queued a second time); after a
  // failure, or with another ticket, a join starts over.
  auto again = start_join(self);
  return make(
    self,
    [self, again](join_request& r, state_promise rp) {
      auto& d = self->state;
      if (d.st.phase != session_phase::failed && r.queue == d.st.queue
          && r.ticket == d.base_ticket) {
        rp.deliver(d.st);
        return;
      }
      again(r, rp);
    },
    [self](state_promise rp) { rp.deliver(self->state.st); }, ignore_timer);
}

session_actor::behavior_type claiming_b(ses_ptr self) {
  return make(
    self, join_while_busy(self),
    [self](state_promise rp) {
      // Decided once the claim answers.
      self->state.cancel_requested = true;
      self->state.cancel_waiters.push_back(rp);
    },
    ignore_timer);
}

/// A cancel handler: every caller waits for the final state; `start` runs
/// for the first cancel of the join only.
cancel_fn cancel_once(ses_ptr self, std::function<void()> start) {
  return [self, start](state_promise rp) {
    auto& d = self->state;
    d.cancel_waiters.push_back(rp);
    if (!d.cancel_requested) {
      d.cancel_requested = true;
      start();
    }
  };
}

session_actor::behavior_type queued_b(ses_ptr self) {
  return make(self, join_while_busy(self),
              cancel_once(self, [self] { cancel_at_queue(self); }),
              [self](uint64_t gen) { heal(self, gen); });
}

session_actor::behavior_type finalizing_b(ses_ptr self) {
  return make(self, join_while_busy(self),
              cancel_once(self, [self] { ask_finalizer_to_cancel(self); }),
              ignore_timer);
}

// -- the claim and the finalization -------------------------------------------

void on_finalized(ses_ptr self, uint64_t gen, finalize_result& r) {
  auto& d = self->state;
  if (gen != d.gen || terminal(d.st.phase))
    return;
  switch (r.outcome) {
    case finalize_outcome::committed:
      // Counted once per pair: by its claimer, the only side here.
      if (d.rules != nullptr && d.cfg.metrics)
        for (auto& [attr, dist] :
             pair_distances(*d.rules, d.attrs, d.partner_attrs))
          d.cfg.metrics->observe_pair_distance(d.st.queue, attr, dist);
      finish(self, session_phase::matched, r.session_id, {});
      break;
    case finalize_outcome::cancelled:
      finish(self, session_phase::cancelled, {}, {});
      break;
    case finalize_outcome::refused:
      if (!r.session_id.empty() && d.heals > 0) {
        // This join re-enqueued itself because its ticket vanished: the
        // active session the database names is where that ticket was
        // matched (its event is late, e.g. leased by a relay that died; it
        // follows from the outbox and its id dedupes it). Without a heal
        // the session is an older join's: the join fails.
        finish(self, session_phase::matched, r.session_id, "matched earlier");
        break;
      }
      finish(self, session_phase::failed, {}, r.detail);
      break;
    default:
      // Our record went back at its place (or was released): claim again
      // from there. If we wanted out, take it down first; the queue or the
      // finalizer says whether that worked.
      if (d.cancel_requested) {
        enter(self, session_phase::queued);
        cancel_at_queue(self);
      } else {
        // As a re-scan: between the requeue and this claim another claimer
        // may have taken our record (and even committed and released it).
        // A plain claim would then enqueue us afresh and claim a second
        // partner, whose pair the database refuses (problem 4); a re-scan
        // answers "claimed" and we wait for that match.
        start_claim(self, true);
      }
  }
}

void on_claimed(ses_ptr self, uint64_t gen, claim_result& r) {
  auto& d = self->state;
  if (gen != d.gen)
    return;
  if (!d.join_counted) {
    // The join's first step is through: one accepted join.
    d.join_counted = true;
    if (d.cfg.metrics)
      d.cfg.metrics->joins.fetch_add(1, std::memory_order_relaxed);
  }
  if (!r.token.empty())   // a re-scan whose record is gone names no token:
    d.st.token = r.token; // ours is still the one of that store ticket
  note_windows(d, r);
  if (r.outcome == claim_outcome::matched)
    d.owner_node = d.cfg.node; // we claimed: our finalizer owns the pair
  else if (r.outcome == claim_outcome::claimed_by_other)
    d.owner_node = r.partner.node;
  switch (r.outcome) {
    case claim_outcome::queued:
    case claim_outcome::claimed_by_other:
      enter(self, session_phase::queued);
      if (d.cancel_requested)
        cancel_at_queue(self);
      break;
    case claim_outcome::matched: {
      enter(self, session_phase::finalizing);
      d.partner_attrs = r.partner.attrs;
      auto g = d.gen;
      claim_pair pair{d.st.queue, d.st.user, d.store_ticket, d.attrs,
                      r.partner};
      // The finalizer's claim window counts from the claim request.
      pair.claimed_at = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(
             d.claim_sent.time_since_epoch())
             .count());
      self
        ->request(d.links.finalizer, caf::infinite, finalize_atom_v,
                  std::move(pair))
        .then([self, g](finalize_result& fr) { on_finalized(self, g, fr); },
              [self](caf::error& err) { fail(self, err); });
      if (d.cancel_requested)
        ask_finalizer_to_cancel(self);
      break;
    }
  }
}

void start_claim(ses_ptr self, bool rescan) {
  auto& d = self->state;
  d.owner_node.clear();
  enter(self, session_phase::claiming);
  auto gen = d.gen;
  auto spec = spec_of(d);
  // A claim sent again after a store timeout keeps the time of the first:
  // that one may have run, and its claim hold started then.
  if (d.store_backoff_ms == 0)
    d.claim_sent = self->clock().now();
  auto handle = [self, gen](claim_result& r) {
    auto& d = self->state;
    bool after_outage = d.store_backoff_ms > 0;
    d.store_backoff_ms = 0;
    on_claimed(self, gen, r);
    if (after_outage && d.st.phase == session_phase::queued
        && r.outcome == claim_outcome::claimed_by_other
        && r.partner.user.empty()) {
      // Our record is gone: the lost claim ran and we were matched (the
      // event is on its way), or it never ran. The grace time tells.
      self->delayed_send(self, std::chrono::milliseconds(d.cfg.grace_ms),
                         grace_atom_v, d.gen);
    }
  };
  auto on_err = [self, gen](caf::error& err) {
    auto& d = self->state;
    if (gen != d.gen)
      return;
    if (store_trouble(err)) {
      // The claim may have run (a timeout) or not. It goes again as a
      // re-scan until the store answers: one that ran left our record
      // (waiting, claimed or claimer), which the re-scan answers from
      // without claiming anyone else; a record that is gone means we were
      // claimed (or the claim never ran: the grace time re-enqueues us).
      // The join is answered store_unavailable now; a retry of the same
      // join waits for the claim's answer, the subscriber hears it.
      for (auto& rp : d.join_waiters)
        rp.deliver(err);
      d.join_waiters.clear();
      d.claim_rescan = true;
      retry_store_later(self);
      return;
    }
    auto refused = [&](errc x) {
      return err.category() == caf::atom("mm")
             && err.code() == static_cast<uint8_t>(x);
    };
    if (!d.join_waiters.empty()
        && (refused(errc::invalid_argument) || refused(errc::not_found)
            || refused(errc::duplicate_ticket) || refused(errc::unknown_queue)
            || refused(errc::too_many_queues))) {
      // Bad input on the first step: refuse the join, change nothing.
      for (auto& rp : d.join_waiters)
        rp.deliver(err);
      d.join_waiters.clear();
      d.st = session_state{};
      d.st.user = self->state.base_user;
      ++d.gen;
      self->become(idle_b(self));
      publish(self);
      return;
    }
    fail(self, err);
  };
  if (rescan)
    self
      ->request(d.links.broker, store_timeout(d), rescan_atom_v,
                std::move(spec))
      .then(handle, on_err);
  else
    self
      ->request(d.links.broker, store_timeout(d), claim_atom_v, std::move(spec))
      .then(handle, on_err);
}

session_actor::behavior_type session_impl(ses_ptr self, std::string user,
                                          session_links links,
                                          session_config cfg) {
  auto& d = self->state;
  d.st.user = user;
  d.base_user = std::move(user);
  d.links = std::move(links);
  d.cfg = cfg;
  // The directory monitors us and forgets us when we are gone.
  if (d.links.directory)
    self->send(d.links.directory, register_atom_v, d.st.user,
               caf::actor_cast<session_actor>(self));
  // A holder that dies lets go (pin_atom): the session may be released.
  self->set_down_handler([self](caf::down_msg& dm) {
    if (dm.source == self->state.holder)
      let_go(self);
  });
  touch(self);
  return idle_b(self);
}

} // namespace mm::session_detail

namespace mm {

session_actor spawn_session(caf::actor_system& sys, std::string user,
                            session_links links, session_config cfg) {
  return sys.spawn(session_detail::session_impl, std::move(user),
                   std::move(links), cfg);
}

} // namespace mm
