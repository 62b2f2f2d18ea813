-- 0005_session_history: ended sessions move out of match_sessions into a
-- history table partitioned by time (issue 15), so the table that every
-- commit and every end touches holds what is live, and old sessions go by
-- dropping a partition instead of row-by-row deletes.
--
-- match_sessions keeps its global keys (the commit's idempotency key
-- match_key, the members' and mutual matches' foreign keys, the
-- one-active-session index of session_members); a time-partitioned table
-- could hold none of them. An ended session needs none: its key was
-- retired at its end already (match_key || '#' || id, so the same pair may
-- match again) and its members are free. So the end moves it: one
-- statement deletes the row (members go by ON DELETE CASCADE) and inserts
-- it here, closed_at set (mm_end, pg_statements.cpp). Not moved, as
-- before: the sessions of mutual matches (a pair is matched once: the
-- pair row names its session for good) and sessions closed by
-- close_session (their key still answers a retried commit); prune deletes
-- those as before.
--
-- Partitioned BY RANGE (closed_at) like the outbox (0004): a DEFAULT
-- partition takes rows no window holds (an end never fails for want of a
-- partition; prune deletes its rows one by one), and the time windows are
-- created ahead and dropped past the retention by
-- match_store::maintain_partitions. The primary key holds the partition
-- key; a session id is unique by construction (a UUID, moved once).
CREATE TABLE session_history (
  id           text NOT NULL,
  match_key    text NOT NULL,
  queue        text NOT NULL,
  user_a       text NOT NULL,
  ticket_a     text NOT NULL,
  attrs_a      text NOT NULL DEFAULT '',
  user_b       text NOT NULL,
  ticket_b     text NOT NULL,
  attrs_b      text NOT NULL DEFAULT '',
  status       text NOT NULL DEFAULT 'closed' CHECK (status = 'closed'),
  created_at   timestamptz NOT NULL,
  closed_at    timestamptz NOT NULL,
  close_reason text,
  ended_by     text,
  PRIMARY KEY (id, closed_at)
) PARTITION BY RANGE (closed_at);

CREATE TABLE session_history_default PARTITION OF session_history DEFAULT;

-- For prune, which only looks at the default partition.
CREATE INDEX session_history_default_closed_age
  ON session_history_default (closed_at);

-- Every session, live or over, for operators and checkers.
CREATE VIEW all_sessions AS
  SELECT id, match_key, queue, user_a, ticket_a, attrs_a, user_b, ticket_b,
         attrs_b, status, created_at, closed_at, close_reason, ended_by
  FROM match_sessions
  UNION ALL
  SELECT id, match_key, queue, user_a, ticket_a, attrs_a, user_b, ticket_b,
         attrs_b, status, created_at, closed_at, close_reason, ended_by
  FROM session_history;

-- The sessions that ended before this migration: the same move, in one
-- statement (a big table makes this transaction long: prune it first).
WITH moved AS (
  DELETE FROM match_sessions s
  WHERE s.status = 'closed'
    AND right(s.match_key, length(s.id) + 1) = '#' || s.id
    AND NOT EXISTS (SELECT 1 FROM mutual_matches p WHERE p.session_id = s.id)
  RETURNING s.id, s.match_key, s.queue, s.user_a, s.ticket_a, s.attrs_a,
            s.user_b, s.ticket_b, s.attrs_b, s.created_at, s.closed_at,
            s.close_reason, s.ended_by
)
INSERT INTO session_history (id, match_key, queue, user_a, ticket_a,
                             attrs_a, user_b, ticket_b, attrs_b, created_at,
                             closed_at, close_reason, ended_by)
SELECT * FROM moved;
