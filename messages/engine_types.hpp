#pragma once

// Messages between sessions, the finalizer, the outbox relay and the host:
// plain structs with an `inspect` overload each, so they can cross nodes.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/queue_types.hpp"

namespace mm {

/// A user's request to join a queue (host -> session).
struct join_request {
  std::string queue;
  std::string ticket; ///< client-chosen; the idempotency key of the join
  std::string attrs;  ///< opaque, at most 4096 bytes
  /// A ticket still waiting this long after the join gives up: it leaves
  /// the queue and the join ends `timed_out`. 0: it waits until cancelled.
  uint32_t give_up_after_s = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_request& x) {
  return f(caf::meta::type_name("join_request"), x.queue, x.ticket, x.attrs,
           x.give_up_after_s);
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
  timed_out, ///< gave up waiting (`give_up_after_s`), left the queue (terminal)
};

/// The stable name of `x`, e.g. "queued" (logs, APIs).
const char* to_string(session_phase x) noexcept;

/// A user's session as its subscriber and its callers see it.
struct session_state {
  std::string user;
  session_phase phase = session_phase::idle;
  std::string queue;
  std::string ticket;
  std::string token;
  std::string session_id; ///< matched: the committed match session
  std::string detail;
  /// queued on a queue with rules: the ticket's current windows as a JSON
  /// object (docs/rules.md), e.g. {"skill":150.0,"region":"any"}.
  std::string windows;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_state& x) {
  return f(caf::meta::type_name("session_state"), x.user, x.phase, x.queue,
           x.ticket, x.token, x.session_id, x.detail, x.windows);
}

/// The `type` of the event that tells both members their session ended
/// (the match store writes it as `session_ended_type`).
constexpr const char* session_ended_event = "session.ended";

/// What ending a match session answered (session / lifecycle `end_atom`).
/// The same final state for every end of one session: the first end
/// decided `ended_by` and `reason`, later ones answer them with
/// `ended_now == false`.
struct end_result {
  std::string session_id;
  std::string queue;
  std::string ended_by;   ///< the member who ended it; "" when it expired
  std::string reason;     ///< the ender's reason, or "expired"
  bool ended_now = false; ///< false: it had ended before this request
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, end_result& x) {
  return f(caf::meta::type_name("end_result"), x.session_id, x.queue,
           x.ended_by, x.reason, x.ended_now);
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
  /// "match.created" (a committed match) or "session.ended" (the session
  /// ended: both users are free again; `payload` says who ended it, why);
  /// a group session's also "session.member_left".
  std::string type = "match.created";
  /// A group session's members beyond `user_a` and `user_b` (the payload
  /// has their tickets and teams): they are told too. Empty for a pair.
  std::vector<std::string> others;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, match_event& x) {
  return f(caf::meta::type_name("match_event"), x.event_id, x.session_id,
           x.queue, x.user_a, x.ticket_a, x.user_b, x.ticket_b, x.payload,
           x.type, x.others);
}

/// What a member's leave of a group session answered (session /
/// lifecycle `leave_atom`). The same state for every leave of one member.
struct leave_result {
  std::string session_id;
  std::string queue;
  std::string user;
  uint32_t remaining = 0; ///< members still in the session
  bool left_now = false;  ///< false: the member had left before
  bool ended = false;     ///< the session is over (too few stay, or ended)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, leave_result& x) {
  return f(caf::meta::type_name("leave_result"), x.session_id, x.queue, x.user,
           x.remaining, x.left_now, x.ended);
}

/// What became of one delivery of a match event to sessions (directory ->
/// relay, gateway -> directory, peer gateway -> gateway). Counts users.
struct delivery_report {
  uint32_t reached = 0; ///< sessions that got the event now, on any node
  /// Users without a session on the node they were last seen on (or on no
  /// node at all): the event is kept there for their reconnect.
  uint32_t kept = 0;
  /// Users whose node is live but could not be reached: the event is kept
  /// on the asking node, and it is NOT delivered (the relay leaves it
  /// unmarked, so it is delivered again).
  uint32_t failed = 0;
  /// Users the store knows no node for (counted in `kept` too). Usually
  /// connected nowhere; but right after a Redis restart or failover the
  /// user->node map may be gone until each node maps its users again, so
  /// the relay leaves such an event unmarked on its first delivery.
  uint32_t unrouted = 0;
};

/// True when every user of the event got it, or is connected nowhere (it
/// is then kept for the user's reconnect): the relay may mark it delivered.
inline bool complete(const delivery_report& x) noexcept {
  return x.failed == 0;
}

/// Adds `y`'s counts to `x`. Not idempotent.
inline delivery_report& operator+=(delivery_report& x,
                                   const delivery_report& y) noexcept {
  x.reached += y.reached;
  x.kept += y.kept;
  x.failed += y.failed;
  x.unrouted += y.unrouted;
  return x;
}

/// True when every count is equal.
inline bool operator==(const delivery_report& x,
                       const delivery_report& y) noexcept {
  return x.reached == y.reached && x.kept == y.kept && x.failed == y.failed
         && x.unrouted == y.unrouted;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_report& x) {
  return f(caf::meta::type_name("delivery_report"), x.reached, x.kept, x.failed,
           x.unrouted);
}

/// A cluster peer as one node's gateway sees it (`peers_atom`).
struct peer_info {
  std::string node;
  std::string address;    ///< "host:port"; empty when only a handle is known
  bool connected = false; ///< the gateway holds a handle of the peer's gateway
  bool static_peer = false; ///< from the configuration (never forgotten)
  bool member = false;      ///< seen live in the membership records
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_info& x) {
  return f(caf::meta::type_name("peer_info"), x.node, x.address, x.connected,
           x.static_peer, x.member);
}

/// A pair that a claim took out of the queue: the claimer (who ran the claim)
/// and the claimed waiter. The finalizer turns it into a match or undoes it.
struct claim_pair {
  std::string queue;
  std::string claimer_user;
  std::string claimer_ticket;
  std::string claimer_attrs;
  partner_info claimed; ///< user, ticket, node, attrs, original score, token
  /// When the claimer asked for the claim: nanoseconds of the actor clock
  /// (steady) of the node that made it, i.e. no later than the claim itself.
  /// Meaningful only on that node; the finalizer commits no pair whose claim
  /// is older than its `claim_window_ms`. 0: unknown (the finalizer counts
  /// from the pair's receipt).
  int64_t claimed_at = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_pair& x) {
  return f(caf::meta::type_name("claim_pair"), x.queue, x.claimer_user,
           x.claimer_ticket, x.claimer_attrs, x.claimed, x.claimed_at);
}

/// How a finalization ended for the claimer.
enum class finalize_outcome : uint8_t {
  committed, ///< session, members and match.created committed
  retry,     ///< not matched, not the claimer's fault: claim again as new
  cancelled, ///< the claimer's own cancel was honoured
  refused,   ///< the claimer is already in an active session (then
             ///< `session_id` names it: the claimer is matched there)
};

/// The stable name of `x`, e.g. "committed" (logs).
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

/// The finalizer's verdict on an in-flight cancel: honoured (never
/// matched), too late (matched in `session_id`), or neither: the ticket is
/// back in the queue, where the cancel goes again.
struct cancel_verdict {
  bool honoured = false;  ///< true: never matched
  std::string session_id; ///< not honoured: the session it is matched in
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
