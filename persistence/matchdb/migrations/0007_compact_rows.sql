-- 0007_compact_rows: the rows of a match at close to what they must cost
-- (issue 34): fewer index entries per match, no row written twice.
--
-- Measured before (`floor_bench --rows product`, pg_stat_statements): the
-- delivery mark rewrote each outbox row (delivered_at is in the partial
-- index outbox_undelivered, so no update of it is HOT: a new row version
-- and an entry in each of the outbox's four indexes, 17 us a match), and
-- the foreign key of session_members made every member insert lock its
-- session row FOR KEY SHARE (a WAL record and a lookup each, 12 us a
-- match). So:
--
-- 1. The delivery state moves to `outbox_pending`: one row per event still
--    to deliver (its lease and its attempts), inserted with the event and
--    deleted when it is delivered. An outbox row is written once and never
--    updated; "delivered" is "not in outbox_pending". The indexes that
--    served the old state go (outbox_undelivered, the default partition's
--    delivered age), and so do outbox_event and outbox_aggregate: the mark
--    finds the pending row by its event id, a withdrawal its session's
--    events by their pending rows (a withdrawn session's events were
--    written by the same transaction: none is delivered). The outbox keeps
--    its primary key only. The relays lease from outbox_pending (small: what
--    is in flight) and read the event from the outbox by its primary key.
--    The columns delivered_at, locked_until and attempts are dropped. The
--    retention of a delivered event counts from its creation.
-- 2. session_members loses its foreign key to match_sessions: every write
--    of both goes through the store's statements, which delete a session's
--    members where the key's ON DELETE CASCADE did (an end, a prune, a
--    withdrawal).
--
-- Taking it on a running deployment (docs/persistence.md, "0007"): stop
-- every node of the older version first (its statements write the dropped
-- columns), then start the new one, which applies this in one transaction.
-- The lock it holds: ACCESS EXCLUSIVE on outbox, session_members and
-- match_sessions, for catalog changes only (no table is rewritten or scanned, an index drop
-- unlinks files), plus the copy of the undelivered events, found by the
-- partial index outbox_undelivered while it still exists. Measured on a
-- database of 1,000,000 sessions: docs/benchmarks.md, "Migration 0007".
LOCK TABLE outbox, session_members, match_sessions IN ACCESS EXCLUSIVE MODE;

CREATE TABLE outbox_pending (
  -- The outbox row's primary key: (id, created_at).
  id           bigint PRIMARY KEY,
  created_at   timestamptz NOT NULL,
  event_id     text NOT NULL UNIQUE,
  -- The session the event names: prune keeps a session while it has an
  -- event to deliver.
  aggregate_id text NOT NULL,
  locked_until timestamptz,
  attempts     integer NOT NULL DEFAULT 0
);

INSERT INTO outbox_pending (id, created_at, event_id, aggregate_id,
                            locked_until, attempts)
SELECT id, created_at, event_id, aggregate_id, locked_until, attempts
FROM outbox WHERE delivered_at IS NULL;

DROP INDEX outbox_undelivered;
DROP INDEX outbox_event;
DROP INDEX outbox_aggregate;
DROP INDEX IF EXISTS outbox_default_delivered_age;
ALTER TABLE outbox
  DROP COLUMN delivered_at,
  DROP COLUMN locked_until,
  DROP COLUMN attempts;

ALTER TABLE session_members
  DROP CONSTRAINT session_members_session_id_fkey;

-- The delivery mark: deletes the pending rows of the events `ids`, one
-- probe each of the event id's index; answers how many it deleted (an
-- event delivered before has none). A function for its SET clause:
-- outbox_pending holds few live rows among the dead ones that deliveries
-- leave until VACUUM, so once analyzed the planner deems a sequential
-- scan cheaper than 100 probes and would read every dead row on every
-- mark (pg_outbox_scans_test). The body is planned on each call, with
-- sequential scans off.
CREATE FUNCTION mm_mark_delivered(ids text[]) RETURNS bigint
LANGUAGE sql VOLATILE
SET enable_seqscan = off
AS $$
  WITH d AS (
    DELETE FROM outbox_pending WHERE event_id = ANY (ids) RETURNING 1
  )
  SELECT count(*) FROM d
$$;

-- The relays' lease: picks up to `n` events that no live lease holds,
-- oldest first, leases them for `lease_ms` and answers them with their
-- outbox rows. FOR UPDATE SKIP LOCKED: a concurrent fetcher skips what this
-- one is taking, and a row whose lease another one just took fails the
-- recheck of the WHERE clause on its new version. A function for its SET
-- clause, as mm_mark_delivered: the pick walks the primary key from the
-- oldest (marking the dead entries it passes, so the next walk skips
-- them), the lease and the outbox rows are probes by primary key; a
-- sequential scan would read every dead row on every fetch.
CREATE FUNCTION mm_lease_pending(n integer, lease_ms bigint)
RETURNS TABLE (id bigint, event_id text, aggregate_id text, type text,
               payload text, created_at timestamptz,
               locked_until timestamptz, attempts integer)
LANGUAGE sql VOLATILE ROWS 100
SET enable_seqscan = off
AS $$
  WITH c AS (
    SELECT p.id FROM outbox_pending p
    WHERE p.locked_until IS NULL OR p.locked_until <= now()
    ORDER BY p.id LIMIT n
    FOR UPDATE SKIP LOCKED
  ), l AS (
    UPDATE outbox_pending p
    SET locked_until = now() + lease_ms * interval '1 millisecond',
        attempts = p.attempts + 1
    WHERE p.id = ANY (ARRAY(SELECT c.id FROM c))
    RETURNING p.id, p.created_at, p.locked_until, p.attempts
  )
  SELECT o.id, o.event_id, o.aggregate_id, o.type, o.payload::text,
         o.created_at, l.locked_until, l.attempts
  FROM l JOIN outbox o ON o.id = l.id AND o.created_at = l.created_at
$$;
