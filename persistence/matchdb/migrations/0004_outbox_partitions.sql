-- 0004_outbox_partitions: the outbox partitioned by time (issue 15), so that
-- old events go by dropping a partition instead of row-by-row deletes.
--
-- The outbox is the table that grows with users served: two events per
-- session (match.created, session.ended), each written once, leased and
-- marked delivered within seconds, then only kept for the retention. Here it
-- becomes a table partitioned BY RANGE (created_at). The table as it was
-- becomes its DEFAULT partition, rows and indexes in place (no copy): it
-- takes every row that no time window holds — all of today's rows, and any
-- row written while no window exists (so a commit never fails for want of
-- a partition) — and `prune` keeps deleting its delivered rows one by one.
-- The time windows are created ahead and dropped once past the retention
-- by match_store::maintain_partitions (the lifecycle sweep, and each start:
-- docs/persistence.md, "A database that stays small"); this migration
-- creates none, so a store that never maintains behaves as before.
--
-- A partitioned table's unique indexes must hold the partition key: the
-- primary key is (id, created_at) and event_id has a plain index (event ids
-- are made unique by construction: the session's UUID and the event's
-- kind).
-- The delivered-age index serves `prune`, which only looks at the default
-- partition now: the time windows do not carry it.
ALTER TABLE outbox RENAME TO outbox_default;
-- A partition takes its primary key from the parent: the old one (id)
-- goes, (id, created_at) is built when it is attached.
ALTER TABLE outbox_default DROP CONSTRAINT outbox_pkey;
ALTER TABLE outbox_default DROP CONSTRAINT outbox_event_id_key;
ALTER INDEX outbox_undelivered RENAME TO outbox_default_undelivered;
ALTER INDEX outbox_aggregate RENAME TO outbox_default_aggregate;
ALTER INDEX outbox_delivered_age RENAME TO outbox_default_delivered_age;

CREATE TABLE outbox (
  id           bigint NOT NULL DEFAULT nextval('outbox_id_seq'),
  event_id     text NOT NULL,
  aggregate_id text NOT NULL,
  type         text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  locked_until timestamptz,
  attempts     integer NOT NULL DEFAULT 0,
  PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

-- One sequence for all partitions, owned by the new table.
ALTER SEQUENCE outbox_id_seq OWNED BY outbox.id;
ALTER TABLE outbox_default ALTER COLUMN id DROP DEFAULT;
ALTER TABLE outbox ATTACH PARTITION outbox_default DEFAULT;

-- On the parent: every partition gets them (the default's own are reused
-- where they match).
CREATE INDEX outbox_undelivered ON outbox (id) WHERE delivered_at IS NULL;
CREATE INDEX outbox_aggregate ON outbox (aggregate_id);
CREATE INDEX outbox_event ON outbox (event_id);
