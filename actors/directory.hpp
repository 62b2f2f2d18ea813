#pragma once

// The node's user -> session map: where the outbox relay hands match events
// to the sessions of the users of one node.

#include <cstddef>

#include "messages/type_ids.hpp"

namespace mm {

/// Events kept per user that has no session here yet (oldest dropped first).
constexpr size_t directory_pending_limit = 64;

/// Spawns the directory of this node (interface in messages/type_ids.hpp).
/// - `register_atom, user, session`: points `user` at `session` and monitors
///   it; a session that goes down is dropped from every entry pointing at
///   it. Events kept for `user` are handed to the session at once, in the
///   order they arrived. Idempotent.
/// - `unregister_atom, user, session`: removes the entry only while it still
///   points at `session` (a stale unregister never removes a newer session).
///   Idempotent.
/// - `deliver_atom, match_event`: sends `deliver_atom, event` to the session
///   of `user_a` and of `user_b`; for a user without a session here it keeps
///   the event (at most `directory_pending_limit` per user, one copy per
///   event id) until the user registers. Answers how many sessions it
///   reached now. Idempotent per event id at the receiving sessions (they
///   dedupe; the relay delivers at least once).
/// Kept events live only in memory: they are lost with the node (the Redis
/// Stream sink and the database still have them). Not idempotent: every
/// call spawns a new directory.
directory_actor spawn_directory(caf::actor_system& sys);

} // namespace mm
