#pragma once

// Match events as the database has them: the `match.created` event of a
// session (the gateway's replay), and what an event a peer node delivers
// may be (docs/cluster.md, "Security"). No CAF here.

#include <optional>
#include <string>

#include "messages/engine_types.hpp"
#include "persistence/matchdb/match_types.hpp"

namespace mm {

/// The `match.created` event of the session `m`, as the relay delivers it
/// (same event id and payload as the outbox row's); of a group session
/// that members left since, it names only the active members.
match_event event_of(const match_record& m);

/// The `session.members_changed` event of the fill `req` of the session
/// `s` (as the fill left it), as the relay delivers it: to every active
/// member.
match_event members_changed_event(const match_record& s,
                                  const backfill_request& req);

/// The event a peer's `deliver_atom, user, ev` may hand to `user`, given the
/// session `rec` the database has under `ev.session_id`: empty unless
/// `user` is one of its members and `ev.event_id` is the session's id of
/// `ev.type`. A pair's `match.created` is rebuilt from `rec` (payload
/// included); a group's keeps the peer's roster (the one it was made with:
/// members may have left or come since), each of its users a member of
/// `rec`;
/// a `session.ended` needs `rec` closed, and keeps the peer's payload (who
/// ended it and why are not in `rec`) with the users, tickets and queue of
/// `rec`. A `session.members_changed` (an id of `rec`'s fills) keeps the
/// peer's payload (the fill is not in `rec`) with `rec`'s queue; `user`
/// may have left, or the session ended, since the fill. A
/// `session.member_left` (an id of `rec`'s leaves) likewise.
std::optional<match_event> as_recorded(const std::string& user,
                                       const match_event& ev,
                                       const match_record& rec);

} // namespace mm
