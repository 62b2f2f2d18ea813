#pragma once

#include <cstdint>
#include <string>

#include "actors/party_registry.hpp"
#include "core/metrics.hpp"
#include "core/rules.hpp"
#include "messages/type_ids.hpp"

namespace mm {

/// Settings of a session actor.
struct session_config {
  std::string node = "node-1"; ///< recorded in the user's tickets
  uint32_t ttl_ms = 30000;     ///< presence window of a ticket
  /// Ticket refresh period (< ttl_ms): the broker re-scans a waiting
  /// ticket this often (docs/engine.md, "Heartbeats").
  uint32_t heartbeat_ms = 10000;
  /// When > 0, a heartbeat is due at the next multiple of this (on the
  /// actor clock) after `heartbeat_ms`: a node's waiting tickets share few
  /// due moments, one broker timer and a few batched calls each
  /// (docs/matchd.md, "Many connected users"). 0: exactly `heartbeat_ms`
  /// (the deterministic tests).
  uint32_t heartbeat_align_ms = 0;
  uint32_t grace_ms = 5000;     ///< wait for a match after "gone"
  uint32_t max_self_heals = 20; ///< re-enqueues of one join
  /// Bound of one ask for an in-flight cancel verdict: of another node's
  /// finalizer through the gateway, or of this node's (either may take its
  /// `cancel_wait_ms`). This node's finalizer is asked again when it does
  /// not answer within it (docs/engine.md, "The finalizer"). Also the
  /// bound of a request to the queue broker: one that times out may have
  /// run, so it is read again (a re-scan), never reported failed.
  uint32_t route_timeout_ms = 30000;
  /// A cancel whose owner node cannot be asked (docs/engine.md, "A cancel
  /// whose owner cannot be asked") looks again every `owner_recheck_ms`:
  /// the owner (through the gateway, each ask bounded by twice this), the
  /// queue and the database.
  uint32_t owner_recheck_ms = 1000;
  /// How long after the queue showed the ticket held by no claim a COMMIT
  /// of an earlier claim may still become visible (the database's commit
  /// bound; the engine raises it to match_store_factory::commit_bound_ms).
  /// Only a database read started that long after it may answer
  /// `cancelled`. UINT32_MAX: never.
  uint32_t commit_bound_ms = 0;
  /// Bound of such a cancel: still undecided this long after the owner
  /// first could not be asked, the join ends `failed` naming what kept it
  /// open (the claim still held, the database or the queue not answering).
  /// 0: the engine derives it (claim hold + 2 sweeps + commit bound + 10 s).
  uint32_t owner_wait_ms = 0;
  /// Bound of a call to the lifecycle actor (an end, the in-session check).
  uint32_t lifecycle_timeout_ms = 10000;
  /// Idle release: a session that is not live (not claiming, queued or
  /// finalizing), that nobody waits on and that had no request (join,
  /// cancel, state, end) and no state change for this long stops itself;
  /// the engine then spawns a fresh one on the next `engine::session`
  /// call. 0: never (docs/engine.md, "Idle users cost nothing").
  uint32_t idle_release_ms = 60000;
  /// Where the session counts (null: nothing is counted): `joins` (a new
  /// join whose first claim-or-enqueue step the store answered; repeats,
  /// refusals, retries and self-heals are not new joins) and `cancels` (a
  /// join that ended `cancelled`).
  std::shared_ptr<engine_metrics> metrics;
  /// Rule sets by queue (docs/rules.md); null or no entry: plain FIFO. A
  /// join of a queue with rules is checked against its declarations
  /// (`invalid_attribute`), carries its rule values, and re-scans at the
  /// moments its windows widen (not only every `heartbeat_ms`).
  std::shared_ptr<const rule_book> rules;
};

/// The engine actors a session talks to.
struct session_links {
  queue_broker_actor broker;
  finalizer_actor finalizer;
  directory_actor directory;   ///< may be invalid: then no registration
  subscriber_actor subscriber; ///< may be invalid: then nobody is told
  /// Routes a cancel verdict request to the finalizer of the node that owns
  /// the claimed pair, when that is not this node (the claimer's node, as
  /// the queue tells it). May be invalid: then `finalizer` is always asked.
  node_gateway_actor gateway;
  /// Ends match sessions and tells whether the user is in one (checked
  /// before a join unless the session already knows the user is free). May
  /// be invalid: then ends are refused and joins are not checked.
  lifecycle_actor lifecycle;
  /// Parties (docs/groups.md): a user in a party joins only through it
  /// (a join of the session's own is refused `in_party`), and the party
  /// hears its members' match events from their sessions. May be null /
  /// invalid: then no party is consulted.
  std::shared_ptr<party_registry> party_members;
  party_hub_actor parties;
};

/// Spawns the session actor of `user`. It registers with the directory,
/// reports every state change (and every match event) to the subscriber,
/// and drives one join at a time:
///
///   idle ──join──► claiming ──queued──► queued ──match event──► matched
///                     │  ▲                 │ heartbeat "gone" + grace
///                     │  └──retry──┐       └──► claiming (new ticket)
///                     └──matched──► finalizing ──committed──► matched
///   cancel from any state ──► cancelled once certain (or matched: too late)
///
/// A cancel of a claimed ticket is decided by the finalizer that owns the
/// pair: this node's, or — when the queue names another node as the owner
/// (the claimer's, from the cancel's `in_flight` answer or a re-scan's
/// `claimed_by_other`) — that node's, asked through `links.gateway`. When
/// that owner cannot be asked, the session looks again every
/// `cfg.owner_recheck_ms` (owner, queue, database): matched when the
/// database shows the match; `cancelled` only once the queue showed the
/// ticket held by no claim and a database read started `commit_bound_ms`
/// later still shows none (no claim can commit any more); `failed` when
/// neither happened within `owner_wait_ms`. Never a guess.
///
/// Joins are idempotent per (queue, ticket): the same join again answers the
/// current state, also after the join ended `matched` or `cancelled` (then
/// nothing starts). After `failed`, or with another ticket once the join has
/// ended, a join starts over; while a join lasts, another ticket is refused
/// with `duplicate_ticket`.
///
/// A session that is not live stops itself after `cfg.idle_release_ms`
/// without a request (see session_config); `metrics->sessions_released`
/// counts it.
///
/// Timers are CAF delayed messages (tests drive them with the test
/// coordinator). Not idempotent: every call spawns a new actor.
session_actor spawn_session(caf::actor_system& sys, std::string user,
                            session_links links, session_config cfg = {});

} // namespace mm
