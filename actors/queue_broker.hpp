#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class queue_store_factory;

/// Settings of the queue broker.
struct broker_config {
  uint32_t scan = 10; ///< candidates per claim script call
  /// Candidates per claim call on a queue with rules (the index cells'
  /// heads, merged oldest first; docs/rules.md).
  uint32_t rule_scan = 32;
  /// Candidates per group claim call (a queue with a shape): a window must
  /// hold a whole match and more (docs/groups.md); at most 100.
  uint32_t group_scan = 64;
  uint32_t hold_ms = 10000; ///< bound on a claimed pair's finalization
  uint32_t max_rescans = 8; ///< extra claim calls after stale-only windows
  uint32_t workers = 4;     ///< store connections (blocking stores only)
  uint32_t max_batch = 64;  ///< calls pipelined per round trip
  /// Heartbeat re-scans of one queue per rescan call (1..100; each is a
  /// claim's work in the store: 50 hold Redis for about a millisecond).
  uint32_t rescan_batch = 50;
  uint32_t sweep_interval_ms = 1000; ///< periodic sweep of known queues; 0: off
  uint32_t sweep_batch = 100;        ///< tickets removed per sweep call
  /// The queues users may join; empty: any well-formed name. A join of
  /// another queue is refused with `unknown_queue`.
  std::vector<std::string> queues;
  /// Without `queues`: how many distinct queues the broker knows at once
  /// (sweeps every `sweep_interval_ms`, exports a depth for). A join that
  /// would make one more is refused with `too_many_queues` and changes
  /// nothing. Clamped to at least 1. (With `queues` the list is the bound.)
  uint32_t max_queues = 1000;
  /// A known queue that held no ticket at all (waiting or claimed) at a
  /// sweep and got no join for this long is forgotten: no longer swept,
  /// its depth dropped from the metrics; a later join makes it known
  /// again. 0: known queues are never forgotten.
  uint32_t queue_idle_ms = 60000;
  /// Bound on one job of a store worker; a worker silent for longer is
  /// stuck (actors/worker_bound.hpp) and this actor stops. 0: no bound.
  /// Set by the engine from `engine_config::worker_timeout_ms`.
  uint32_t worker_timeout_ms = 60000;
  /// Where the broker counts (null: nothing is counted): `claims` (every
  /// claim script that answered, re-scans and heartbeat re-scans included),
  /// `stale_removed` (claim windows and sweeps), `requeues` (requeue calls
  /// that put a waiter back), `queues_known`, and each known queue's depth.
  std::shared_ptr<engine_metrics> metrics;
};

/// Spawns the queue broker: the only actor that talks to the queue store.
/// With a blocking store (Redis) it owns `cfg.workers` detached workers, each
/// with its own connection, and pipelines every request that arrives while
/// they are busy into the next round trip (up to `cfg.max_batch`). With a
/// non-blocking store (embedded) it runs calls inline, which keeps it
/// deterministic under the CAF test coordinator.
///
/// Queues become known by joins (claim, enqueue) and re-scans of this
/// broker; only known queues are swept and have a depth metric, and their
/// number is bounded (`cfg.queues`, `cfg.max_queues`, `cfg.queue_idle_ms`),
/// so a client that invents queue names cannot make a node's periodic work
/// or its metric labels grow. Re-scans, heartbeats, cancels, requeues and
/// releases are never refused for the bound: they act on existing tickets.
/// Not idempotent: every call spawns a new broker.
queue_broker_actor
spawn_queue_broker(caf::actor_system& sys,
                   std::shared_ptr<queue_store_factory> store,
                   broker_config cfg = {});

} // namespace mm
