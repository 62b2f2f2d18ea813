#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "messages/type_ids.hpp"

namespace mm {

class queue_store_factory;

/// Settings of the pair lock (problem 6 of docs/design.md).
struct pair_lock_config {
  uint32_t wait_ms = 4000;  ///< bound on one acquire; then `conflict`
  uint32_t lease_ms = 3000; ///< bound on one holding, locally and in Redis
  uint32_t retry_ms = 20;   ///< pause between SET NX attempts while another
                            ///< node holds the pair
  std::string prefix = "mm:lock:"; ///< Redis key: prefix + "{min:max}"
  /// Benchmark baseline only: every pair shares ONE lock ("global").
  bool global = false;
  /// Bound on one job of a store worker; a worker silent for longer is
  /// stuck (actors/worker_bound.hpp) and this actor stops. 0: no bound.
  /// Set by the engine from `engine_config::worker_timeout_ms`.
  uint32_t worker_timeout_ms = 60000;
};

/// Spawns the pair lock of this node: ONE lock per unordered pair {a, b},
/// keyed `min(a,b):max(a,b)` (byte order), so "a locks b" and "b locks a"
/// exclude each other and can never deadlock.
///
///   waiting ──head of the pair's queue, SET NX PX ok──► held
///      │  ▲ another node holds it: retry every retry_ms     │
///      │  └─────────────────────────────────────────────────┘
///      │          release (current token) / holder down / lease_ms passed:
///      │          the next waiter becomes head
///      └──wait_ms passed──► `conflict` (never holds it afterwards)
///
/// Local contenders wait inside the actor (no thread blocks); only the head
/// of a pair's queue asks the store, with `SET key token NX PX lease_ms`.
/// Release is compare-and-delete by token (lua/unlock.lua), so a stale token
/// (lease lapsed, released already) releases nothing, locally or in Redis.
/// With a blocking store (Redis) the store calls run on one detached worker,
/// pipelined; with a non-blocking one (embedded) they run inline, which keeps
/// the actor deterministic under the CAF test coordinator. Timers are
/// delayed `tick_atom` messages. Not idempotent: every call spawns a new
/// lock actor (each one is a "node" towards the others).
pair_lock_actor spawn_pair_lock(caf::actor_system& sys,
                                std::shared_ptr<queue_store_factory> store,
                                pair_lock_config cfg = {});

/// The lock key of the unordered pair {a, b}: `min(a,b):max(a,b)`, or empty
/// when a == b or an id is not 1..128 bytes of [A-Za-z0-9._:@-] (then
/// `why`, if given, says what is wrong). Idempotent.
std::string pair_lock_key(const std::string& a, const std::string& b,
                          std::string* why = nullptr);

} // namespace mm
