// The session's join: how a join starts (the in-session check, the checks
// of the ticket and the attributes, the join's state), and the answer to a
// join while another one is going on (actors/session.cpp, the states).

#include <chrono>

#include <caf/all.hpp>

#include "actors/session_data.hpp"
#include "core/rules.hpp"
#include "core/ticket_id.hpp"

namespace mm::session_detail {

namespace {

/// Starts a join whose user is known to be in no active session: checks
/// the ticket and the attributes (a refusal changes nothing), resets the
/// join's state and claims.
void begin_join(ses_ptr self, join_request& r, state_promise rp) {
  auto& d = self->state;
  if (!valid_client_id(r.ticket)) {
    // Checked here: the store sees only the store ticket made from it.
    rp.deliver(
      caf::make_error(errc::invalid_argument,
                      "ticket must be 1..128 bytes of [A-Za-z0-9._:@-]"));
    return;
  }
  // Rules: the attributes must fit the queue's declarations, checked first.
  const rule_set* rules = nullptr;
  checked_attrs checked{r.attrs, {}};
  if (d.cfg.rules) {
    if (auto it = d.cfg.rules->find(r.queue); it != d.cfg.rules->end()) {
      auto c = check_attributes(it->second, r.attrs);
      if (!c) {
        rp.deliver(caf::make_error(c.error().code, c.error().detail));
        return;
      }
      if (it->second.has_shape) { // a party of one (session_party.cpp)
        join_as_party(self, r, rp);
        return;
      }
      rules = &it->second;
      checked = std::move(*c);
    }
  }
  d.st.queue = r.queue;
  d.st.ticket = r.ticket;
  d.st.token.clear();
  d.st.session_id.clear();
  d.st.detail.clear();
  d.base_ticket = r.ticket;
  d.attrs = std::move(checked.json);
  d.rules = rules;
  d.rk = std::move(checked.rk);
  d.next_change_ms = -1;
  d.st.windows.clear();
  d.heals = 0;
  d.cancel_rounds = 0;
  d.nonce = make_nonce();
  d.store_ticket = make_store_ticket(d.nonce, 0, d.base_user, r.ticket);
  d.tickets = {d.store_ticket};
  d.cancel_requested = false;
  d.join_counted = false;
  d.join_started = self->clock().now();
  d.giving_up = false;
  d.give_up_after_s = r.give_up_after_s;
  ++d.join_no;
  if (d.give_up_after_s > 0)
    self->delayed_send(self, std::chrono::seconds(d.give_up_after_s),
                       give_up_atom_v, d.join_no);
  d.join_waiters.push_back(rp);
  start_claim(self, false);
}

} // namespace

/// A join while another one is going on: the same one again is answered
/// with the current state (idempotent), another one is refused.
join_fn join_while_busy(ses_ptr self) {
  return [self](join_request& r, state_promise rp) {
    auto& d = self->state;
    if (r.queue == d.st.queue && r.ticket == d.base_ticket) {
      if (d.st.phase == session_phase::claiming)
        d.join_waiters.push_back(rp);
      else
        rp.deliver(d.st);
      return;
    }
    rp.deliver(caf::make_error(errc::duplicate_ticket,
                               "the user is already in a join (ticket "
                                 + d.base_ticket + ")"));
  };
}

/// A new join: first makes sure the user is not in an active match session
/// (I8 of docs/design.md: a user in a session never waits in a queue). The
/// database is asked unless this actor saw the user's last session end; the
/// ask holds the mailbox (`await`), so no other message sees a half-started
/// join.
join_fn start_join(ses_ptr self) {
  return [self](join_request& r, state_promise rp) {
    auto& d = self->state;
    if (d.links.party_members) {
      auto party = d.links.party_members->party_of(d.base_user);
      if (!party.empty()) {
        rp.deliver(caf::make_error(errc::in_party, d.base_user + " is in party "
                                                     + party
                                                     + ": the party queues"));
        return;
      }
    }
    if (d.free_known || !d.links.lifecycle) {
      begin_join(self, r, rp);
      return;
    }
    self
      ->request(d.links.lifecycle,
                std::chrono::milliseconds(d.cfg.lifecycle_timeout_ms),
                state_atom_v, d.base_user)
      .await(
        [self, r, rp](std::string& session_id) mutable {
          if (!session_id.empty()) {
            rp.deliver(caf::make_error(errc::in_session, session_id));
            return;
          }
          self->state.free_known = true;
          begin_join(self, r, rp);
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  };
}

} // namespace mm::session_detail
