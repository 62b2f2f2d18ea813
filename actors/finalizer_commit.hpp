#pragma once

// The finalizer's group commit (actors/finalizer.cpp): one batch of pairs
// run on a database connection with the cancel checkpoints, and the
// detached worker that owns such a connection. Internal to the finalizer.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/cancel_registry.hpp"
#include "actors/finalizer.hpp"

namespace mm {

class match_store;
class match_store_factory;

namespace finalizer_detail {

/// How one pair of a batch ended in the store.
struct pair_outcome {
  enum kind_t { committed, cancelled, conflict, unavailable, invalid };
  kind_t kind = unavailable;
  std::string session_id;
  bool created = false; // false: an earlier commit made it (a retry)
  std::string detail;
  bool claimer_active = false; // conflict: already in an active session
  bool claimed_active = false;
  /// committed and created with a push lease (commit_job::push): its
  /// event, for the relay, as the outbox row has it.
  std::optional<match_event> event;
};

/// A cancel this finalizer could not decide from a pair it saw, asked of
/// the database: is the user's active session the one of this ticket?
struct ticket_lookup {
  enum kind_t { free, matched, unavailable };
  inflight_cancel ticket;
  kind_t kind = unavailable;
  std::string session_id;
  std::string detail;
};

using clock_time = caf::actor_clock::time_point;

/// A batch on its way through a worker and back; the promises stay home.
struct commit_job {
  std::vector<claim_pair> pairs;
  std::vector<bool> mutual; // a mutual like: no queue tickets, no cancels
  /// Per pair: no COMMIT may start after this (claim_window_ms).
  std::vector<clock_time> commit_by;
  std::vector<pair_outcome> out;
  std::vector<ticket_lookup> lookups; // answered before the pairs run
  /// The store writes the events leased (match_store::set_commit_lease):
  /// each created pair's outcome carries its event to push to the relay.
  bool push = false;
};

using job_ptr = std::shared_ptr<commit_job>;

} // namespace finalizer_detail

} // namespace mm

// A job is a shared pointer, never serialized: it goes to this node's
// workers only.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::finalizer_detail::job_ptr)

namespace mm::finalizer_detail {

/// A detached worker of the pool; owns one blocking database connection.
/// Local only (the job never leaves the node), so it needs no type ID.
using commit_worker_actor = caf::typed_actor<
  // Runs the job's pairs as one group commit, with the cancel checkpoints,
  // and answers the same job with one outcome per pair. Idempotent per pair
  // (a pair committed before comes back `created == false`).
  caf::replies_to<job_ptr>::with<job_ptr>>;

using hook_fn = std::function<void(checkpoint, const claim_pair&)>;

/// Runs one batch: the lookups first, then checkpoint 1 before the
/// transaction and checkpoints 2 and 3 inside it (the store asks before it
/// writes COMMIT), a pair past its `commit_by` withdrawn at any of them;
/// for refused pairs, which side is already in an active session.
/// Idempotent per pair (a pair committed before comes back `created ==
/// false`).
void run_job(match_store& store, const cancel_registry& cancels,
             const hook_fn& hook, const caf::actor_clock& clock,
             commit_job& job);

/// A detached worker: owns one blocking connection of `factory` and runs
/// one job at a time (`run_job` with `cancels` and `hook`).
/// `push_lease_ms`: set on the connection (match_store::set_commit_lease).
commit_worker_actor::behavior_type
commit_worker(commit_worker_actor::pointer self,
              std::shared_ptr<match_store_factory> factory,
              std::shared_ptr<cancel_registry> cancels, hook_fn hook,
              uint32_t push_lease_ms);

} // namespace mm::finalizer_detail
