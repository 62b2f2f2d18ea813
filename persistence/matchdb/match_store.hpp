#pragma once

// The match persistence layer (docs/persistence.md): committed match
// sessions, their members (one active session per user, guarded by the
// database itself — invariant I1 of docs/design.md), a transactional outbox
// (one `match.created` event per committed match, written in the same
// transaction — invariant I5), and mutual likes: swipes per direction and
// exactly one match per unordered pair (invariant I4, guarded by the primary
// key of `mutual_matches`), and the end of a session: by a member
// (`end_session`) or by age (`expire_sessions`), each with exactly one
// `session.ended` event, and the retention of what is over (`prune`); group
// sessions (`commit_group`), their members' leaves and their backfill
// (`add_members`). Two implementations pass the conformance suite
// `match_store_conformance_test` (tests/conformance/): PostgreSQL (libpq)
// and an in-memory one for embedding and simulations.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/errc.hpp"
#include "core/outcome.hpp"
#include "persistence/matchdb/match_types.hpp"

namespace mm {

/// The type of the event that every committed match gets exactly once.
constexpr const char* match_created_type = "match.created";

/// The type of the event that a session ended by `end_session` or
/// `expire_sessions` gets exactly once.
constexpr const char* session_ended_type = "session.ended";

/// The type of the event that a member's leave of a group session gets
/// (one per member and session).
constexpr const char* member_left_type = "session.member_left";

/// The type of the event a session's fill gets (one per fill: `add_members`).
constexpr const char* members_changed_type = "session.members_changed";

/// The close reason that `expire_sessions` records.
constexpr const char* expired_reason = "expired";

/// The channel that a commit with new outbox events notifies (PostgreSQL:
/// `NOTIFY mm_outbox` inside the committing transaction).
constexpr const char* outbox_channel = "mm_outbox";

/// Default lease of `fetch_undelivered`.
constexpr uint32_t default_lease_ms = 30000;

/// Stages at which a commit asks whether a request is still wanted.
/// `after_create`: once per request, right after its session, member and
/// outbox rows were written inside the transaction. `before_commit`: for
/// every request still in the batch, immediately before COMMIT; when that
/// round withdraws any, their rows are removed and the survivors are asked
/// again (each round removes at least one, so there are at most as many
/// rounds as created requests plus one).
enum class commit_stage : uint8_t { after_create, before_commit };

/// Returns "after_create" or "before_commit".
const char* to_string(commit_stage x) noexcept;

/// Asked (from the calling thread) for each request still in the batch, with
/// its index in the caller's `requests`; false withdraws it: its rows are
/// never committed and its entry answers errc::cancelled. Must not block:
/// it runs inside the open transaction (the in-memory store even holds its
/// lock, so it must not call into a match store either). Typically it looks
/// the request's tickets up in the finalizer's thread-safe set of cancels.
using commit_check = std::function<bool(commit_stage, size_t)>;

/// A connection to the match store. One instance is used by one thread at a
/// time (its calls block on I/O for PostgreSQL: keep it in a detached actor or
/// worker); get one per worker from a `match_store_factory`. Every call is
/// its own transaction. Refusals: `invalid_argument` (malformed input,
/// nothing changed), `conflict` (a user already has an active session),
/// `not_found`, `forbidden` (not a member of the session),
/// `store_unavailable` (the database cannot be reached, after one reconnect
/// within the call), `protocol_error` (anything else the database refused).
class match_store {
 public:
  virtual ~match_store();

  /// Brings the schema up to date: runs every embedded migration
  /// (persistence/matchdb/migrations/NNNN_name.sql) not yet recorded in
  /// `schema_migrations`, in version order, each in its own transaction,
  /// serialized across processes by an advisory lock so concurrent starters
  /// do not race. Returns the names this call applied (empty when up to
  /// date). Fails with `protocol_error` when an applied migration's text
  /// changed since, or when the database holds a migration newer than any
  /// this binary knows (an older node after a newer one migrated: it does
  /// not start). Idempotent.
  virtual outcome<std::vector<std::string>> apply_migrations() = 0;

  /// Group commit: commits all `requests` in ONE transaction and answers one
  /// entry per request, in order. Each request either commits completely —
  /// session row, two member rows, exactly one `match.created` outbox event —
  /// or not at all: a request with a user already in an active session
  /// (also one committed earlier in the same batch) fails with `conflict`
  /// naming that user and does not fail the others; a malformed one fails
  /// with `invalid_argument`. When the transaction itself fails, every
  /// request fails (`store_unavailable` when the connection was lost) and
  /// nothing is written. A commit that creates events notifies
  /// `outbox_channel`. Idempotent per request: a request whose pair was
  /// committed before (e.g. a retry after a lost commit acknowledgement)
  /// answers that session with `created == false` and writes nothing — also
  /// when it was closed since (`close_session`), but not once it ENDED
  /// (`end_session`, `expire_sessions`): then the same pair with the same
  /// tickets commits a new session (users match again).
  ///
  /// Cancel checkpoints (problem 5): when `check` is set, the commit asks it
  /// whether each request it creates is still wanted, at two stages (see
  /// `commit_stage`), always with the request's index in `requests`. A
  /// request for which it answers false is withdrawn: none of its rows is
  /// ever visible to anybody (no session, no members, no event; its pair key
  /// and both users stay free) and it answers `cancelled` with detail
  /// "withdrawn at after_create" / "withdrawn at before_commit". Requests
  /// that create nothing — malformed, refused, retries of a pair committed
  /// before (`created == false`) — are never asked. Another request of the
  /// same batch with the pair of a withdrawn one (a duplicate, which would
  /// have answered its session) answers the same `cancelled` unasked. A
  /// commit whose requests were all withdrawn writes nothing and notifies
  /// nobody. A withdrawn request stays withdrawn: it answers `cancelled` even
  /// when the transaction fails afterwards, and is not written again when
  /// the PostgreSQL store runs the transaction again after a lost
  /// connection (which asks again about what it writes again). A check that
  /// throws fails the call like a failed transaction, with `protocol_error`
  /// ("commit matches: ..."), and writes nothing.
  ///
  /// Mutual requests (`match_request::mutual`, problem 6) commit the same
  /// rows plus one `mutual_matches` row for the unordered pair (pair_min /
  /// pair_max in byte order, see `pair_bounds`), all in the same transaction.
  /// Their members are written inactive: a mutual match never takes, and is
  /// never refused by, the one-active-session guard (its users may have many
  /// mutual matches and still be matched in a 1:1 queue; `active_session_of`
  /// does not report it). The pair is the key: a mutual request for a pair
  /// that already has a mutual match — committed before, earlier in the same
  /// batch, or concurrently by another connection (which this one waits
  /// for) — answers that session with `created == false` and writes nothing,
  /// whatever its tickets, queue or order of users; also when that session
  /// was closed since (a pair is matched once). Checkpoints, withdrawals and
  /// duplicates work as above, with "same pair" for "same key".
  std::vector<outcome<match_record>>
  commit_matches(const std::vector<match_request>& requests,
                 const commit_check& check = {});

  /// Commits a group match (problem 15, I12): ONE transaction writes the
  /// session (`user_a`/`user_b` its first two members), one member row per
  /// member (team, ticket) and exactly one `match.created` event whose
  /// payload lists every member with its team and ticket
  /// (`group_created_payload`), or nothing at all. A member already in an
  /// active session refuses the whole group with `conflict` naming every
  /// such user; a malformed request (`check_group_request`) is refused with
  /// `invalid_argument`. Idempotent per (queue, group): a retry answers the
  /// session it made with `created == false` until that session ends.
  /// `check` (index 0) is asked at both stages as for `commit_matches`; false
  /// withdraws the group whole (`cancelled`, nothing visible, every member
  /// free).
  outcome<match_record> commit_group(const group_match_request& req,
                                     const commit_check& check = {});

  /// `user` leaves the session `session_id` (`reason` as for
  /// `end_session`). A group session: ONE transaction marks the member
  /// inactive (free to match again at once) and writes one
  /// `session.member_left` event (`member_left_payload`) for every member;
  /// when fewer than the session's `min_players` stay, the session ends in
  /// the same transaction as `end_session` ends it (`ended_now`, one
  /// `session.ended`, ended_by = `user`). A pair's session ends, as
  /// `end_session(session_id, user, reason)` (`left_now` = `ended_now`). A
  /// member that left before, or a session that is over, answers the
  /// recorded state with `left_now == false`, writing nothing. Refusals as
  /// for `end_session` (`forbidden`: `user` was never a member). Idempotent.
  outcome<leave_record> leave_session(const std::string& session_id,
                                      const std::string& user,
                                      const std::string& reason);

  /// Backfill (problem 16, I1, I13): adds `req.members` to the active group
  /// session `req.session_id` in ONE transaction, which locks the session
  /// (as `leave_session` does), writes one active member row per new
  /// member (its ticket, team and attrs, after the roster's last, in
  /// request order) and exactly one `session.members_changed` event
  /// (`members_changed_event_id`, aggregate id = the session, payload
  /// `members_changed_payload`: every active member is told), or nothing at
  /// all. Answers the session with its roster after the fill and
  /// `added_now == true`. Refusals, each changing nothing, in this order:
  /// `invalid_argument` for a malformed request (`check_backfill_request`);
  /// `not_found` when there is no such session ("no session ...") or it is
  /// over ("... has ended"); then, as `check_fill` decides on the locked
  /// session: `invalid_argument` for a pair's session or another queue's;
  /// `conflict` naming every new member that was a member of the session
  /// and left ("was a member": a session does not take a leaver back) or is
  /// in it; `conflict` "over capacity ..." when the session would hold more
  /// than `max_players` active members or a team more than `team_size`;
  /// `conflict` naming every new member in another active session (the
  /// one-active-session guard, I1, worded as `commit_group`'s); and
  /// `store_unavailable` as every call. Of concurrent fills of one session
  /// each sees the ones before it: a session never goes over its maximum.
  /// Idempotent per (session, group): when every new member is in the
  /// roster, active, with the same ticket (a retry after a lost answer), it
  /// answers the session with `added_now == false` and writes nothing; once
  /// one of them left, a retry is refused ("was a member"). `check` (index
  /// 0) is asked at both stages as for `commit_group`, only when the call
  /// adds members; false withdraws the fill (`cancelled`, "withdrawn at
  /// ...", nothing visible). The event is leased and announced as
  /// `set_commit_lease` says, as a commit's is.
  outcome<backfill_record> add_members(const backfill_request& req,
                                       const commit_check& check = {});

  /// The outbox events of this connection's later commits are written
  /// leased for `ms` (attempt 1, not fetched before the lease lapses) and
  /// announced to nobody (no `outbox_channel` notification): the caller
  /// delivers them itself (the finalizer pushes them to its relay; problem
  /// 14, I5: a node that dies first leaves them to any relay once the lease
  /// lapsed). 0, the default: written free and announced. Not thread-safe,
  /// like the connection. Idempotent.
  virtual void set_commit_lease(uint32_t ms) {
    commit_lease_ms_ = ms;
  }

  /// Records that `from` swiped on `to`: upserts the (from, to) row of
  /// `likes` with kind LIKE (`like`) or DISLIKE. A later swipe in the same
  /// direction overwrites the earlier one: a DISLIKE withdraws a LIKE, and a
  /// LIKE after that is a fresh like (`updated_at` is the time the current
  /// kind was set; repeating the current kind changes nothing). In the same
  /// transaction, after the write, it reads whether `to` currently likes
  /// `from` (`opposite_like`) and whether the pair already has its mutual
  /// match (`matched`, `session_id`). The PostgreSQL store serializes the
  /// swipes of one unordered pair (a transaction-scoped advisory lock), so
  /// of two crossing LIKEs exactly one sees the other: a mutual like is never
  /// missed by both sides. It creates no match: a caller that sees
  /// `opposite_like && !matched` commits a mutual request. Refuses malformed
  /// ids (`check_id`) and `from == to` ("a user cannot swipe on itself") with
  /// `invalid_argument`, writing nothing. Idempotent.
  outcome<swipe_record> record_swipe(const std::string& from,
                                     const std::string& to, bool like);

  /// Returns the mutual match of the unordered pair {a, b} (active or
  /// closed, `created == false`), if it has one; `invalid_argument` for
  /// malformed ids or `a == b`. Reads only.
  outcome<std::optional<match_record>> mutual_match_of(const std::string& a,
                                                       const std::string& b);

  /// Closes an active session: status closed, members inactive (so both
  /// users can be matched again), `reason` recorded (at most 256 bytes).
  /// Writes no event. Returns true when this call closed it, false when it
  /// was closed or ended already; `not_found` for an unknown (or pruned)
  /// id, `invalid_argument` for a malformed id or reason. Idempotent.
  outcome<bool> close_session(const std::string& session_id,
                              const std::string& reason);

  /// Returns the active session of `user`, or nullopt when it has none (a
  /// mutual match's session is never reported: its members are inactive).
  /// `invalid_argument` for a malformed id. Reads only.
  outcome<std::optional<match_record>>
  active_session_of(const std::string& user);

  /// `active_session_of` for each of `users`, answers in the same order, in
  /// one round trip where the store can (PostgreSQL: one statement). A bad
  /// id fails its own entry only (`invalid_argument`); a failed round trip
  /// fails every other entry. Reads only.
  std::vector<outcome<std::optional<match_record>>>
  active_sessions_of(const std::vector<std::string>& users);

  /// Returns the session `session_id`, active, closed or ended, or nullopt
  /// when it does not exist (never did, or was pruned). `invalid_argument`
  /// for a malformed id. Reads only.
  outcome<std::optional<match_record>>
  find_session(const std::string& session_id);

  /// `user` ends the session `session_id` (either member may; `reason` as
  /// for `close_session`). When it is active, ONE transaction closes it
  /// (status closed, `closed_at` on the store's clock, `reason`, `ended_by`
  /// = `user`), sets both members inactive (both users can be matched again
  /// at once) and writes exactly one `session.ended` event
  /// (`session_ended_event_id`, aggregate id = the session, payload
  /// `session_ended_payload`), notifying `outbox_channel`; it answers
  /// `ended_now == true`. When it has ended before — by either member, with
  /// any reason, by expiry or by `close_session` — it answers the recorded
  /// final state with `ended_now == false` and writes nothing: of two
  /// concurrent ends exactly one answers `ended_now`. A mutual match's
  /// session ends the same way (its members are inactive already).
  /// Refusals, each changing nothing: `not_found` (no such session, also a
  /// pruned one), `forbidden` (`user` is not one of its two members),
  /// `invalid_argument` (malformed ids or reason). Idempotent.
  outcome<end_record> end_session(const std::string& session_id,
                                  const std::string& user,
                                  const std::string& reason);

  /// Ends many sessions in ONE transaction (one commit, one WAL flush, one
  /// notification): entry k answers `requests[k]` exactly as
  /// `end_session` would if the requests came one after the other in this
  /// order — a later request for a session that an earlier one of the
  /// batch ended answers that end (`ended_now == false`); malformed,
  /// unknown and foreign requests are refused alone and change nothing.
  /// One `session.ended` event per session ended. When the transaction
  /// itself fails, every valid request fails (`store_unavailable` when the
  /// connection was lost) and nothing is written. Concurrent batches lock
  /// their sessions in one order and do not deadlock. Idempotent.
  std::vector<outcome<end_record>>
  end_sessions(const std::vector<end_request>& requests);

  /// Ends up to `limit` (1..10000) active sessions created more than
  /// `max_age_ms` (> 0) ago on the store's clock, oldest first, each as
  /// `end_session` does (one `session.ended` event each) but with an empty
  /// `ended_by` and the reason `expired_reason`, all in one transaction that
  /// notifies `outbox_channel` when it ended any. Mutual-match sessions
  /// expire too. Concurrent callers (several nodes) skip the sessions that
  /// another one is ending (FOR UPDATE SKIP LOCKED): each session is ended
  /// once, and no caller waits for another. Returns what this call ended
  /// (all `ended_now`); `invalid_argument` for arguments out of range. Not
  /// idempotent: a later call ends what aged since.
  outcome<std::vector<end_record>> expire_sessions(uint32_t max_age_ms,
                                                   uint32_t limit);

  /// Deletes at most `limit` (1..100000) delivered outbox rows created more
  /// than `retention_ms` ago, and at most `limit` sessions (with their members)
  /// closed more than `retention_ms` ago — except the sessions of mutual
  /// matches (a pair is matched once: its session stays with its
  /// `mutual_matches` row) and sessions with an undelivered event (an event
  /// names an existing session until it is delivered). Undelivered events
  /// and active sessions are never touched. Each kind goes in its own short
  /// transaction that picks rows by primary key from a LIMITed subselect
  /// (SKIP LOCKED): no commit waits for it. The retention is the caller's
  /// choice: a pruned session is `not_found` for `end_session` and absent
  /// for `find_session`, and a replayed commit of its request creates a new
  /// session. Returns how many rows of each kind this call deleted; while a
  /// count equals `limit`, more may be left. `invalid_argument` for a limit
  /// out of range (any retention is fine; 0 prunes everything that may go).
  /// Idempotent.
  outcome<prune_counts> prune(uint32_t retention_ms, uint32_t limit);

  /// Keeps the outbox and the ended sessions small without row-by-row
  /// deletes (PostgreSQL; other stores have no partitions and answer an
  /// empty report). The outbox is partitioned by `created_at`, the history
  /// of ended sessions by `closed_at`, each into windows of `width_s`
  /// (1..2592000) seconds aligned to the epoch, plus a default partition
  /// that takes any row no window holds (so a commit or an end never fails
  /// for want of a partition; `prune` deletes rows there as before). For
  /// each table this creates the windows from the current one to `ahead`
  /// (1..64) ahead that are missing (a window that rows in the default
  /// partition overlap is left to the default), and drops each window that
  /// ended more than `retention_s` (0: never) ago and holds no undelivered
  /// event, nor a session that one names (such a window is `kept`); the
  /// report's counts are the sums over both tables. Every DDL statement is
  /// its own short transaction with a lock timeout: commits wait a moment
  /// for a drop, never fail; a lock not had in time ends the call early,
  /// and the next call goes on. Concurrent callers (several nodes) are
  /// serialized by an advisory lock; a caller that does not get it does
  /// nothing (`skipped`). Windows of another width that overlap are left
  /// alone. `invalid_argument` for a width or `ahead` out of range.
  /// Idempotent.
  outcome<partition_report>
  maintain_partitions(uint32_t width_s, uint32_t retention_s, uint32_t ahead);

  /// Claims up to `limit` (1..10000) undelivered events, oldest first, that
  /// nobody holds a lease on, and leases them for `lease_ms` (> 0). The claim
  /// is a lease column (`locked_until`), set in the same statement that
  /// selects the rows with FOR UPDATE SKIP LOCKED and committed at once, so
  /// no transaction stays open while the caller delivers (an actor must not
  /// hold one across messages) and several relays can run: while a lease
  /// lasts no other fetch returns the event; when it expires without
  /// `mark_delivered` (a relay died), the event is handed out again —
  /// at-least-once. `invalid_argument` for arguments out of range. Not
  /// idempotent: every call takes new leases.
  outcome<std::vector<outbox_event>>
  fetch_undelivered(uint32_t limit, uint32_t lease_ms = default_lease_ms);

  /// Marks events delivered (whoever holds their lease); unknown, malformed
  /// and already delivered ids are ignored. Returns how many this call
  /// marked (0 for a repeat). Idempotent.
  virtual outcome<size_t>
  mark_delivered(const std::vector<std::string>& event_ids) = 0;

  /// Waits up to `timeout_ms` for a commit on any connection to announce new
  /// outbox events. The first call starts listening; a notification that
  /// arrived since the previous call returns at once. Returns true when
  /// notified, false on timeout. Not idempotent: consumes notifications.
  virtual outcome<bool> wait_for_events(uint32_t timeout_ms) = 0;

  /// True when calls block the calling thread on I/O.
  virtual bool blocking() const noexcept = 0;

 protected:
  uint32_t commit_lease_ms_ = 0; ///< see set_commit_lease

  // The implementations' side of the calls above. The public functions check
  // every argument first (one set of rules for all stores), so these only
  // ever see well-formed input; `do_commit_matches` gets the valid requests
  // only and answers one entry each, in order. Its `check` (empty when the
  // caller gave none) takes indices into ITS `requests`: the public function
  // maps them to the caller's, and turns whatever the caller's check throws
  // into a std::runtime_error, which the implementations catch.

  /// `commit_matches` of valid requests (at least one).
  virtual std::vector<outcome<match_record>>
  do_commit_matches(const std::vector<match_request>& requests,
                    const commit_check& check)
    = 0;

  /// `close_session` with a valid id and reason.
  virtual outcome<bool>
  do_close_session(const std::string& session_id, const std::string& reason)
    = 0;

  /// `active_session_of` of a valid id.
  virtual outcome<std::optional<match_record>>
  do_active_session_of(const std::string& user) = 0;

  /// Valid ids only, one answer each in order. The default asks
  /// do_active_session_of for each (a decorator that does not forward this
  /// stays correct).
  virtual std::vector<outcome<std::optional<match_record>>>
  do_active_sessions_of(const std::vector<std::string>& users);

  /// `find_session` of a valid id.
  virtual outcome<std::optional<match_record>>
  do_find_session(const std::string& session_id) = 0;

  /// `fetch_undelivered`; `check_fetch_args` passed.
  virtual outcome<std::vector<outbox_event>>
  do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) = 0;

  // Not pure, so that a decorator that does not override them still
  // compiles; the defaults answer `protocol_error` ("... not supported by
  // this store"). Both stores override them; a decorator should forward them.

  /// `from` != `to`, both valid ids.
  virtual outcome<swipe_record>
  do_record_swipe(const std::string& from, const std::string& to, bool like);

  /// `a` != `b`, both valid ids.
  virtual outcome<std::optional<match_record>>
  do_mutual_match_of(const std::string& a, const std::string& b);

  // The session lifecycle, not pure for the same reason.

  /// Valid ids and reason; the implementation checks membership
  /// (`check_member`).
  virtual outcome<end_record> do_end_session(const std::string& session_id,
                                             const std::string& user,
                                             const std::string& reason);

  /// Valid requests only (at least one). The default ends them one by one
  /// with `do_end_session`, one transaction each.
  virtual std::vector<outcome<end_record>>
  do_end_sessions(const std::vector<end_request>& requests);

  /// `check_expire_args` passed.
  virtual outcome<std::vector<end_record>>
  do_expire_sessions(uint32_t max_age_ms, uint32_t limit);

  /// A valid group request; `check` as for do_commit_matches (index 0). The
  /// default answers `protocol_error` (not supported by this store).
  virtual outcome<match_record> do_commit_group(const group_match_request& req,
                                                const commit_check& check);

  /// Valid ids and reason; membership is the implementation's to check. The
  /// default answers `protocol_error`.
  virtual outcome<leave_record> do_leave_session(const std::string& session_id,
                                                 const std::string& user,
                                                 const std::string& reason);

  /// A valid fill (`check_backfill_request`); the implementation locks the
  /// session and applies `check_fill`. `check` as for do_commit_group. The
  /// default answers `protocol_error`.
  virtual outcome<backfill_record> do_add_members(const backfill_request& req,
                                                  const commit_check& check);

  /// `check_prune_args` passed.
  virtual outcome<prune_counts> do_prune(uint32_t retention_ms, uint32_t limit);

  /// The arguments of `maintain_partitions` passed their checks. The
  /// default: no partitions, an empty report.
  virtual outcome<partition_report> do_maintain_partitions(uint32_t width_s,
                                                           uint32_t retention_s,
                                                           uint32_t ahead);
};

/// Makes connections to one match store. Thread-safe.
class match_store_factory {
 public:
  virtual ~match_store_factory();

  /// Opens a new connection. Never fails: an unreachable database shows as
  /// `store_unavailable` on the calls, and the connection tries again on
  /// each call. Not idempotent: every call opens another connection.
  virtual std::unique_ptr<match_store> connect() = 0;

  /// A short description for logs, e.g. "postgres host=... dbname=...".
  virtual std::string describe() const = 0;

  /// The commit bound, in ms: a transaction whose caller asked its last
  /// checkpoint (`commit_stage::before_commit`) at time t has either become
  /// visible to every later reader or never will by t + this bound. A cancel
  /// whose owner node cannot be asked waits this long after the queue shows
  /// its ticket held by no claim before it trusts "no match" in the database
  /// (docs/engine.md). UINT32_MAX: no bound known (such a cancel is never
  /// answered `cancelled` from the database). The default knows nothing.
  virtual uint32_t commit_bound_ms() const {
    return UINT32_MAX;
  }
};

/// Settings of the PostgreSQL store.
struct pg_options {
  /// A libpq connection string or URI ("host=... port=... dbname=...").
  /// Its own settings win over the timeouts below.
  std::string conninfo;
  /// Bound of one connection attempt (libpq `connect_timeout`, whole seconds,
  /// at least 2 as libpq requires).
  uint32_t connect_timeout_ms = 2000;
  /// Server-side bound of one statement (0: the server's default). A
  /// statement that hits it fails with `store_unavailable`. The same bound
  /// is set as `idle_in_transaction_session_timeout`: a transaction whose
  /// next statement (a COMMIT, say) does not arrive within it is ended by
  /// the server, so a COMMIT cannot land long after its node stopped
  /// deciding. The commit bound (match_store_factory::commit_bound_ms) is
  /// twice this value: the COMMIT's arrival plus its own run.
  uint32_t statement_timeout_ms = 5000;
};

/// Returns a factory for PostgreSQL connections (libpq).
std::shared_ptr<match_store_factory> make_pg_match_store(pg_options opts);

/// Returns a factory whose connections all share ONE in-memory data set
/// with the semantics of the PostgreSQL store. Every call creates a new,
/// empty data set.
std::shared_ptr<match_store_factory> make_memory_match_store();

// -- shared rules of both implementations -------------------------------------

/// Checks a request; `code == errc::none` when it is well-formed.
failure check_match_request(const match_request& req);

/// Checks a group request: queue and group ids, 2..64 members of distinct
/// valid users with valid tickets and attrs, teams below 64, min_players
/// in 2..members. `code == errc::none` when it is well-formed.
failure check_group_request(const group_match_request& req);

/// The most members one group session holds (core/shape.hpp's
/// max_match_players).
constexpr size_t max_group_members = 64;

/// Checks a fill: session, queue and group ids; max_players in 2..64;
/// team_size 0 or one that divides max_players into two teams or more;
/// 1..63 new members of distinct valid users with valid tickets and attrs,
/// each in a team below max_players / team_size (team 0 without teams).
/// `code == errc::none` when it is well-formed.
failure check_backfill_request(const backfill_request& req);

/// The rule both stores apply to a valid fill under the session's lock,
/// `session` as it is then (with its roster): true when every new member
/// is in the roster, active, with its ticket (the fill was made before);
/// false when the fill may be written (the one-active guard against other
/// sessions is then the store's); else the refusal `add_members` names
/// (ended, a pair, another queue, a member before, over capacity).
outcome<bool> check_fill(const match_record& session,
                         const backfill_request& req);

/// Checks a user or session id: 1..128 bytes of UTF-8, no control
/// characters. `code == errc::none` when valid.
failure check_id(const std::string& what, const std::string& id);

/// Checks a close reason: at most 256 bytes of UTF-8 without NUL (may be
/// empty). `code == errc::none` when valid.
failure check_close_reason(const std::string& reason);

/// Checks the arguments of `fetch_undelivered`.
failure check_fetch_args(uint32_t limit, uint32_t lease_ms);

/// Checks the arguments of `expire_sessions`.
failure check_expire_args(uint32_t max_age_ms, uint32_t limit);

/// The widest outbox partition `maintain_partitions` takes: 30 days.
constexpr uint32_t max_partition_width_s = 30 * 86400;

/// Checks the arguments of `prune`.
failure check_prune_args(uint32_t retention_ms, uint32_t limit);

/// `forbidden` unless `user` is one of the members of `session` (its two
/// users, or any member of a group session, active or not);
/// `code == errc::none` when it is.
failure check_member(const match_record& session, const std::string& user);

/// The idempotency key of a request: queue and both user:ticket pairs, in a
/// canonical order (A–B and B–A give the same key).
std::string match_key(const match_request& req);

/// The unordered pair {a, b} as (min, max) in byte order — the order of
/// `COLLATE "C"` and of the engine's pair key `min(a,b):max(a,b)`.
std::pair<std::string, std::string> pair_bounds(const std::string& a,
                                                const std::string& b);

/// The event id of a session's `match.created` event.
std::string match_created_event_id(const std::string& session_id);

/// The payload of the `match.created` event of a session: a JSON object
/// with event_id, type, session_id, queue and users [{user, ticket}, ...].
std::string match_created_payload(const std::string& session_id,
                                  const match_request& req);

/// The idempotency key of a group request: queue and group id (a pair's
/// key has a tab in it, a group's does not, so they never collide).
std::string group_key(const group_match_request& req);

/// The payload of a group session's `match.created` event: event_id, type,
/// session_id, queue, group, users [{user, ticket, team}, ...] (every
/// member, in the request's order) and teams [[user, ...], ...] (a lobby
/// is one team).
std::string group_created_payload(const std::string& session_id,
                                  const group_match_request& req);

/// The event id of `user`'s `session.member_left` event in `session_id`.
std::string member_left_event_id(const std::string& session_id,
                                 const std::string& user);

/// The payload of a `session.member_left` event: event_id, type,
/// session_id, queue, user (who left), reason, remaining (members still
/// in) and users (every member of the session, as in match.created, with
/// `active`): all of them are told.
std::string member_left_payload(const match_record& session,
                                const std::string& user,
                                const std::string& reason);

/// The event id of the `session.members_changed` event of the fill
/// `group` of `session_id` (one per fill).
std::string members_changed_event_id(const std::string& session_id,
                                     const std::string& group);

/// The payload of the `session.members_changed` event of the fill `req`,
/// `session` as the fill leaves it: event_id, type, session_id, queue,
/// group (the fill's), added [{user, ticket, team}] (the new members),
/// users [{user, ticket, team}] (every active member, in roster order: the
/// old ones, then the new; all of them are told), members (the whole
/// roster, with `active`), remaining (how many are active) and teams
/// [[user, ...], ...] (the active members by team; a lobby is one team).
std::string members_changed_payload(const match_record& session,
                                    const backfill_request& req);

/// The event id of a session's `session.ended` event.
std::string session_ended_event_id(const std::string& session_id);

/// The payload of the `session.ended` event of `session`: a JSON object
/// with event_id, type, session_id, queue, users [{user, ticket}, ...] (as
/// in `match_created_payload`), ended_by and reason.
std::string session_ended_payload(const match_record& session,
                                  const std::string& ended_by,
                                  const std::string& reason);

/// A fresh UUID in canonical text form: version 7 (time-ordered, 74 random
/// bits). Not idempotent.
std::string new_session_id();

/// The names of the embedded migrations ("0001_init", ...), in the order
/// they are applied.
std::vector<std::string> known_migrations();

} // namespace mm
