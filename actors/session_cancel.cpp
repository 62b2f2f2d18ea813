#include "actors/session_data.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

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

/// The owner node of our pair could not be asked: the database tells
/// whether the user is matched. Matched: that is the answer. Not matched:
/// the owner may still commit (it is only unreachable as far as we know),
/// so the join ends `failed` (never `cancelled`: that would be a guess).
void owner_unreachable(ses_ptr self, uint64_t gen, caf::error err) {
  auto& d = self->state;
  auto what = self->system().render(err);
  auto give_up = [self, gen, what](std::string why) {
    auto& d = self->state;
    if (gen != d.gen || terminal(d.st.phase))
      return;
    d.free_known = false;
    finish(self, session_phase::failed, {},
           "owner node " + d.owner_node + " unreachable (" + what + "); "
             + why);
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
          give_up("the database shows no match yet");
      },
      [give_up](caf::error& e) {
        give_up("the database could not be asked either");
      });
}

void ask_finalizer_to_cancel(ses_ptr self) {
  auto& d = self->state;
  auto gen = d.gen;
  auto on_verdict = [self, gen](cancel_verdict& v) {
    auto& d = self->state;
    if (terminal(d.st.phase) || gen != d.gen)
      return; // decided meanwhile (e.g. by the finalize answer)
    if (v.honoured)
      finish(self, session_phase::cancelled, {}, {});
    else if (!v.session_id.empty())
      finish(self, session_phase::matched, v.session_id, "cancel too late");
    else if (d.st.phase == session_phase::queued)
      cancel_at_queue(self); // we were put back: take the ticket down there
  };
  inflight_cancel c{d.st.queue, d.st.user, d.store_ticket};
  if (d.links.gateway && !d.owner_node.empty()
      && d.owner_node != d.cfg.node) {
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
      ses_log()->warn("{}: no cancel verdict within {} ms, asking again",
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
    ->request(d.links.broker, caf::infinite, cancel_atom_v,
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
