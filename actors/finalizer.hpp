#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/cancel_registry.hpp"
#include "core/match_timings.hpp"
#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;

/// The cancel checkpoints of a finalization (problem 5 of docs/design.md).
enum class checkpoint : uint8_t {
  before_create, ///< before the transaction writes anything
  after_create,  ///< the rows exist inside the open transaction
  before_answer, ///< immediately before COMMIT; after it the match stands
  after_commit,  ///< the COMMIT succeeded (pairs it created; hooks only)
};

/// The session `queue` and tickets recorded for a mutual like's match.
constexpr const char* mutual_queue = "likes";
constexpr const char* mutual_ticket = "like";

/// Settings of the finalizer.
struct finalizer_config {
  uint32_t batch_max = 100;    ///< pairs per group commit transaction
  uint32_t batch_delay_ms = 2; ///< wait for more pairs; 0: commit at once
  uint32_t workers = 2;        ///< database connections (blocking stores)
  uint32_t attempts = 3;       ///< commits of a pair before giving it up
  /// A group commit the database could not take (store unavailable) makes
  /// the whole finalizer back off: no commit and no cancel lookup runs
  /// before the delay has passed. The delay starts at `retry_min_ms`,
  /// doubles with every failed commit up to `retry_max_ms`, and is spread
  /// by +-`retry_jitter_pct` percent; a commit that reaches the database
  /// resets it. A pair given up after `attempts` comes back from its
  /// claimer and waits out the same delay, so an outage costs a bounded
  /// number of commits, not one per pair per millisecond.
  uint32_t retry_min_ms = 100;
  uint32_t retry_max_ms = 5000;
  uint32_t retry_jitter_pct = 20;
  /// Bound on an in-flight cancel verdict: a cancel whose pair this
  /// finalizer has not seen by then is answered from the database (matched
  /// when the user's active session holds the ticket, else honoured; the
  /// registered cancel refuses a pair that comes later).
  uint32_t cancel_wait_ms = 15000;
  /// How long a final verdict (honoured, matched in S) is kept for a cancel
  /// that arrives late; a cancel after that is answered from the database
  /// as above. Bounds the cache by the match rate, not by users served:
  /// about rate x 2 tickets x this (docs/benchmarks-history.md, "Idle
  /// release and caches bounded by time"). A cancel races a commit for
  /// moments, so the bound of a cancel's own wait is enough.
  uint32_t decided_ttl_ms = 15000;
  /// Bound on a claim's age at commit: a queue pair whose claim was asked
  /// for more than this long ago (claim_pair::claimed_at, this node's
  /// steady clock) is never committed: withdrawn at the checkpoint that
  /// finds it too old and undone like a cancelled pair (the waiter goes
  /// back at its place, the claimer claims again). The engine sets it
  /// below the claim hold (docs/engine.md, "A cancel whose owner cannot be
  /// asked"), so no COMMIT starts after the hold lapsed in the queue.
  /// 0: no bound (the engine replaces 0 with 4/5 of `broker.hold_ms`).
  uint32_t claim_window_ms = 0;
  std::shared_ptr<cancel_registry> cancels; ///< made when empty
  /// Woken after every batch that committed a match, so the waiting side
  /// hears of it at once (the in-memory store has no LISTEN/NOTIFY; with
  /// PostgreSQL it only saves the relay a round of waiting). May be empty.
  outbox_relay_actor relay;
  /// With a relay: the commits write their events leased for this long
  /// (match_store::set_commit_lease) and the finalizer pushes them to the
  /// relay once the pair's tickets are released, so the relay delivers them
  /// without a fetch, lease or notification of its own; what it cannot
  /// deliver any relay fetches once the lease lapsed. 0: the relay is only
  /// woken and fetches them. The engine sets the relay's lease_ms.
  uint32_t push_lease_ms = 0;
  /// Test hook, called at every checkpoint of every pair (from the thread
  /// that runs the commit), and at `after_commit` for each pair a COMMIT
  /// created. Simulations inject cancels here; matchd's failpoints
  /// (MM_FAILPOINT, docs/matchd.md) kill the process here.
  std::function<void(checkpoint, const claim_pair&)> at_checkpoint;
  /// Bound on one job of a store worker; a worker silent for longer is
  /// stuck (actors/worker_bound.hpp) and this actor stops. 0: no bound.
  /// Set by the engine from `engine_config::worker_timeout_ms`.
  uint32_t worker_timeout_ms = 60000;
  /// Where the finalizer counts (null: nothing is counted): `matches`
  /// (matches this finalizer created, queue and mutual; an idempotent
  /// repeat of a committed pair is not counted again), `conflicts` (pairs
  /// the database refused because a side is already matched: queue pairs
  /// undone, mutual pairs answered `conflict`), `finalize_latency`
  /// (receipt of a claim_pair / mutual_pair to its answer, retries
  /// included), and `commit_retries` (group commits that failed for want
  /// of the database, each followed by a backoff and another commit).
  std::shared_ptr<engine_metrics> metrics;
  /// When each committed pair was claimed and committed (traces); may be
  /// null.
  std::shared_ptr<match_timings> timings;
};

/// Spawns the finalizer: it turns claimed pairs into committed matches
/// (session, two members, one match.created outbox event, one transaction
/// per batch of pairs), honours cancels at the three checkpoints, and undoes
/// what a claim took when a pair is not committed: a claimed waiter goes back
/// at its original place, a claimer is told to claim again. Blocking stores
/// run on `cfg.workers` detached workers; the in-memory store runs inline
/// (deterministic under the CAF test coordinator). Mutual likes
/// (`finalize_atom, mutual_pair`) join the same group commits: the pair's one
/// match, or its existing match when it had one (`created` is then told by
/// the store); a failure is `conflict` or `store_unavailable`. Not
/// idempotent: every call spawns a new finalizer.
finalizer_actor spawn_finalizer(caf::actor_system& sys,
                                std::shared_ptr<match_store_factory> store,
                                queue_broker_actor broker,
                                finalizer_config cfg = {});

} // namespace mm
