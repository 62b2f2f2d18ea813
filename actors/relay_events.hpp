#pragma once

// The two forms an outbox event takes on its way out of the outbox relay
// (actors/outbox_relay.cpp): the match event that sessions get, read from
// the row's JSON payload, and the entry it gets in the external stream.
// Internal to the relay; no CAF here.

#include <cstdint>
#include <string>
#include <vector>

namespace mm {

struct outbox_event;
struct match_event;

namespace relay_detail {

/// Reads the payload {event_id, type, session_id, queue, users: [{user,
/// ticket}, {user, ticket}]} of `ev` into `out`; the row's own columns win
/// for the ids. False (and `why`) for a payload that is not that shape;
/// never throws.
bool parse_event(const outbox_event& ev, match_event& out, std::string& why);

/// The XADD of one event to `stream`; with `maxlen > 0` the stream is
/// capped at about that many entries (`MAXLEN ~`: Redis trims whole nodes,
/// cheaply). Not idempotent: each XADD appends an entry (consumers dedupe by
/// event_id).
std::vector<std::string> xadd(const std::string& stream, uint64_t maxlen,
                              const outbox_event& ev, const match_event& m);

} // namespace relay_detail

} // namespace mm
