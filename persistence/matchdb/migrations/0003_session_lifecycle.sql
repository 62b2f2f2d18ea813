-- 0003_session_lifecycle: sessions end (by a member or by age) and what is
-- over is pruned, so users match many times and the tables stay bounded.
--
-- `ended_by` records the member that ended a session (end_session); NULL
-- when the engine ended it (expire_sessions) or close_session closed it. A
-- repeated end answers the recorded final state from this row alone.
--
-- The three partial indexes serve the periodic calls, which would otherwise
-- scan the whole history on every run; each holds only the rows its call
-- looks at, so the hot paths (commit, fetch) do not carry them:
-- - expire_sessions picks the oldest ACTIVE sessions (created_at < now() -
--   max age, ORDER BY created_at LIMIT n FOR UPDATE SKIP LOCKED): the index
--   follows the live sessions, not the history;
-- - prune picks CLOSED sessions by closed_at and DELIVERED outbox rows by
--   delivered_at (LIMITed subselects, deleted by primary key).
-- Plain CREATE INDEX, since a migration runs in a transaction: it blocks
-- writes to the table while it builds, which is short on a young table. On
-- a big one, build them beforehand with CREATE INDEX CONCURRENTLY under
-- these names; IF NOT EXISTS then skips them.
ALTER TABLE match_sessions ADD COLUMN ended_by text;

CREATE INDEX IF NOT EXISTS match_sessions_active_age
  ON match_sessions (created_at) WHERE status = 'active';

CREATE INDEX IF NOT EXISTS match_sessions_closed_age
  ON match_sessions (closed_at) WHERE status = 'closed';

CREATE INDEX IF NOT EXISTS outbox_delivered_age
  ON outbox (delivered_at) WHERE delivered_at IS NOT NULL;
