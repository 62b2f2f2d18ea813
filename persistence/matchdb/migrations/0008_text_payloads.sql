-- 0008_text_payloads: an event's payload is stored as the text the engine
-- wrote, not parsed into jsonb on the commit's path (issue 34: no JSON
-- parsed on the hot path). The cast cost PostgreSQL ~2 us per
-- match.created payload, about 4 % of its CPU per match
-- (docs/benchmarks.md, "Binary arrays and text payloads").
--
-- The new column `payload_text` holds the payload of every event written
-- from now on; `payload` (jsonb) keeps those written before and is NULL
-- after. Exactly one of the two is set (outbox_one_payload). Readers take
-- coalesce(payload_text, payload::text): the relays through
-- mm_lease_pending below; an operator's query by a field of the event
-- reads `coalesce(payload_text, payload::text)::jsonb`.
--
-- Taking it on a running deployment (docs/persistence.md, "0008"): catalog
-- changes only. The column has no default, DROP NOT NULL checks nothing,
-- and the CHECK is NOT VALID (the rows before it are not scanned; every
-- row after it is checked), so nothing is rewritten or read; the ACCESS
-- EXCLUSIVE lock on the outbox and its partitions lasts as long as the
-- catalog's updates (docs/benchmarks.md, "Migration 0008"). Nodes of the
-- version before go on working beside the new ones: they write `payload`,
-- which the CHECK admits, and their relays call the replaced
-- mm_lease_pending, whose result is unchanged.
ALTER TABLE outbox
  ADD COLUMN payload_text text,
  ALTER COLUMN payload DROP NOT NULL;

ALTER TABLE outbox
  ADD CONSTRAINT outbox_one_payload
  CHECK ((payload IS NULL) <> (payload_text IS NULL)) NOT VALID;

-- As in 0007_compact_rows.sql, with the payload from either column.
CREATE OR REPLACE FUNCTION mm_lease_pending(n integer, lease_ms bigint)
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
  SELECT o.id, o.event_id, o.aggregate_id, o.type,
         coalesce(o.payload_text, o.payload::text),
         o.created_at, l.locked_until, l.attempts
  FROM l JOIN outbox o ON o.id = l.id AND o.created_at = l.created_at
$$;
