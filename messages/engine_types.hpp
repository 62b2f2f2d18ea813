#pragma once

// Messages between sessions, the finalizer, the outbox relay and the host:
// plain structs with an `inspect` overload each, so they can cross nodes.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "messages/queue_types.hpp"

namespace mm {

/// A user's request to join a queue (host -> session).
struct join_request {
  std::string queue;
  std::string ticket; ///< client-chosen; the idempotency key of the join
  std::string attrs;  ///< opaque, at most 4096 bytes
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_request& x) {
  return f(caf::meta::type_name("join_request"), x.queue, x.ticket, x.attrs);
}

/// Where a session stands. Sent to the subscriber on every change.
enum class session_phase : uint8_t {
  idle,       ///< no ticket
  claiming,   ///< claim-or-enqueue in flight
  queued,     ///< waiting in the queue (or claimed by someone, not yet final)
  finalizing, ///< this user claimed a partner; the finalizer commits it
  matched,    ///< a match.created event arrived (terminal)
  cancelled,  ///< the cancel was acknowledged (terminal)
  failed,     ///< a store error ended the join (terminal; detail says why)
};

const char* to_string(session_phase x) noexcept;

struct session_state {
  std::string user;
  session_phase phase = session_phase::idle;
  std::string queue;
  std::string ticket;
  std::string token;
  std::string session_id; ///< matched: the committed match session
  std::string detail;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_state& x) {
  return f(caf::meta::type_name("session_state"), x.user, x.phase, x.queue,
           x.ticket, x.token, x.session_id, x.detail);
}

/// A committed match, delivered by the outbox relay to both users' sessions
/// (at least once; dedupe by `event_id`) and to the external sink.
struct match_event {
  std::string event_id;
  std::string session_id;
  std::string queue;
  std::string user_a;
  std::string ticket_a;
  std::string user_b;
  std::string ticket_b;
  std::string payload; ///< the outbox row's JSON
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, match_event& x) {
  return f(caf::meta::type_name("match_event"), x.event_id, x.session_id,
           x.queue, x.user_a, x.ticket_a, x.user_b, x.ticket_b, x.payload);
}

/// A pair that a claim took out of the queue: the claimer (who ran the claim)
/// and the claimed waiter. The finalizer turns it into a match or undoes it.
struct claim_pair {
  std::string queue;
  std::string claimer_user;
  std::string claimer_ticket;
  std::string claimer_attrs;
  partner_info claimed; ///< user, ticket, node, attrs, original score, token
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_pair& x) {
  return f(caf::meta::type_name("claim_pair"), x.queue, x.claimer_user,
           x.claimer_ticket, x.claimer_attrs, x.claimed);
}

enum class finalize_outcome : uint8_t {
  committed, ///< session, members and match.created committed
  retry,     ///< not matched, not the claimer's fault: claim again as new
  cancelled, ///< the claimer's own cancel was honoured
  refused,   ///< the claimer is already in an active session
};

const char* to_string(finalize_outcome x) noexcept;

/// The finalizer's answer to the claimer.
struct finalize_result {
  finalize_outcome outcome = finalize_outcome::retry;
  std::string session_id; ///< committed: the session
  std::string detail;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, finalize_result& x) {
  return f(caf::meta::type_name("finalize_result"), x.outcome, x.session_id,
           x.detail);
}

/// A cancel of a ticket that a claim took (in flight): only the finalizer can
/// tell whether it came in time.
struct inflight_cancel {
  std::string queue;
  std::string user;
  std::string ticket;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, inflight_cancel& x) {
  return f(caf::meta::type_name("inflight_cancel"), x.queue, x.user, x.ticket);
}

/// The finalizer's verdict on an in-flight cancel.
struct cancel_verdict {
  bool honoured = false;  ///< true: never matched; false: too late
  std::string session_id; ///< too late: the session it is matched in
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_verdict& x) {
  return f(caf::meta::type_name("cancel_verdict"), x.honoured, x.session_id);
}

/// A swipe: `from` likes (or dislikes) `to`.
struct swipe_request {
  std::string from;
  std::string to;
  bool like = true; ///< false: DISLIKE (withdraws an earlier LIKE)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, swipe_request& x) {
  return f(caf::meta::type_name("swipe_request"), x.from, x.to, x.like);
}

/// The answer to a swipe.
struct swipe_result {
  bool mutual = false;    ///< both like each other (now or before)
  std::string session_id; ///< mutual: the pair's one match session
  bool created = false;   ///< this swipe created that match
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, swipe_result& x) {
  return f(caf::meta::type_name("swipe_result"), x.mutual, x.session_id,
           x.created);
}

/// A mutual like to commit as a match (swipe -> finalizer).
struct mutual_pair {
  std::string user_a;
  std::string user_b;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, mutual_pair& x) {
  return f(caf::meta::type_name("mutual_pair"), x.user_a, x.user_b);
}

} // namespace mm
