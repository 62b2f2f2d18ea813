#pragma once

// The session lifecycle: ends match sessions (by a member, or by age), tells
// whether a user is in an active session, and prunes what the database no
// longer needs. One per node; blocking databases run on a detached worker.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;

/// Settings of the lifecycle actor (docs/engine.md, "Sessions end").
struct lifecycle_config {
  /// A session older than this ends by itself with reason "expired", so a
  /// client that vanished never pins its partner. 0: sessions never expire.
  uint32_t max_session_s = 3600;
  /// Period of the expiry and pruning sweep. 0: no timer (tests and
  /// simulations send `tick_atom` themselves).
  uint32_t sweep_ms = 1000;
  /// Delivered events and closed sessions older than this are deleted.
  /// 0: kept forever.
  uint32_t retention_s = 7 * 86400;
  /// At most this many sessions expired and rows pruned per kind and sweep,
  /// so no transaction is long.
  uint32_t batch = 1000;
  /// Width of the outbox's time partitions in seconds
  /// (match_store::maintain_partitions: windows created ahead, dropped
  /// whole past `retention_s`). 0: no maintenance (every row stays in the
  /// default partition and is pruned row by row).
  uint32_t partition_s = 0;
  /// Windows created ahead of the current one.
  uint32_t partition_ahead = 3;
  /// Period of the maintenance, at most: a quarter of `partition_s` when
  /// that is shorter (a sweep does it when it is due).
  uint32_t partition_check_ms = 60000;
  /// Bound of one database call seen from the actor (the worker's answer).
  uint32_t call_timeout_ms = 30000;
  /// Joins' in-session checks gather this long before they go to the
  /// database together, in one statement (docs/benchmarks-history.md,
  /// "Batching windows stay at 2 ms"). Only with a blocking store; 0: each
  /// goes as soon as none is running.
  uint32_t lookup_delay_ms = 2;
  /// Set by the host while it knows the database is out (matchd's readiness
  /// probe): a join's in-session check then answers `store_unavailable` at
  /// once instead of waiting out a database that does not answer. Null:
  /// never.
  std::shared_ptr<const std::atomic<bool>> database_down;
  /// Woken after sessions end, so their events go out at once. May be empty.
  outbox_relay_actor relay;
  /// Where it counts (null: nothing): `sessions_ended` (by members and by
  /// expiry), `rows_pruned`.
  std::shared_ptr<engine_metrics> metrics;
  /// Called (session, queue) after a member left a group session that goes
  /// on: backfill may fill the seat (actors/backfill.hpp); and (session,
  /// '') after a member ended one: its backfill ends. May be empty.
  std::function<void(const std::string&, const std::string&)> on_member_left;
};

/// Spawns the lifecycle actor (interface `lifecycle_actor` in
/// messages/type_ids.hpp). The first database connection is opened here
/// (PostgreSQL connects eagerly): call it at start-up, not from an actor.
/// Not idempotent: every call spawns another actor.
lifecycle_actor spawn_lifecycle(caf::actor_system& sys,
                                std::shared_ptr<match_store_factory> store,
                                lifecycle_config cfg);

} // namespace mm
