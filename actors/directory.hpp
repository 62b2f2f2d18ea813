#pragma once

// The node's user -> session map: where the outbox relay hands match events
// to the sessions of the users of one node.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/metrics.hpp"
#include "messages/type_ids.hpp"

namespace mm {

/// Events kept per user that has no session here yet (oldest dropped first).
constexpr size_t directory_pending_limit = 64;

/// Settings of the directory: how long and how many events it keeps for
/// users without a session here (docs/engine.md, "Idle users cost nothing").
struct directory_config {
  /// A kept event is dropped this long after it arrived (0: only the
  /// bounds below drop it; for tests). A user away longer learns of its
  /// match from the stores: the in_session refusal of its next join, the
  /// replay of its active match when its session registers in a cluster,
  /// the Redis Stream sink.
  uint32_t parked_ttl_ms = 60000;
  size_t parked_per_user = directory_pending_limit; ///< oldest dropped first
  size_t parked_max = 100000; ///< all users together; oldest dropped first
  /// Gauges kept here (null: none): `directory_users`, `parked_events`.
  std::shared_ptr<engine_metrics> metrics;
};

/// Spawns the directory of this node (interface in messages/type_ids.hpp).
/// - `register_atom, user, session`: points `user` at `session` and monitors
///   it; a session that goes down is dropped from every entry pointing at
///   it. Events kept for `user` are handed to the session at once, in the
///   order they arrived. With a gateway attached, the gateway is told
///   (`register_atom, user`: the cluster's user -> node map and the replay of
///   the user's active match). Idempotent.
/// - `unregister_atom, user, session`: removes the entry only while it still
///   points at `session` (a stale unregister never removes a newer session);
///   a removed entry (also one of a session that went down) is reported to
///   the gateway (`unregister_atom, user`). Idempotent.
/// - `deliver_atom, match_event`: sends `deliver_atom, event` to the session
///   of `user_a` and of `user_b` here. A user without a session here is
///   routed through the attached gateway to its node (`route_atom`); when
///   there is no gateway, the user is connected nowhere, or its node could
///   not be reached, the event is kept here (one copy per event id, at most
///   `cfg.parked_per_user` per user and `cfg.parked_max` in all, for at most
///   `cfg.parked_ttl_ms`) until the user registers. Answers a
///   `delivery_report` summed over both users: `failed > 0` means a user's
///   node is live but was not reached (the relay then leaves the event
///   unmarked). Idempotent per event id at the receiving sessions (they
///   dedupe; the relay delivers at least once).
/// - `deliver_atom, vector<match_event>`: each event as above, in one
///   message (a relay's batch); answers one `delivery_report` per event, in
///   their order, once all are known. Idempotent per event id.
/// - `deliver_atom, user, match_event`: the same for one user, here only
///   (a peer's gateway and the reconnect replay use it). Idempotent per
///   event id.
/// - `attach_atom, gateway`: routes through `gateway` from now on; an
///   invalid handle turns routing off. Idempotent.
/// - `tick_atom`: its own timer, armed while events are kept: drops those
///   past `cfg.parked_ttl_ms`. Idempotent.
/// Kept events live only in memory: they are lost with the node (the Redis
/// Stream sink and the database still have them; a user's active match is
/// replayed when it registers anywhere). Not idempotent: every call spawns a
/// new directory.
directory_actor spawn_directory(caf::actor_system& sys,
                                directory_config cfg = {});

} // namespace mm
