#pragma once

#include <cstdint>
#include <memory>

#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;

/// Settings of the swipe actor.
struct swipe_config {
  uint32_t workers = 2; ///< database connections (blocking stores only)
  /// Bound on one job of a store worker; a worker silent for longer is
  /// stuck (actors/worker_bound.hpp) and this actor stops. 0: no bound.
  /// Set by the engine from `engine_config::worker_timeout_ms`.
  uint32_t worker_timeout_ms = 60000;
  /// Where the swipe actor counts (null: nothing is counted): `conflicts`,
  /// once per swipe that could not get its pair's lock within the wait
  /// bound. (A `conflict` from the finalizer is counted there.)
  std::shared_ptr<engine_metrics> metrics;
};

/// Spawns the swipe actor: for each swipe, under the pair's lock (one lock
/// per unordered pair, bounded wait, bounded lease), it records the swipe,
/// checks the opposite direction and, when the like is mutual and the pair
/// has no match yet, creates the pair's one match through the finalizer —
/// then releases the lock on every path. Blocking stores run on detached
/// workers; the in-memory store inline. Not idempotent: every call spawns a
/// new actor.
swipe_actor spawn_swipe(caf::actor_system& sys,
                        std::shared_ptr<match_store_factory> store,
                        pair_lock_actor lock, finalizer_actor finalizer,
                        swipe_config cfg = {});

} // namespace mm
