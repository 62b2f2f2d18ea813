#pragma once

// The group finalizer (problem 15 of docs/design.md, docs/groups.md): turns
// a claimed group into one committed session of all its members, or undoes
// it in the queue, with the cancel checkpoints of a pair (problem 5). A
// group is all or nothing (I12): a member that cancelled, or that is in
// another session already, takes its whole ticket out, and every other
// ticket goes back to its original place (I2).

#include <cstdint>
#include <functional>
#include <memory>

#include "actors/cancel_registry.hpp"
#include "actors/finalizer.hpp"
#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;

/// Settings of the group finalizer.
struct group_finalizer_config {
  /// The cancels of this node (share the pair finalizer's): a ticket with a
  /// cancel of any of its members is withdrawn at the next checkpoint.
  std::shared_ptr<cancel_registry> cancels;
  /// Gets each committed group's event at once (or a wake-up to fetch it).
  /// May be empty.
  outbox_relay_actor relay;
  /// The events are written leased to `relay` for this long and pushed to
  /// it, as the pair finalizer's (finalizer_config::push_lease_ms); 0: they
  /// are written free and the relay fetches them.
  uint32_t push_lease_ms = 0;
  /// Test hook, called at every checkpoint of every group (from the thread
  /// that runs the commit): simulations register cancels here.
  std::function<void(checkpoint, const group_commit&)> at_checkpoint;
  /// Bound on one commit of the database worker; a worker silent for
  /// longer is stuck and this actor stops (actors/worker_bound.hpp). 0: none.
  uint32_t worker_timeout_ms = 60000;
  /// Database connections (detached workers) committing groups side by
  /// side, for a blocking store. At least 1.
  uint32_t workers = 4;
  /// `matches` and `conflicts` count groups here. Null: nothing counted.
  std::shared_ptr<engine_metrics> metrics;
  /// Called (session, queue) for each session this node committed with
  /// fewer players than the queue's maximum: backfill may fill it
  /// (actors/backfill.hpp). May be empty.
  std::function<void(const std::string&, const std::string&)> on_short;
};

/// Spawns the group finalizer. For each `finalize_atom, group_commit` it
/// asks checkpoint `before_create`, then commits the group
/// (match_store::commit_group) asking `after_create` and `before_answer`
/// inside the transaction; a cancel of any member's ticket at any of them
/// withdraws the group. Committed: the group is released in the queue
/// (its tickets leave) and the answer names the session. Otherwise the
/// group is requeued: the cancelled tickets and those with a member in
/// another active session are removed, every other ticket goes back at its
/// original score; a database that cannot be reached removes nobody. A
/// blocking store commits on `workers` detached workers, one group each at
/// a time; the in-memory store inline (deterministic under the CAF test
/// coordinator).
/// Not idempotent: every call spawns another actor.
group_finalizer_actor
spawn_group_finalizer(caf::actor_system& sys,
                      std::shared_ptr<match_store_factory> store,
                      queue_broker_actor broker,
                      group_finalizer_config cfg = {});

} // namespace mm
