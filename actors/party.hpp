#pragma once

// One party (docs/groups.md, "Parties"): users who queue together as one
// ticket of a queue with a shape. The party owns its ticket in the queue —
// the claim, the re-scans that keep it present, the commit of the groups
// its claims make, a member's truthful cancel — and tells every member each
// change as a `party.updated` event.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/cancel_registry.hpp"
#include "actors/party_registry.hpp"
#include "core/metrics.hpp"
#include "core/rules.hpp"
#include "messages/type_ids.hpp"

namespace mm {

/// Settings of a party (the engine copies them from its session settings).
struct party_config {
  std::string node = "node-1";   ///< recorded in the party's tickets
  uint32_t ttl_ms = 30000;       ///< presence window of the ticket
  uint32_t heartbeat_ms = 10000; ///< re-scan period while queued (< ttl_ms)
  /// Bound of a request to the broker, the lifecycle actor or the group
  /// finalizer; also how often a cancel of a claimed ticket looks again.
  uint32_t request_timeout_ms = 30000;
  uint32_t recheck_ms = 1000;
  /// A re-scan that finds the ticket gone while the database shows no
  /// session of the leader waits this long for a late match event (a
  /// session another node committed and that already ended) before the
  /// ticket is filed anew; 0: at once.
  uint32_t gone_grace_ms = 5000;
  /// An open party with no request and no change for this long closes
  /// (its members are told); 0: never.
  uint32_t idle_close_ms = 3600000;
  /// The queues' rules and shapes; a party queues only a queue with a
  /// shape.
  std::shared_ptr<const rule_book> rules;
  std::shared_ptr<engine_metrics> metrics; ///< may be null
};

/// The engine actors a party talks to.
struct party_links {
  queue_broker_actor broker;
  group_finalizer_actor finalizer;
  directory_actor directory; ///< party.updated events; may be invalid
  lifecycle_actor lifecycle; ///< in-session checks; may be invalid
  std::shared_ptr<cancel_registry> cancels;
  std::shared_ptr<party_registry> registry;
  /// The live session actor of a user on this node, invalid if none (a
  /// joining member must not be in a join of its own).
  std::function<session_actor(const std::string&)> session_of;
  /// This node's gateway: calls for parties other nodes hold (may be
  /// invalid: parties of this node only).
  node_gateway_actor gateway;
  /// The ready check of this node, nudged when a member answers one of
  /// its proposals here (may be invalid: it polls).
  ready_check_actor ready;
};

/// Spawns party `id` led by `leader` (already entered in the registry),
/// with invite code `code`. `solo`: a party of one made for one ticket,
/// which closes when that ticket ends. Its states:
///
///   open ──queue──► claiming ──queued──► queued ──re-scan──► claiming
///    ▲ ▲               │ in a claimed group             │
///    │ │               ▼                                ▼ in a group
///    │ └─ undone ── finalizing ──match.created──► matched
///    │    (removed)    ▲ (ours: the group finalizer; another's: wait)
///    └── session.ended ┴──────────────────────────────────┘
///
/// A cancel (any member, or the give-up time) removes a waiting ticket; a
/// claimed one is cancelled at the group finalizer's checkpoints and looked
/// at again every `recheck_ms` until the queue shows it removed (`open`,
/// cancelled) or the database shows the match (`matched`: too late). Not
/// idempotent: every call spawns a party.
party_actor spawn_party(caf::actor_system& sys, std::string id,
                        std::string leader, std::string code, bool solo,
                        party_links links, party_config cfg);

} // namespace mm
