// The self-heal of a waiting join whose ticket vanished from the queue store
// without a match event (a Redis restart or failover may forget tickets:
// docs/cluster.md, "When Redis forgets").

#include "actors/session_data.hpp"

#include "core/ticket_id.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"

namespace mm::session_detail {

namespace {

/// Re-enqueues the join under a new store ticket (the client's ticket stays
/// what it chose).
void enqueue_again(ses_ptr self) {
  auto& d = self->state;
  if (++d.heals > d.cfg.max_self_heals) {
    finish(self, session_phase::failed, {}, "too many self-heals");
    return;
  }
  d.store_ticket = make_store_ticket(d.nonce, d.heals, d.base_user,
                                     d.base_ticket);
  d.tickets.insert(d.store_ticket);
  ses_log()->info("{}: ticket gone without a match, re-enqueued as {}",
                  d.st.user, d.store_ticket);
  start_claim(self, false);
}

bool still_waiting(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  return gen == d.gen && !d.cancel_requested
         && d.st.phase == session_phase::queued;
}

} // namespace

void heal(ses_ptr self, uint64_t gen) {
  auto& d = self->state;
  if (!still_waiting(self, gen))
    return;
  if (!d.links.lifecycle) {
    enqueue_again(self);
    return;
  }
  // The database first (I8 of docs/design.md): the store may have
  // forgotten a claim whose match was committed, and whose event is late
  // (its route was forgotten too). A user in an active session must not
  // stand in a queue again.
  self
    ->request(d.links.lifecycle,
              std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms),
              state_atom_v, d.base_user)
    .then(
      [self, gen](std::string& session_id) {
        if (!still_waiting(self, gen))
          return;
        if (!session_id.empty()) {
          // Its event follows from the outbox; the session id dedupes it.
          ses_log()->info("{}: ticket gone, the database has session {}",
                          self->state.st.user, session_id);
          finish(self, session_phase::matched, session_id, "matched earlier");
          return;
        }
        enqueue_again(self);
      },
      [self, gen](caf::error& err) {
        if (!still_waiting(self, gen))
          return;
        // Not knowing is no reason to queue a maybe-matched user: ask again
        // after the grace time (the join's deadline still bounds the wait).
        MM_LOG_LIMITED(ses_log(), warn,
                       "{}: ticket gone and the database could not be "
                       "asked ({}); asking again",
                       self->state.st.user, self->system().render(err));
        self->delayed_send(self,
                           std::chrono::milliseconds(self->state.cfg.grace_ms),
                           grace_atom_v, gen);
      });
}

} // namespace mm::session_detail
