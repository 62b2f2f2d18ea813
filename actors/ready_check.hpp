#pragma once

// The ready check (problem 16 of docs/design.md, docs/groups.md "Ready
// check"): a claimed group of a queue with `accept_timeout_s` is first a
// proposal. Its members are told (`match.proposed`) and answer through the
// queue store (lua/group_answer.lua); the holder, this actor on the node
// whose claim made the group, commits it once all accepted, or the store
// settles it by the rule (decliners and, at the deadline, the silent
// removed and told; every other ticket back at its original place).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

/// Settings of the ready check.
struct ready_check_config {
  std::string node = "node-1"; ///< named in the proposals' events
  /// Commits the accepted proposals, and every group without a ready check
  /// (handed on as it came).
  group_finalizer_actor finalizer;
  queue_broker_actor broker;
  /// The proposals' events (`match.proposed`, `match.proposal_ended`) go
  /// through it to every member; may be invalid (nobody told).
  directory_actor directory;
  /// How often open proposals are looked at in the store (answers given on
  /// other nodes, the deadline); an answer given here is looked at at once.
  uint32_t poll_ms = 200;
  /// Bound of a request to the broker.
  uint32_t request_timeout_ms = 10000;
  std::shared_ptr<engine_metrics> metrics; ///< may be null
  /// Test hook (matchd's failpoint kill_holding_proposals, docs/matchd.md
  /// "Failpoints"): called with how many open proposals, not yet decided,
  /// this actor holds each time it makes one. Empty (the default): nothing
  /// is counted.
  std::function<void(std::size_t)> on_held;
};

/// Spawns the ready check. `finalize_atom, group_commit` with `accept_ms`
/// 0 is the group finalizer's call (delegated); otherwise the group is
/// proposed: each member gets `match.proposed` (proposal id, queue, every
/// member with its ticket and team, the teams, `deadline_ms` in Unix ms),
/// the answer comes once the proposal ended: committed as any group's,
/// or not (`removed` with `reasons`: declined, timed_out, removed). Each
/// member hears `match.proposal_ended` with its outcome: `matched`,
/// `requeued`, `declined`, `timed_out` or `removed` (a lapsed presence).
/// A store that does not answer is asked again at the next poll; if this
/// node dies, the proposal's lease (deadline plus the claim hold) lapses
/// and the queue settles it by the same rule (lib/proposals.lua).
/// Idempotent per group: a second finalize of an open proposal waits for
/// the same end. Not idempotent as a spawn: every call spawns an actor.
ready_check_actor spawn_ready_check(caf::actor_system& sys,
                                    ready_check_config cfg);

} // namespace mm
