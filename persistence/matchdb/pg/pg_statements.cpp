// The SQL text of the PostgreSQL match store's prepared statements: group
// commit, withdrawal, session lookups, swipes, the outbox lease, the
// session lifecycle (end, expire, prune), group matches (commit, leave) and
// their backfill.

#include "persistence/matchdb/pg/pg_statements.hpp"

namespace mm::pg {

// The SQL below is laid out by hand, one clause a line.
// clang-format off

/// ms since the epoch of a timestamptz column, 0 for NULL.
#define MM_MS(col)                                                             \
  "coalesce(floor(extract(epoch FROM " col ") * 1000)::int8, 0)"

/// The columns that `read_session` parses, for a table aliased `s`
/// (`session_cols` of them, pg_util.hpp), with `roster` the expression of a
/// group's members as JSON text (NULL for a pair).
#define MM_SESSION_COLS_WITH(roster)                                           \
  "s.id, s.queue, s.user_a, s.ticket_a, s.user_b, s.ticket_b, s.status, "     \
  MM_MS("s.created_at") ", " MM_MS("s.closed_at")                             \
  ", coalesce(s.close_reason, ''), s.match_key, coalesce(s.group_id, ''), "   \
  "coalesce(s.min_players, 0), " roster

/// A group's members as `read_session` parses them, in request order, from
/// session_members for the session `sid`: a JSON array of {user, ticket,
/// attrs, team, active}. `agg` and `obj`: the json or jsonb functions.
#define MM_ROSTER_OF(sid, agg, obj)                                            \
  "(SELECT " agg "(" obj "('user', r.user_id, 'ticket', r.ticket,"            \
  " 'attrs', r.attrs, 'team', r.team, 'active', r.active) ORDER BY r.ord)"    \
  " FROM session_members r WHERE r.session_id = " sid ")"

/// A live session's roster: only a group's is looked up (a pair's is NULL
/// without a look-up: the pair paths pay nothing for groups).
#define MM_LIVE_ROSTER                                                         \
  "CASE WHEN s.group_id IS NOT NULL THEN "                                    \
  MM_ROSTER_OF("s.id", "json_agg", "json_build_object") "::text END"

/// A live session, its roster read in the same snapshot.
#define MM_SESSION_COLS MM_SESSION_COLS_WITH(MM_LIVE_ROSTER)

/// An ended session from session_history: the roster the end wrote.
#define MM_HISTORY_COLS MM_SESSION_COLS_WITH("s.members::text")

/// A live session that the statement locks: no roster. The snapshot of a
/// statement that waited for a row lock predates the wait, so a roster read
/// with the lock could miss a leave committed meanwhile; the caller reads
/// the rosters of the groups it locked in a statement of its own
/// (`mm_roster`, pg_match_store::load_rosters).
#define MM_LOCKED_COLS MM_SESSION_COLS_WITH("NULL::text")

/// `cols` and, after them, who ended the session ('' for nobody).
#define MM_ENDED_COLS(cols) cols ", coalesce(s.ended_by, '')"

/// A CTE that commits the statement's own transaction without waiting for
/// the WAL flush (`synchronous_commit` off for this transaction only; join
/// it into the statement: an unreferenced CTE is not run). For leases and
/// delivery marks: one lost in a crash only hands its events out again,
/// which at-least-once delivery allows (consumers dedupe by event id);
/// matches and ends always wait for the flush.
#define MM_NO_FLUSH                                                            \
  "nf AS (SELECT set_config('synchronous_commit', 'off', true))"

/// Inserts the outbox_pending row of each event that the CTE `o` wrote
/// (o: RETURNING id, created_at, event_id, aggregate_id): the event is to
/// deliver until the mark deletes that row (0007_compact_rows.sql). With a
/// lease (`lease` ms > 0) the event is the committing node's to deliver
/// first (set_commit_lease).
#define MM_PENDING_OF_O(lease)                                                 \
  "INSERT INTO outbox_pending (id, created_at, event_id, aggregate_id,"       \
  " locked_until, attempts)"                                                  \
  " SELECT id, created_at, event_id, aggregate_id,"                           \
  " CASE WHEN " lease " > 0"                                                  \
  " THEN now() + " lease " * interval '1 millisecond' END,"                   \
  " CASE WHEN " lease " > 0 THEN 1 ELSE 0 END FROM o"

/// What the outbox insert of an event answers for MM_PENDING_OF_O.
#define MM_OUTBOX_RETURNING " RETURNING id, created_at, event_id, aggregate_id"

/// `col` older than $1 ms on the database clock.
#define MM_OLDER(col) col " < now() - $1::int8 * interval '1 millisecond'"

/// The commit of a batch (mm_commit, below), `conflict` what a taken
/// match key does.
#define MM_COMMIT(conflict)                                                    \
   "WITH req AS ("                                                             \
   "  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],"    \
   "    $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],"           \
   "    $10::text[], $11::text[], $12::text[], $13::text[], $14::boolean[])"   \
   "    WITH ORDINALITY AS r(id, event_id, match_key, queue, user_a,"          \
   "    ticket_a, attrs_a, user_b, ticket_b, attrs_b, payload, pair_min,"      \
   "    pair_max, mutual, idx)"                                                \
   "), mm AS ("                                                                \
   "  INSERT INTO mutual_matches (pair_min, pair_max, session_id)"             \
   "  SELECT pair_min, pair_max, id FROM req"                                  \
   "  WHERE mutual AND NOT EXISTS ("                                           \
   "    SELECT 1 FROM match_sessions x WHERE x.match_key = req.match_key)"     \
   "  ORDER BY pair_min COLLATE \"C\", pair_max COLLATE \"C\", idx"            \
   "  ON CONFLICT (pair_min, pair_max) DO NOTHING"                             \
   "  RETURNING session_id"                                                    \
   "), s AS ("                                                                 \
   "  INSERT INTO match_sessions (id, match_key, queue, user_a, ticket_a,"     \
   "                              attrs_a, user_b, ticket_b, attrs_b)"         \
   "  SELECT id, match_key, queue, user_a, ticket_a, attrs_a, user_b,"         \
   "         ticket_b, attrs_b"                                                \
   "  FROM req WHERE NOT mutual OR id IN (SELECT session_id FROM mm)"          \
   "  ORDER BY idx"                                                            \
   conflict                                                                    \
   "  RETURNING id, created_at"                                                \
   "), m AS ("                                                                 \
   "  INSERT INTO session_members (session_id, user_id, active)"               \
   "  SELECT s.id, u.user_id, NOT req.mutual"                                  \
   "  FROM s JOIN req ON req.id = s.id"                                        \
   "  CROSS JOIN LATERAL (VALUES (req.user_a), (req.user_b)) AS u (user_id)"   \
   "  ORDER BY u.user_id COLLATE \"C\""                                        \
   "), o AS ("                                                                 \
   "  INSERT INTO outbox (event_id, aggregate_id, type, payload_text,"     \
   "                     created_at)"                                          \
   "  SELECT req.event_id, s.id, 'match.created', req.payload,"         \
   "         s.created_at"                                                     \
   "  FROM s JOIN req ON req.id = s.id ORDER BY req.idx"                       \
   MM_OUTBOX_RETURNING                                                         \
   "), op AS (" MM_PENDING_OF_O("$15::int8") ")"                               \
   " SELECT req.idx, s.id, " MM_MS("s.created_at")                             \
   " FROM s JOIN req ON req.id = s.id"

const statement statements[st_count] = {
  // $1..$13: the batch's requests as parallel text arrays (session id,
  // event id, match key, queue, user a, ticket a, attrs a, user b, ticket b,
  // attrs b, payload, pair min, pair max; binary arrays: pg_commit.cpp),
  // $14: a boolean array (mutual), $15: the events' lease in ms (0: none; a
  // leased event is the committing node's to deliver, set_commit_lease).
  // `idx` is the request's 1-based position in the arrays.
  // One statement writes the whole batch. Members are inserted in user-id
  // order, so concurrent batches wait for each other on the unique index in
  // one global order and cannot deadlock; pair rows of mutual requests
  // likewise in pair order. A mutual request writes its
  // session only when its pair row went in (the pair had no match yet; of
  // two requests of one pair in a batch, the first); its members are
  // inactive. The pair row names the session before the session exists in
  // this statement: the foreign key is checked at the end of the statement.
  // A request whose key is taken (a retry) writes nothing; that costs an
  // index probe and a WAL record per session, so the batch goes first as
  // mm_commit_new (below), which a taken key refuses whole.
  {"mm_commit", MM_COMMIT("  ON CONFLICT (match_key) DO NOTHING")},
  // $1: text array of session ids that this transaction inserted and the
  // caller withdrew, $2: a text array of their events' ids: removes their
  // outbox rows, members, pair rows and sessions before anybody saw them.
  // Answers how many sessions and how many events it removed. The events
  // are found by their pending rows (written with them, so none is
  // delivered; one probe of the event id's index each), the outbox rows by
  // primary key.
  {"mm_withdraw",
   "WITH ids AS ("
   "  SELECT unnest($1::text[]) AS id"
   "), p AS ("
   "  DELETE FROM mutual_matches WHERE session_id IN (SELECT id FROM ids)"
   "), q AS ("
   "  DELETE FROM outbox_pending WHERE event_id = ANY ($2::text[])"
   "  RETURNING id, created_at"
   "), o AS ("
   "  DELETE FROM outbox x USING q"
   "  WHERE x.id = q.id AND x.created_at = q.created_at"
   "), m AS ("
   "  DELETE FROM session_members WHERE session_id IN (SELECT id FROM ids)"
   "), s AS ("
   "  DELETE FROM match_sessions WHERE id IN (SELECT id FROM ids)"
   "  RETURNING id"
   ")"
   " SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM q)"},
  // $1: JSON array of match keys (sessions committed before: retries).
  {"mm_by_key",
   "SELECT " MM_SESSION_COLS " FROM match_sessions s"
   " WHERE s.match_key IN (SELECT jsonb_array_elements_text($1::jsonb))"},
  // $1: JSON array of [pair_min, pair_max] (mutual requests that inserted
  // nothing: their pair has its match).
  {"mm_by_pair",
   "SELECT " MM_SESSION_COLS ", p.pair_min, p.pair_max"
   " FROM mutual_matches p JOIN match_sessions s ON s.id = p.session_id"
   " WHERE (p.pair_min, p.pair_max) IN ("
   "   SELECT x->>0, x->>1 FROM jsonb_array_elements($1::jsonb) AS x)"},
  // $1 from, $2 to, $3 'LIKE' | 'DISLIKE', $4/$5 the pair. Runs after the
  // pair's advisory lock was taken, so its snapshot holds every swipe of the
  // pair committed before. The main query reads the snapshot from the
  // statement's start: it sees the other direction, not this write (which it
  // does not need). Repeating the current kind changes nothing.
  {"mm_swipe",
   "WITH w AS ("
   "  INSERT INTO likes AS l (from_user, to_user, kind) VALUES ($1, $2, $3)"
   "  ON CONFLICT (from_user, to_user) DO UPDATE"
   "  SET kind = excluded.kind, updated_at = now()"
   "  WHERE l.kind <> excluded.kind"
   "  RETURNING 1"
   ")"
   " SELECT EXISTS (SELECT 1 FROM likes"
   "                WHERE from_user = $2 AND to_user = $1 AND kind = 'LIKE'),"
   "        (SELECT session_id FROM mutual_matches"
   "         WHERE pair_min = $4 AND pair_max = $5),"
   "        (SELECT count(*) FROM w)"},
  {"mm_mutual_of",
   "SELECT " MM_SESSION_COLS
   " FROM mutual_matches p JOIN match_sessions s ON s.id = p.session_id"
   " WHERE p.pair_min = $1 AND p.pair_max = $2"},
  {"mm_conflicts",
   "SELECT user_id, session_id FROM session_members"
   " WHERE active AND user_id IN ($1, $2)"},
  // Closes once; the second close finds the row closed (after waiting for
  // a concurrent closer's row lock) and changes nothing.
  {"mm_close",
   "WITH s AS ("
   "  UPDATE match_sessions SET status = 'closed', closed_at = now(),"
   "                            close_reason = $2"
   "  WHERE id = $1 AND status = 'active' RETURNING id"
   "), m AS ("
   "  UPDATE session_members SET active = false"
   "  WHERE session_id IN (SELECT id FROM s) AND active"
   ")"
   " SELECT (SELECT count(*) FROM s),"
   "        EXISTS (SELECT 1 FROM match_sessions WHERE id = $1)"
   "        OR EXISTS (SELECT 1 FROM session_history WHERE id = $1)"},
  {"mm_active_of",
   "SELECT " MM_SESSION_COLS
   " FROM session_members m JOIN match_sessions s ON s.id = m.session_id"
   " WHERE m.user_id = $1 AND m.active"},
  // $1: text array of user ids; the user after the session's columns. One
  // look-up per user by the one-active index, not a join: a plan prepared
  // while the table's statistics are young may scan every active member for
  // a join. LIMIT 1 (one active session per user) keeps the LATERAL a loop.
  {"mm_active_of_many",
   "SELECT x.*, u.user_id"
   " FROM unnest($1::text[]) AS u(user_id)"
   " CROSS JOIN LATERAL (SELECT " MM_SESSION_COLS
   "   FROM session_members m JOIN match_sessions s ON s.id = m.session_id"
   "   WHERE m.user_id = u.user_id AND m.active LIMIT 1) x"},
  // Live or ended: one statement, one snapshot, so a session moved by a
  // concurrent end is found on one side or the other.
  {"mm_by_id", "SELECT " MM_SESSION_COLS " FROM match_sessions s"
               " WHERE s.id = $1"
               " UNION ALL SELECT " MM_HISTORY_COLS " FROM session_history s"
               " WHERE s.id = $1 LIMIT 1"},
  // The first statement of end_session: locks the session for the rest of
  // the transaction. Of two concurrent ends, the second waits here and then
  // finds the row gone (the first moved it to session_history) or, for a
  // mutual match's session, re-reads it as the first left it (READ
  // COMMITTED): closed, with the first one's ended_by.
  {"mm_lock_session", "SELECT " MM_ENDED_COLS(MM_LOCKED_COLS)
                      " FROM match_sessions s"
                      " WHERE s.id = $1 FOR UPDATE"},
  // $1: JSON array of session ids. The same for a batch of ends, locked in
  // id order: two batches wait for each other in one order, never in a
  // cycle.
  {"mm_lock_sessions",
   "SELECT " MM_ENDED_COLS(MM_LOCKED_COLS) " FROM match_sessions s"
   " WHERE s.id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))"
   " ORDER BY s.id FOR UPDATE"},
  // $1: JSON array of session ids that the lock did not find: those that
  // ended (the end's answer is their recorded state). A new statement, so
  // it sees a move committed while the lock waited.
  {"mm_ended_of",
   "SELECT " MM_ENDED_COLS(MM_HISTORY_COLS) " FROM session_history s"
   " WHERE s.id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))"},
  // $1: JSON array of sessions this transaction locked while active, each
  // with idx (event order), ended_by ('' for the engine), reason, event id
  // and payload. Ends them and writes one session.ended event each; answers
  // the sessions it ended. A session moves to session_history and its
  // members rows go (which frees them), its key retired ('#' and its
  // id, so the pair may match again); a mutual match's stays, closed (its
  // pair row names it; its members are inactive from the start). The
  // sessions are looked up by primary key (`= ANY`): a join with the JSON
  // rows alone (estimated at 100) may hash every active session, once per
  // end. A group's roster goes with it into the history (`members`, as the
  // members were when it ended: who left is inactive), read from
  // session_members in the statement's snapshot, which the delete of the
  // members (`gm`) does not change (every part of a statement sees one
  // snapshot); a pair's `members` stays NULL, without a look-up.
  {"mm_end",
   "WITH e AS ("
   "  SELECT * FROM jsonb_to_recordset($1::jsonb) AS r("
   "    idx int, id text, ended_by text, reason text, event_id text,"
   "    payload text)"
   "), t AS MATERIALIZED ("
   "  SELECT x.id, EXISTS (SELECT 1 FROM mutual_matches p"
   "                       WHERE p.session_id = x.id) AS mutual"
   "  FROM match_sessions x"
   "  WHERE x.id = ANY (ARRAY(SELECT id FROM e)) AND x.status = 'active'"
   "), k AS ("
   "  UPDATE match_sessions x SET status = 'closed', closed_at = now(),"
   "    close_reason = e.reason, ended_by = nullif(e.ended_by, ''),"
   "    match_key = x.match_key || '#' || x.id"
   "  FROM e WHERE x.id = e.id"
   "    AND x.id = ANY (ARRAY(SELECT id FROM t WHERE mutual))"
   "  RETURNING x.id, x.closed_at"
   "), g AS ("
   "  DELETE FROM match_sessions x"
   "  WHERE x.id = ANY (ARRAY(SELECT id FROM t WHERE NOT mutual))"
   "  RETURNING x.*"
   "), gm AS ("
   "  DELETE FROM session_members"
   "  WHERE session_id = ANY (ARRAY(SELECT id FROM t WHERE NOT mutual))"
   "), h AS ("
   "  INSERT INTO session_history (id, match_key, queue, user_a, ticket_a,"
   "    attrs_a, user_b, ticket_b, attrs_b, created_at, closed_at,"
   "    close_reason, ended_by, group_id, min_players, members)"
   "  SELECT g.id, g.match_key || '#' || g.id, g.queue, g.user_a,"
   "    g.ticket_a, g.attrs_a, g.user_b, g.ticket_b, g.attrs_b,"
   "    g.created_at, now(), e.reason, nullif(e.ended_by, ''),"
   "    g.group_id, g.min_players,"
   "    CASE WHEN g.group_id IS NOT NULL THEN "
   MM_ROSTER_OF("g.id", "jsonb_agg", "jsonb_build_object") " END"
   "  FROM g JOIN e ON e.id = g.id"
   "  RETURNING id, closed_at"
   "), s AS ("
   "  SELECT id, closed_at FROM k UNION ALL SELECT id, closed_at FROM h"
   "), o AS ("
   "  INSERT INTO outbox (event_id, aggregate_id, type, payload_text,"
   "                     created_at)"
   "  SELECT e.event_id, s.id, 'session.ended', e.payload, s.closed_at"
   "  FROM s JOIN e ON e.id = s.id ORDER BY e.idx"
   MM_OUTBOX_RETURNING
   "), op AS (" MM_PENDING_OF_O("0") ")"
   " SELECT s.id, " MM_MS("s.closed_at") " FROM s"},
  // $1 max age in ms, $2 limit. Locks the oldest active sessions for the
  // rest of the transaction; SKIP LOCKED passes over those a concurrent
  // expirer or ender holds, and a row closed since this statement's
  // snapshot fails the recheck of `status = 'active'`.
  {"mm_expire_pick",
   "SELECT " MM_ENDED_COLS(MM_LOCKED_COLS) " FROM match_sessions s"
   " WHERE s.status = 'active' AND " MM_OLDER("s.created_at")
   " ORDER BY s.created_at LIMIT $2"
   " FOR UPDATE OF s SKIP LOCKED"},
  // $1 retention in ms, $2 limit; one short transaction each. Rows by
  // primary key from a LIMITed subselect that skips locked rows: a pruner
  // never waits, and no commit touches these rows. The delivered events
  // (no pending row) created before the retention, oldest first along the
  // primary key: ids grow with time, so the walk ends at the first young
  // row (found by the same walk, `y`) instead of reading every row still
  // kept (there is no index by age). A row that got its id after a younger
  // one goes at a later call. Only the outbox's default partition: its
  // time windows are dropped whole (maintain_partitions, pg_partitions.cpp).
  {"mm_prune_outbox",
   "WITH y AS ("
   "  SELECT coalesce(("
   "    SELECT o.id FROM outbox_default o"
   "    WHERE o.created_at >= now() - $1::int8 * interval '1 millisecond'"
   "    ORDER BY o.id LIMIT 1), 9223372036854775807) AS id"
   "), c AS ("
   "  SELECT o.id, o.created_at FROM outbox_default o, y"
   "  WHERE o.id < y.id AND " MM_OLDER("o.created_at")
   "    AND NOT EXISTS (SELECT 1 FROM outbox_pending p WHERE p.id = o.id)"
   "  ORDER BY o.id LIMIT $2"
   "  FOR UPDATE OF o SKIP LOCKED"
   ")"
   " DELETE FROM outbox_default o USING c"
   " WHERE o.id = c.id AND o.created_at = c.created_at"},
  // Their members go with them. Kept: mutual matches' sessions (the
  // pair is matched once) and sessions with an undelivered event. Those
  // are found in one pass over the pending events (a hashed subplan:
  // aggregate_id is NOT NULL, so NOT IN means NOT EXISTS). The picked
  // rows are locked: the main DELETE removes every one of them.
  {"mm_prune_sessions",
   "WITH c AS ("
   "  SELECT s.id FROM match_sessions s"
   "  WHERE s.status = 'closed' AND " MM_OLDER("s.closed_at")
   "    AND NOT EXISTS (SELECT 1 FROM mutual_matches p"
   "                    WHERE p.session_id = s.id)"
   "    AND s.id NOT IN (SELECT o.aggregate_id FROM outbox_pending o)"
   "  ORDER BY s.closed_at LIMIT $2"
   "  FOR UPDATE OF s SKIP LOCKED"
   "), m AS ("
   "  DELETE FROM session_members WHERE session_id IN (SELECT id FROM c)"
   ")"
   " DELETE FROM match_sessions s USING c WHERE s.id = c.id"},
  // The same for ended sessions, in session_history's default partition
  // only: its time windows are dropped whole (maintain_partitions).
  {"mm_prune_history",
   "WITH c AS ("
   "  SELECT h.id, h.closed_at FROM session_history_default h"
   "  WHERE " MM_OLDER("h.closed_at")
   "    AND h.id NOT IN (SELECT o.aggregate_id FROM outbox_pending o)"
   "  ORDER BY h.closed_at LIMIT $2"
   "  FOR UPDATE SKIP LOCKED"
   ")"
   " DELETE FROM session_history_default h USING c"
   " WHERE h.id = c.id AND h.closed_at = c.closed_at"},
  // $1 limit, $2 lease in ms: a lease, not an open transaction; it
  // commits at once (mm_lease_pending, 0007_compact_rows.sql).
  {"mm_fetch",
   "WITH " MM_NO_FLUSH
   " SELECT f.id, f.event_id, f.aggregate_id, f.type, f.payload, "
   MM_MS("f.created_at") ", 0, " MM_MS("f.locked_until") ", f.attempts"
   " FROM nf, mm_lease_pending($1::int, $2::int8) f"},
  // $1: a text array of event ids. Delivered: their pending rows go, one
  // probe each by the event id's unique index (mm_mark_delivered,
  // 0007_compact_rows.sql); an event delivered before has none (counted
  // 0). Answers the count.
  {"mm_mark",
   "WITH " MM_NO_FLUSH
   " SELECT mm_mark_delivered($1::text[]) FROM nf"},
  // -- groups (pg_groups.cpp) -------------------------------------------------
  // $1 session id, $2 match key (group_key), $3 queue, $4..$9 the first two
  // members (user, ticket, attrs each), $10 group id, $11 min_players, $12
  // the members as a JSON array of {user_id, ticket, attrs, team, ord}, $13
  // event id, $14 payload, $15 the event's lease in ms (as for mm_commit).
  // Writes the session, every member and the match.created event, or
  // nothing when the key is taken (a retry: the caller reads the session
  // by its key). Members go in in user-id order, as mm_commit's do: commits
  // wait for each other on the one-active index in one global order. A
  // busy member fails the statement (session_members_one_active).
  {"mm_commit_group",
   "WITH s AS ("
   "  INSERT INTO match_sessions (id, match_key, queue, user_a, ticket_a,"
   "    attrs_a, user_b, ticket_b, attrs_b, group_id, min_players)"
   "  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::smallint)"
   "  ON CONFLICT (match_key) DO NOTHING"
   "  RETURNING id, created_at"
   "), m AS ("
   "  INSERT INTO session_members (session_id, user_id, active, team, ticket,"
   "                               attrs, ord)"
   "  SELECT s.id, r.user_id, true, r.team, r.ticket, r.attrs, r.ord"
   "  FROM s CROSS JOIN jsonb_to_recordset($12::jsonb) AS r(user_id text,"
   "    ticket text, attrs text, team smallint, ord smallint)"
   "  ORDER BY r.user_id COLLATE \"C\""
   "), o AS ("
   "  INSERT INTO outbox (event_id, aggregate_id, type, payload_text,"
   "                     created_at)"
   "  SELECT $13, s.id, 'match.created', $14, s.created_at FROM s"
   MM_OUTBOX_RETURNING
   "), op AS (" MM_PENDING_OF_O("$15::int8") ")"
   " SELECT s.id, " MM_MS("s.created_at") " FROM s"},
  // $1: JSON array of user ids: their active memberships (by the one-active
  // index), to name every busy member of a refused group.
  {"mm_busy_of",
   "SELECT user_id, session_id FROM session_members"
   " WHERE active"
   "   AND user_id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))"},
  // $1: JSON array of session ids (groups that this transaction locked):
  // each one's roster, read after the lock (a new snapshot).
  {"mm_roster",
   "SELECT s.id, " MM_LIVE_ROSTER " FROM match_sessions s"
   " WHERE s.id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))"},
  // $1 session, $2 user, $3 event id, $4 payload: the member leaves a group
  // session that this transaction locked, with its session.member_left
  // event. Answers one row when it left, none when it was not in.
  {"mm_leave",
   "WITH m AS ("
   "  UPDATE session_members SET active = false"
   "  WHERE session_id = $1 AND user_id = $2 AND active"
   "  RETURNING session_id"
   "), o AS ("
   "  INSERT INTO outbox (event_id, aggregate_id, type, payload_text,"
   "                     created_at)"
   "  SELECT $3, m.session_id, 'session.member_left', $4, now()"
   "  FROM m" MM_OUTBOX_RETURNING
   ") " MM_PENDING_OF_O("0") " RETURNING 1"},
  // -- backfill (pg_backfill.cpp) ---------------------------------------------
  // $1 session (locked by this transaction, active, a group's), $2 the new
  // members as a JSON array of {user_id, ticket, attrs, team, ord} (ord
  // after the roster's last), $3 event id, $4 payload, $5 the event's lease
  // in ms (as for mm_commit). Writes every member and the one
  // session.members_changed event; answers how many members it wrote.
  // Members go in in user-id order, as mm_commit_group's do: fills and
  // commits wait for each other on the one-active index in one global
  // order. A member busy elsewhere fails the statement
  // (session_members_one_active). A data-modifying CTE runs whether or not
  // the query reads it.
  {"mm_add_members",
   "WITH m AS ("
   "  INSERT INTO session_members (session_id, user_id, active, team, ticket,"
   "                               attrs, ord)"
   "  SELECT $1, r.user_id, true, r.team, r.ticket, r.attrs, r.ord"
   "  FROM jsonb_to_recordset($2::jsonb) AS r(user_id text, ticket text,"
   "    attrs text, team smallint, ord smallint)"
   "  ORDER BY r.user_id COLLATE \"C\""
   "  RETURNING 1"
   "), o AS ("
   "  INSERT INTO outbox (event_id, aggregate_id, type, payload_text,"
   "                     created_at)"
   "  VALUES ($3, $1, 'session.members_changed', $4, now())"
   MM_OUTBOX_RETURNING
   "), op AS (" MM_PENDING_OF_O("$5::int8") ")"
   " SELECT count(*) FROM m"},
  // mm_commit without its ON CONFLICT: the batch's first try. A retried
  // request in it (its key taken) fails the statement on the key's unique
  // index, and the batch goes one by one with mm_commit (pg_commit.cpp).
  {"mm_commit_new", MM_COMMIT("")},
};

#undef MM_COMMIT
#undef MM_OLDER
#undef MM_OUTBOX_RETURNING
#undef MM_PENDING_OF_O
#undef MM_NO_FLUSH
#undef MM_ENDED_COLS
#undef MM_LOCKED_COLS
#undef MM_HISTORY_COLS
#undef MM_SESSION_COLS
#undef MM_LIVE_ROSTER
#undef MM_ROSTER_OF
#undef MM_SESSION_COLS_WITH
#undef MM_MS

// clang-format on

} // namespace mm::pg
