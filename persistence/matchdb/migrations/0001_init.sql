-- 0001_init: match sessions, their members, the transactional outbox, and
-- the tables of the mutual-like feature.
--
-- Migrations are compiled into the binary (cmake/embed_migrations.cmake) and
-- applied by match_store::apply_migrations, each inside a transaction that
-- the store opens: no BEGIN/COMMIT here, nothing that cannot run in a
-- transaction (CREATE INDEX CONCURRENTLY, VACUUM). Never edit a migration
-- that was released: add a new NNNN_name.sql instead (the store refuses a
-- changed one by its checksum).

-- One row per committed match. `id` is a UUID chosen by the store so the
-- outbox event can name it in the same statement.
CREATE TABLE match_sessions (
  id           text PRIMARY KEY,
  -- queue + both user:ticket pairs in canonical order: a retried commit of
  -- the same claimed pair finds its session instead of creating a second.
  match_key    text NOT NULL UNIQUE,
  queue        text NOT NULL,
  user_a       text NOT NULL,
  ticket_a     text NOT NULL,
  attrs_a      text NOT NULL DEFAULT '',
  user_b       text NOT NULL,
  ticket_b     text NOT NULL,
  attrs_b      text NOT NULL DEFAULT '',
  status       text NOT NULL DEFAULT 'active'
               CHECK (status IN ('active', 'closed')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  closed_at    timestamptz,
  close_reason text,
  CHECK (user_a <> user_b),
  CHECK ((status = 'closed') = (closed_at IS NOT NULL))
);

CREATE TABLE session_members (
  session_id text NOT NULL REFERENCES match_sessions (id) ON DELETE CASCADE,
  user_id    text NOT NULL,
  active     boolean NOT NULL DEFAULT true,
  PRIMARY KEY (session_id, user_id)
);

-- The last line of defence against double booking (invariant I1): at most
-- one active membership per user, whatever the nodes in front believe.
CREATE UNIQUE INDEX session_members_one_active
  ON session_members (user_id) WHERE active;

-- The transactional outbox: written in the transaction that commits the
-- match, read by the relays. `locked_until` is the lease of the relay that
-- fetched the row (FOR UPDATE SKIP LOCKED); `attempts` counts the leases.
CREATE TABLE outbox (
  id           bigserial PRIMARY KEY,
  event_id     text NOT NULL UNIQUE,
  aggregate_id text NOT NULL,
  type         text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  locked_until timestamptz,
  attempts     integer NOT NULL DEFAULT 0
);

-- The relays scan only what is still to deliver.
CREATE INDEX outbox_undelivered ON outbox (id) WHERE delivered_at IS NULL;
CREATE INDEX outbox_aggregate ON outbox (aggregate_id);

-- Mutual likes (no API yet). One row per direction; a changed mind updates
-- the row.
CREATE TABLE likes (
  from_user  text NOT NULL,
  to_user    text NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('LIKE', 'DISLIKE')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (from_user, to_user),
  CHECK (from_user <> to_user)
);

-- "Who likes me": the reverse direction of the check for a mutual like.
CREATE INDEX likes_to_user ON likes (to_user, from_user);

-- Exactly one match per unordered pair (invariant I4). Byte order ("C")
-- so that min/max agree with the engine's pair key min(a,b):max(a,b).
CREATE TABLE mutual_matches (
  pair_min   text COLLATE "C" NOT NULL,
  pair_max   text COLLATE "C" NOT NULL,
  session_id text REFERENCES match_sessions (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (pair_min, pair_max),
  CHECK (pair_min < pair_max)
);
