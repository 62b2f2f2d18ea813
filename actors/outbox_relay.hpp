#pragma once

// The outbox relay: committed events (match.created, session.ended) -> the
// external sink (a Redis Stream) and both users' sessions (through the
// directory), then marked delivered. At-least-once (invariant I5 of
// docs/design.md); consumers dedupe by event_id.

#include <cstdint>
#include <memory>
#include <string>

#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;
class queue_store_factory;

/// Settings of the outbox relay. Out-of-range values are clamped (batch to
/// 1..10000, lease_ms and backoff_min_ms to at least 1, backoff_max_ms to at
/// least backoff_min_ms).
struct relay_config {
  uint32_t batch = 100;      ///< events leased per fetch
  uint32_t lease_ms = 30000; ///< how long a fetched event is ours alone
  /// An event with a user the store knows no node for is left unmarked on
  /// its first `unrouted_attempts` deliveries (delivered again after its
  /// lease): after a Redis restart the user->node map comes back with each
  /// node's next heartbeat (docs/cluster.md, "When Redis forgets"). Later
  /// deliveries mark it: the user is connected nowhere and gets the match
  /// replayed when a session starts. 0: marked at once.
  uint32_t unrouted_attempts = 1;
  /// Fallback polling period, and the longest wait of one LISTEN round.
  /// 0 turns the polling timer off (deterministic tests); the LISTEN worker
  /// then waits 1000 ms per round.
  uint32_t poll_ms = 500;
  std::string stream = "mm:events"; ///< the Redis Stream key (XADD)
  /// Cap of the stream: every XADD carries `MAXLEN ~ stream_maxlen`, so
  /// Redis keeps about this many of the newest events (a little more:
  /// it trims whole nodes). 0: uncapped. The outbox in the database keeps
  /// every event for the lifecycle's retention (docs/persistence.md).
  uint64_t stream_maxlen = 100000;
  uint32_t backoff_min_ms = 50, backoff_max_ms = 5000; ///< failure retries
  /// Wake up on the store's commit notifications (PostgreSQL LISTEN). Only
  /// for blocking stores; the in-memory store relies on ticks and flushes.
  bool listen = true;
  /// Pushed events (deliver_atom) are marked delivered together: up to
  /// `batch` of them, or whatever gathered within this many ms, in one
  /// statement, while the next ones already go out: one statement for many
  /// group commits, not one each. Only with a blocking match store; inline
  /// stores mark at once.
  /// A relay that stops first leaves them to a fetch after their lease
  /// (at least once). 0: every pushed batch marked at once.
  uint32_t mark_delay_ms = 20;
  /// Bound on one job of a store worker; a worker silent for longer is
  /// stuck (actors/worker_bound.hpp) and this actor stops. 0: no bound.
  /// Set by the engine from `engine_config::worker_timeout_ms`.
  uint32_t worker_timeout_ms = 60000;
  /// Where the relay counts (null: nothing is counted): `events_delivered`
  /// (events this relay sent to the sink and sessions and then marked
  /// delivered), `relay_retries` (events it has to deliver again: fetched
  /// once more after an earlier lease lapsed, or in a failed XADD or mark
  /// step, once per failed attempt), and `outbox_lag_ms` (this node's clock
  /// minus `created_at` of the oldest event of the last batch marked; 0 once
  /// a fetch finds nothing pending).
  std::shared_ptr<engine_metrics> metrics;
};

/// Spawns an outbox relay (interface in messages/type_ids.hpp).
///
/// One cycle: lease up to `batch` undelivered events (`fetch_undelivered`),
/// XADD each to `cfg.stream` (fields event_id, type, session_id, queue,
/// user_a, ticket_a, user_b, ticket_b, payload; `MAXLEN ~
/// cfg.stream_maxlen`; one pipelined round trip),
/// hand the ones the sink accepted to `directory` (`deliver_atom`; an
/// invalid handle skips this step) and wait for its answers, then
/// `mark_delivered` them; repeat until a fetch finds nothing. An event is
/// marked only after its XADD succeeded, and only when the directory's
/// `delivery_report` is complete: every user's session got it, on this node
/// or on another one, or the user is connected nowhere (the event waits for
/// its reconnect). An event whose user's node is live but could not be
/// reached, or that the directory did not answer for within 10 s, stays
/// unmarked: its lease lapses and it is delivered again (by any relay). A
/// failed fetch, XADD (transport failure or error reply) or mark is retried
/// after an exponential backoff (backoff_min_ms doubling up to
/// backoff_max_ms, reset by a success); nothing is dropped, and a lease that
/// expires meanwhile hands the event to another relay (a duplicate, never a
/// loss). An event whose payload cannot
/// be read still goes to the stream (with the fields it has) and is marked,
/// but reaches no session; this is logged as an error.
///
/// Wake-ups: `tick_atom` (from anyone), a LISTEN worker that blocks in
/// `wait_for_events` (blocking stores with `cfg.listen`), and a polling timer
/// every `cfg.poll_ms` as the fallback. `flush_atom` answers, once a cycle
/// that started after it found nothing more to lease, how many events this
/// relay delivered meanwhile.
///
/// Blocking stores (PostgreSQL, Redis) are used from detached workers linked
/// to the relay, each with its own connection; non-blocking ones (in-memory,
/// embedded) inline, which keeps the relay deterministic under the CAF test
/// coordinator. Several relays may run against one store: the leases share
/// the work out. The first connection to each store is opened by this call
/// (PostgreSQL connects eagerly, up to its connect timeout): call it at
/// start-up, not from inside an actor. A worker that dies takes the relay
/// down with it (linked); restart it from the host. Stop it with an exit
/// message; its workers follow within `poll_ms` (the LISTEN wait). Not
/// idempotent: every call spawns a new relay.
outbox_relay_actor
spawn_outbox_relay(caf::actor_system& sys,
                   std::shared_ptr<match_store_factory> store,
                   std::shared_ptr<queue_store_factory> sink,
                   directory_actor directory, relay_config cfg = {});

} // namespace mm
