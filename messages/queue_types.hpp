#pragma once

// Queue messages: plain structs with an `inspect` overload each, so they can
// cross nodes. Only the tiny type_name annotation of CAF is needed here.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace mm {

/// What a user asks for when it joins a queue (enqueue or claim-or-enqueue).
struct ticket_spec {
  std::string queue;  ///< [A-Za-z0-9._:-], 1..64 bytes, no braces
  std::string user;   ///< [A-Za-z0-9._:@-], 1..128 bytes
  std::string ticket; ///< caller-chosen id; the idempotency key of the join
  std::string node;   ///< node of the user's session
  std::string attrs;  ///< opaque, at most 4096 bytes
  uint32_t ttl_ms = 30000; ///< presence window, refreshed by heartbeats
  /// Queues with rules (docs/rules.md): the queue's rule set, the user's
  /// rule values and recent partners, as core/rules.hpp makes them. All
  /// empty for a plain FIFO queue.
  std::string rules;
  std::string rk;
  std::string avoid;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ticket_spec& x) {
  return f(caf::meta::type_name("ticket_spec"), x.queue, x.user, x.ticket,
           x.node, x.attrs, x.ttl_ms, x.rules, x.rk, x.avoid);
}

/// Names the current ticket of a user by the token the store issued.
struct ticket_ref {
  std::string queue;
  std::string user;
  std::string token;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ticket_ref& x) {
  return f(caf::meta::type_name("ticket_ref"), x.queue, x.user, x.token);
}

/// The other side of a claim.
struct partner_info {
  std::string user;
  std::string ticket;
  std::string node;
  std::string attrs;
  int64_t score = 0;
  std::string token;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partner_info& x) {
  return f(caf::meta::type_name("partner_info"), x.user, x.ticket, x.node,
           x.attrs, x.score, x.token);
}

/// A ticket as the store holds it after enqueue.
struct enqueue_result {
  std::string ticket;
  std::string token;
  int64_t score = 0;    ///< FIFO position (per-queue sequence)
  int64_t deadline = 0; ///< presence deadline, store clock, ms
  bool created = false; ///< false: the same create again, nothing changed
  std::string state;    ///< waiting | claimed | claimer
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, enqueue_result& x) {
  return f(caf::meta::type_name("enqueue_result"), x.ticket, x.token, x.score,
           x.deadline, x.created, x.state);
}

enum class claim_outcome : uint8_t {
  matched,          ///< the caller claimed `partner`
  queued,           ///< nothing live found: the caller waits
  claimed_by_other, ///< somebody claimed the caller: wait for that match
};

/// The stable name of `x`, e.g. "claimed_by_other" (logs). Defined in
/// persistence/queue/queue_codec.cpp.
const char* to_string(claim_outcome x) noexcept;

/// The answer of claim-or-enqueue.
struct claim_result {
  claim_outcome outcome = claim_outcome::queued;
  std::string ticket;
  std::string token;
  int64_t score = 0;    ///< queued: position
  int64_t deadline = 0; ///< queued: presence deadline
  partner_info partner; ///< matched: the claimed; claimed_by_other: claimer
  uint32_t stale_removed = 0; ///< stale tickets removed on the way
  bool more = false;  ///< queued: the last window held only stale tickets
  uint32_t scans = 1; ///< script calls the broker needed (rescans + 1)
  /// queued on a queue with rules: the windows now ("1=150;2=*", rule
  /// positions; core/rules.hpp renders them) and the ms until they change
  /// next (-1: never).
  std::string windows;
  int64_t next_change_ms = -1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_result& x) {
  return f(caf::meta::type_name("claim_result"), x.outcome, x.ticket, x.token,
           x.score, x.deadline, x.partner, x.stale_removed, x.more, x.scans,
           x.windows, x.next_change_ms);
}

enum class cancel_outcome : uint8_t {
  cancelled, ///< removed from the queue: it will never be matched
  in_flight, ///< claimed: the finalizer decides at its cancel checkpoints
};

/// The answer of a cancel at the queue.
struct cancel_result {
  cancel_outcome outcome = cancel_outcome::cancelled;
  std::string ticket;
  std::string state; ///< in_flight: claimed | claimer
  /// in_flight: the node whose finalizer owns the pair and decides the
  /// cancel — the claimer's node for a claimed ticket, the ticket's own node
  /// for a claimer. Empty otherwise.
  std::string node;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_result& x) {
  return f(caf::meta::type_name("cancel_result"), x.outcome, x.ticket, x.state,
           x.node);
}

/// The answer of a heartbeat.
struct heartbeat_result {
  bool alive = false; ///< false: the ticket is gone
  std::string ticket;
  std::string state;
  int64_t deadline = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_result& x) {
  return f(caf::meta::type_name("heartbeat_result"), x.alive, x.ticket, x.state,
           x.deadline);
}

enum class requeue_outcome : uint8_t {
  requeued, ///< back at its original score
  waiting,  ///< it was waiting already: nothing changed
  stale,    ///< its presence deadline passed: removed instead
  gone,     ///< no such ticket any more
};

/// The answer of a requeue.
struct requeue_result {
  requeue_outcome outcome = requeue_outcome::gone;
  std::string ticket;
  int64_t score = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, requeue_result& x) {
  return f(caf::meta::type_name("requeue_result"), x.outcome, x.ticket,
           x.score);
}

/// released: a claimed or claimer ticket was removed; waiting: the ticket
/// waits and stays (a release never removes a waiting ticket, a cancel
/// does); gone: no such ticket.
enum class release_outcome : uint8_t { released, waiting, gone };

/// The answer of a release, one per ticket.
struct release_result {
  release_outcome outcome = release_outcome::gone;
  std::string ticket;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, release_result& x) {
  return f(caf::meta::type_name("release_result"), x.outcome, x.ticket);
}

/// The answer of a sweep.
struct sweep_result {
  uint32_t removed = 0; ///< stale tickets removed (waiting and claimed)
  bool more = false;    ///< another call may find more stale tickets
  /// Tickets left in the waiting set after the (last) call: the queue's
  /// depth. With `more` it may still include stale ones.
  uint64_t depth = 0;
  /// Tickets of any state (waiting, claimed, claimer) left in the queue:
  /// 0 means the queue holds nothing at all.
  uint64_t tracked = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sweep_result& x) {
  return f(caf::meta::type_name("sweep_result"), x.removed, x.more, x.depth,
           x.tracked);
}

} // namespace mm
