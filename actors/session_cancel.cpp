#include "actors/session_data.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"

namespace mm::session_detail {

/// The join's give_up_after_s passed: a ticket still waiting leaves the
/// queue (a cancel of our own; its outcome decides: `timed_out`, or
/// `matched` when a claimer was faster). A join that is finalizing has found
/// its partner and goes on.
void give_up(ses_ptr self, uint64_t join_no) {
  auto& d = self->state;
  if (join_no != d.join_no || terminal(d.st.phase) || d.cancel_requested
      || d.st.phase == session_phase::finalizing
      || d.st.phase == session_phase::idle)
    return;
  if (d.st.phase != session_phase::queued) {
    // claiming: its answer comes in a moment; look again then.
    self->delayed_send(self, std::chrono::milliseconds(100), give_up_atom_v,
                       join_no);
    return;
  }
  d.giving_up = true;
  d.cancel_requested = true;
  cancel_at_queue(self);
}

/// Rounds of "cancel at the queue, ask the finalizer" one cancel may take.
/// A round repeats only when the finalizer put the ticket back in the queue
/// and a claimer took it again before our cancel reached the queue.
constexpr uint32_t max_cancel_rounds = 20;

namespace {

using clock_time = caf::actor_clock::time_point;

bool is_mm(const caf::error& err, errc x) {
  return err.category() == caf::atom("mm")
         && err.code() == static_cast<uint8_t>(x);
}

/// The verdict of the finalizer that owns our pair (ours or another node's).
void on_cancel_verdict(ses_ptr self, uint64_t gen, cancel_verdict& v) {
  auto& d = self->state;
  if (terminal(d.st.phase) || gen != d.gen)
    return; // decided meanwhile (e.g. by the finalize answer)
  if (v.honoured)
    finish(self, session_phase::cancelled, {}, {});
  else if (!v.session_id.empty())
    finish(self, session_phase::matched, v.session_id, "cancel too late");
  else if (d.st.phase == session_phase::queued)
    cancel_at_queue(self); // we were put back: take the ticket down there
}

// -- a cancel whose owner node cannot be asked --------------------------------
//
// The owner's finalizer alone knows whether our pair commits, and it cannot
// be asked. The queue and the database together can tell, given two bounds
// (docs/engine.md, "A cancel whose owner cannot be asked"):
//   - no finalizer starts a COMMIT of a pair after its claim window, which
//     ends before the claim hold lapses in the queue (finalizer.hpp,
//     claim_window_ms);
//   - a COMMIT becomes visible within the commit bound of when it was
//     decided, or never (match_store_factory::commit_bound_ms).
// So once the queue shows our ticket held by no claim (gone: committed and
// released, undone, or lapsed and removed), every commit of it is visible
// to a database read started `commit_bound_ms` later. Such a read that
// shows no match means none will ever be made: `cancelled` is then the
// truth. A match in the database is `matched`. Until one of the two, look
// again every owner_recheck_ms; past owner_wait_ms the join ends `failed`
// naming what kept it open.

void owner_round(ses_ptr self, uint64_t gen);

/// Nothing decided this round: look again later, or give up.
void owner_next(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  auto& w = d.owner;
  if (self->clock().now() - w.since
      >= std::chrono::milliseconds(d.cfg.owner_wait_ms)) {
    d.free_known = false;
    finish(self, session_phase::failed, {},
           "owner node " + d.owner_node + " unreachable (" + w.first
             + "); cancel undecided after "
             + std::to_string(d.cfg.owner_wait_ms) + " ms: " + w.why);
    return;
  }
  self->delayed_send(self, std::chrono::milliseconds(d.cfg.owner_recheck_ms),
                     settle_atom_v, gen);
}

/// The queue showed our ticket held by no claim, and no claim can take it
/// again (a gone ticket never comes back).
void mark_gone(ses_ptr self) {
  auto& d = self->state;
  auto& w = d.owner;
  if (w.gone)
    return;
  w.gone = true;
  w.settle_by = d.cfg.commit_bound_ms == UINT32_MAX
                  ? clock_time::max()
                  : self->clock().now()
                      + std::chrono::milliseconds(d.cfg.commit_bound_ms);
}

/// The database: matched is the answer; "no match" is the answer only for
/// a read that started at `settle_by` or later.
void owner_db(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  if (!d.links.lifecycle) {
    d.owner.why = "no database to ask";
    owner_next(self, gen);
    return;
  }
  auto asked = self->clock().now();
  self
    ->request(d.links.lifecycle,
              std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms),
              state_atom_v, d.base_user)
    .then(
      [self, gen, asked](std::string& session_id) {
        auto& d = self->state;
        if (gen != d.gen || terminal(d.st.phase))
          return;
        auto& w = d.owner;
        if (!session_id.empty()) {
          finish(self, session_phase::matched, session_id, "cancel too late");
          return;
        }
        if (w.gone && asked >= w.settle_by) {
          ses_log()->info("{}: cancel of {} honoured: owner node {} cannot "
                          "be asked, its claim can no longer commit and the "
                          "database shows no match",
                          d.st.user, d.store_ticket, d.owner_node);
          finish(self, session_phase::cancelled, {}, {});
          return;
        }
        if (w.gone)
          w.why = "the ticket left the queue; a commit may still land "
                  "within the database's commit bound";
        owner_next(self, gen);
      },
      [self, gen](caf::error& err) {
        auto& d = self->state;
        if (gen != d.gen || terminal(d.st.phase))
          return;
        d.owner.why = "the database could not be asked: "
                      + self->system().render(err);
        owner_next(self, gen);
      });
}

/// The queue's answer was an error: a ticket it no longer knows is gone;
/// any other error leaves the question open. The database next.
void owner_queue_error(ses_ptr self, uint64_t gen, const caf::error& err) {
  auto& d = self->state;
  if (gen != d.gen || terminal(d.st.phase))
    return;
  if (is_mm(err, errc::not_found) || is_mm(err, errc::stale_token))
    mark_gone(self);
  else
    d.owner.why = "the queue could not be asked: " + self->system().render(err);
  owner_db(self, gen);
}

/// A heartbeat with our token: removes the record if its claim hold
/// lapsed (then the ticket is gone), else tells what holds it.
void owner_heartbeat(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  self
    ->request(d.links.broker,
              std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms),
              heartbeat_atom_v, ticket_ref{d.st.queue, d.st.user, d.st.token},
              d.cfg.ttl_ms)
    .then(
      [self, gen](heartbeat_result& h) {
        auto& d = self->state;
        if (gen != d.gen || terminal(d.st.phase))
          return;
        if (!h.alive) {
          mark_gone(self);
        } else if (h.state == "waiting") {
          // Put back meanwhile (by the owner, before it went silent): a
          // waiting ticket is ours to take down.
          cancel_at_queue(self);
          return;
        } else {
          d.owner.why = "the ticket is still claimed (claim hold running)";
        }
        owner_db(self, gen);
      },
      [self, gen](caf::error& err) { owner_queue_error(self, gen, err); });
}

/// One look at the queue, then the database.
void owner_round(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  if (d.owner.gone) {
    owner_db(self, gen);
    return;
  }
  self
    ->request(d.links.broker,
              std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms),
              cancel_atom_v, ticket_ref{d.st.queue, d.st.user, d.st.token})
    .then(
      [self, gen](cancel_result& r) {
        auto& d = self->state;
        if (gen != d.gen || terminal(d.st.phase))
          return;
        if (r.outcome == cancel_outcome::cancelled) {
          finish(self, session_phase::cancelled, {}, {}); // it was waiting
          return;
        }
        if (!r.node.empty() && r.node != d.owner_node) {
          // Claimed again, by a claimer on another node: that one decides.
          d.owner_node = r.node;
          ask_finalizer_to_cancel(self);
          return;
        }
        owner_heartbeat(self, gen);
      },
      [self, gen](caf::error& err) { owner_queue_error(self, gen, err); });
}

/// The owner node of our pair could not be asked: decide from the queue
/// and the database (above), asking the owner again each round.
void owner_unreachable(ses_ptr self, uint64_t gen, caf::error err) {
  auto& d = self->state;
  auto& w = d.owner;
  auto what = self->system().render(err);
  if (w.gen != gen) {
    w = session_data::owner_wait{};
    w.gen = gen;
    w.since = self->clock().now();
    w.first = what;
    ses_log()->info("{}: owner node {} of the pair of {} cannot be asked "
                    "({}); deciding the cancel from the queue and the "
                    "database",
                    d.st.user, d.owner_node, d.store_ticket, what);
  }
  w.why = "the owner could not be asked: " + what;
  owner_round(self, gen);
}

} // namespace

void owner_recheck(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  if (gen != d.gen || terminal(d.st.phase) || d.owner.gen != gen)
    return;
  if (!d.links.gateway || d.owner_node.empty() || d.owner_node == d.cfg.node) {
    owner_round(self, gen);
    return;
  }
  // The owner first: should it answer now, its verdict decides.
  auto bound = std::min<uint64_t>(d.cfg.route_timeout_ms,
                                  2ull * d.cfg.owner_recheck_ms);
  self
    ->request(d.links.gateway, std::chrono::milliseconds(bound), cancel_atom_v,
              d.owner_node,
              inflight_cancel{d.st.queue, d.st.user, d.store_ticket})
    .then([self, gen](cancel_verdict& v) { on_cancel_verdict(self, gen, v); },
          [self, gen](caf::error& err) {
            auto& d = self->state;
            if (gen != d.gen || terminal(d.st.phase))
              return;
            owner_unreachable(self, gen, std::move(err));
          });
}

void ask_finalizer_to_cancel(ses_ptr self) {
  auto& d = self->state;
  auto gen = d.gen;
  auto on_verdict = [self, gen](cancel_verdict& v) {
    on_cancel_verdict(self, gen, v);
  };
  inflight_cancel c{d.st.queue, d.st.user, d.store_ticket};
  if (d.links.gateway && !d.owner_node.empty() && d.owner_node != d.cfg.node) {
    // The pair is committed on another node: only its finalizer can tell.
    self
      ->request(d.links.gateway,
                std::chrono::milliseconds(d.cfg.route_timeout_ms),
                cancel_atom_v, d.owner_node, std::move(c))
      .then(on_verdict, [self, gen](caf::error& err) {
        if (gen == self->state.gen && !terminal(self->state.st.phase))
          owner_unreachable(self, gen, std::move(err));
      });
    return;
  }
  self
    ->request(d.links.finalizer,
              std::chrono::milliseconds(d.cfg.route_timeout_ms), cancel_atom_v,
              std::move(c))
    .then(on_verdict, [self, gen](caf::error& err) {
      auto& d = self->state;
      if (gen != d.gen || terminal(d.st.phase))
        return;
      if (err != caf::sec::request_timeout) {
        // The finalizer is gone, or could not decide (store_unavailable):
        // it may have committed the pair before, so the database decides.
        verdict_from_database(self, gen,
                              "no cancel verdict from the finalizer ("
                                + self->system().render(err) + ")");
        return;
      }
      // A live finalizer that is merely slow still holds our cancel and may
      // yet commit the pair: ask again (it answers from its verdict cache),
      // never give up on a guess. Bounded by the cancel's rounds.
      if (++d.cancel_rounds > max_cancel_rounds) {
        verdict_from_database(self, gen,
                              "cancel undecided: no verdict from the "
                              "finalizer within "
                                + std::to_string(max_cancel_rounds) + " x "
                                + std::to_string(d.cfg.route_timeout_ms)
                                + " ms");
        return;
      }
      MM_LOG_LIMITED(ses_log(), warn,
                     "{}: no cancel verdict within {} ms, asking again",
                     d.st.user, d.cfg.route_timeout_ms);
      ask_finalizer_to_cancel(self);
    });
}

/// Cancels the waiting ticket; a claimed one is decided by the finalizer.
void cancel_at_queue(ses_ptr self) {
  auto& d = self->state;
  if (++d.cancel_rounds > max_cancel_rounds) {
    finish(self, session_phase::failed, {},
           "cancel undecided after " + std::to_string(max_cancel_rounds)
             + " rounds");
    return;
  }
  auto gen = d.gen;
  self
    ->request(d.links.broker, store_timeout(d), cancel_atom_v,
              ticket_ref{d.st.queue, d.st.user, d.st.token})
    .then(
      [self, gen](cancel_result& r) {
        auto& d = self->state;
        if (terminal(d.st.phase) || gen != d.gen)
          return;
        if (r.outcome == cancel_outcome::cancelled) {
          finish(self, session_phase::cancelled, {}, {});
          return;
        }
        if (!r.node.empty())
          d.owner_node = r.node; // the claimer's node owns the pair
        ask_finalizer_to_cancel(self);
      },
      [self, gen](caf::error& err) {
        auto& d = self->state;
        if (terminal(d.st.phase) || gen != d.gen)
          return;
        if (err.category() == caf::atom("mm")
            && (err.code() == static_cast<uint8_t>(errc::not_found)
                || err.code() == static_cast<uint8_t>(errc::stale_token))) {
          // Our ticket is gone: claimed and settled, or lapsed. Only the
          // finalizer can tell which.
          ask_finalizer_to_cancel(self);
          return;
        }
        if (store_trouble(err)) {
          // The cancel may have run or not (it is idempotent): again once
          // the store answers; this round does not count.
          --d.cancel_rounds;
          retry_store_later(self);
          return;
        }
        fail(self, err);
      });
}

/// This node's finalizer gave no verdict on our cancel (`why`): matched when
/// the database holds the user in a session, else `failed` naming why (the
/// pair may still commit, so `cancelled` would be a guess).
void verdict_from_database(ses_ptr self, uint64_t gen, std::string why) {
  auto& d = self->state;
  auto give_up = [self, gen, why](const std::string& db_says) {
    auto& d = self->state;
    if (gen != d.gen || terminal(d.st.phase))
      return;
    d.free_known = false;
    finish(self, session_phase::failed, {}, why + "; " + db_says);
  };
  if (!d.links.lifecycle) {
    give_up("not matched as far as this node knows");
    return;
  }
  self
    ->request(d.links.lifecycle,
              std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms),
              state_atom_v, d.base_user)
    .then(
      [self, gen, give_up](std::string& session_id) {
        auto& d = self->state;
        if (gen != d.gen || terminal(d.st.phase))
          return;
        if (!session_id.empty())
          finish(self, session_phase::matched, session_id, "cancel too late");
        else
          give_up("the database shows no match");
      },
      [give_up](caf::error&) {
        give_up("the database could not be asked either");
      });
}

} // namespace mm::session_detail
