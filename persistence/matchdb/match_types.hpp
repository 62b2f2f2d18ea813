#pragma once

// Plain records of the match persistence layer
// (persistence/matchdb/match_store.hpp). No CAF here: the actors wrap these
// in their own messages.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mm {

/// A claimed pair that the finalizer wants committed as a match session.
/// `queue`, users and tickets: 1..128 bytes of UTF-8 without control
/// characters (queue at most 64, tickets at most 300: store tickets); attrs:
/// opaque UTF-8 without NUL, at most 4096 bytes.
/// (queue, {user_a:ticket_a, user_b:ticket_b}) is the idempotency key of the
/// commit: the same pair committed again returns the session it created.
struct match_request {
  std::string queue;
  std::string user_a;
  std::string ticket_a;
  std::string attrs_a;
  std::string user_b;
  std::string ticket_b;
  std::string attrs_b;
  /// A mutual like: also records the pair in `mutual_matches` (unique per
  /// unordered pair) and does not take the users' one active membership
  /// (a user may have many mutual matches, but one live call). The pair,
  /// not the tickets, is then the idempotency key: a pair that has a mutual
  /// match answers that session (`created == false`), whatever its tickets.
  bool mutual = false;
};

/// What `match_store::record_swipe` saw right after it wrote the swipe, in
/// the same transaction.
struct swipe_record {
  /// The other side's current swipe on this user is a LIKE (not withdrawn).
  bool opposite_like = false;
  /// The pair already has its mutual match (`session_id`).
  bool matched = false;
  /// The pair's mutual match session; empty unless `matched`.
  std::string session_id;
};

/// One member of a group match's session (docs/groups.md). Ids and attrs
/// as in `match_request`.
struct session_member {
  std::string user;
  std::string ticket; ///< the queue ticket it came with (its party's)
  std::string attrs;
  uint32_t team = 0;  ///< 0-based team (0 in a lobby), below 64
  bool active = true; ///< false once it left the session
};

/// A claimed group that the finalizer wants committed as one session of N
/// members (problem 15 of docs/design.md). (queue, group) is the
/// idempotency key of the commit, as a pair's users and tickets are.
struct group_match_request {
  std::string queue;
  std::string group; ///< the claim's group id (1..128 bytes, an id)
  /// The session ends when fewer members than this stay (2..members).
  uint32_t min_players = 2;
  std::vector<session_member> members; ///< 2..64 distinct users
};

enum class session_status : uint8_t { active, closed };

/// Returns "active" or "closed".
inline const char* to_string(session_status x) noexcept {
  return x == session_status::active ? "active" : "closed";
}

/// A committed match session. Times are ms since the epoch on the store's
/// clock (the database server's for PostgreSQL), never a node's.
struct match_record {
  std::string session_id; ///< random UUID (v4) text
  std::string queue;
  std::string user_a;
  std::string ticket_a;
  std::string user_b;
  std::string ticket_b;
  session_status status = session_status::active;
  int64_t created_at = 0;
  int64_t closed_at = 0; ///< 0 while active
  std::string close_reason;
  /// True when this call committed the session; false when an earlier call
  /// with the same request did (a retry), or when the record was only read.
  bool created = false;
  /// A group match's session: the claim's group id, the fewest members
  /// that keep it going, and every member (the ones that left inactive);
  /// `user_a`/`user_b` are then its first two members. Empty for a pair.
  std::string group;
  uint32_t min_players = 0;
  std::vector<session_member> members;
};

/// New members for an active group session (backfill, docs/groups.md):
/// the claim found tickets for its open seats, and the finalizer adds them
/// in one transaction (`match_store::add_members`). (session, group) is the
/// idempotency key of the fill, as (queue, group) is a group commit's.
struct backfill_request {
  std::string session_id;
  std::string queue;        ///< must be the session's queue
  std::string group;        ///< the claim's group id (an id, 1..128 bytes)
  uint32_t max_players = 0; ///< the queue's players.max (2..64)
  uint32_t team_size = 0;   ///< the queue's team size; 0: no teams
  /// The new members (team 0-based, 0 without teams), 1..63 distinct
  /// users; ids, tickets and attrs as in `match_request`.
  std::vector<session_member> members;
};

/// What `match_store::add_members` answers.
struct backfill_record {
  match_record session;   ///< after the call, with its roster
  bool added_now = false; ///< this call added them (false: a retry found
                          ///< them added before)
};

/// What `match_store::leave_session` answers.
struct leave_record {
  match_record session;   ///< the session after the call
  bool left_now = false;  ///< this call took the user out
  bool ended_now = false; ///< and that ended the session (too few stay)
};

/// One request of `match_store::end_sessions`: `user` ends `session_id`
/// with `reason`, as `end_session(session_id, user, reason)` would.
struct end_request {
  std::string session_id;
  std::string user;
  std::string reason;
};

/// What `match_store::end_session` and `expire_sessions` answer: the
/// session in its final state (status closed) and who ended it, why.
struct end_record {
  match_record session;
  /// The member that ended it; empty when the engine did (expiry) or when
  /// it was closed by `close_session`.
  std::string ended_by;
  /// The recorded close reason.
  std::string reason;
  /// True when this call ended it (and wrote its `session.ended` event);
  /// false when it had ended before (the answer is the recorded state).
  bool ended_now = false;
};

/// What `match_store::prune` deleted.
struct prune_counts {
  size_t outbox = 0;   ///< delivered outbox rows
  size_t sessions = 0; ///< closed sessions (with their members)
};

/// What `match_store::maintain_partitions` did to the time partitions of
/// the outbox and of the session history (sums over both tables).
struct partition_report {
  uint32_t created = 0; ///< time partitions created ahead
  uint32_t dropped = 0; ///< old partitions dropped (their rows with them)
  /// Old partitions kept because they still hold an undelivered event, or a
  /// session that one names.
  uint32_t kept = 0;
  uint32_t partitions = 0; ///< time partitions there now (not the default)
  bool skipped = false;    ///< another caller was maintaining: nothing done
};

/// One row of the transactional outbox.
struct outbox_event {
  int64_t seq = 0;          ///< outbox row id: increasing in insert order
  std::string event_id;     ///< unique and stable; consumers dedupe by it
  std::string aggregate_id; ///< the session id
  std::string type;         ///< "match.created", "session.ended", ...
  std::string payload;      ///< JSON object text
  int64_t created_at = 0;
  int64_t delivered_at = 0; ///< 0 while undelivered
  int64_t locked_until = 0; ///< end of the current lease, 0 if never leased
  int32_t attempts = 0;     ///< how often the event was leased
};

} // namespace mm
