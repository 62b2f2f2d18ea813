# shellcheck shell=bash
# bench/migrate.sh: `bench/run migrate`, sourced by bench/run (which owns
# $root, $dir and the cleanup trap).
#
# The lock time of migrations 0007_compact_rows and 0008_text_payloads on a
# database of MIG_SESSIONS (1,000,000) sessions (issue 34): a private PostgreSQL, the
# migrations before 0007 applied from persistence/matchdb/migrations/, then
# what a deployment of that version holds: MIG_ACTIVE (100,000) live pair
# sessions with their members and match.created events, the rest ended in
# session_history with both their events, MIG_UNDELIVERED (1,000) events of
# each kind still to deliver. Then 0007 runs in one transaction, as the
# store runs it, while a probe (pgbench, one connection) reads the tables
# it locks in a loop: the probe's longest wait is the stall a running
# node's commits see. Then 0008 the same way on what 0007 left.
# Last lines: migrate_sessions=N migrate_outbox_rows=N,
# migrate_0008_tx_ms=X migrate_0008_probe_max_ms=X, and 0007's:
# migrate_tx_ms=X (the migration's transaction), migrate_probe_max_ms=X.

mig_sessions=${MIG_SESSIONS:-1000000}
mig_active=${MIG_ACTIVE:-100000}
mig_undelivered=${MIG_UNDELIVERED:-1000}

migrate_main() {
  local pgbin=${MM_PG_BIN:-/usr/lib/postgresql/15/bin}
  "$root/tests/support/postgres_server.sh" start "$dir/pg" >/dev/null
  local pgport f
  pgport=$(cat "$dir/pg/port")
  local -a q=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pgport"
              -U postgres)
  "${q[@]}" -d postgres -c "CREATE DATABASE migrate" >/dev/null
  q+=(-d migrate)
  echo "# bench/run migrate: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg); $mig_sessions sessions, $mig_active"\
" live, $mig_undelivered undelivered events of each kind"
  # As the store records them (its checksum is not checked here).
  "${q[@]}" -c "CREATE TABLE schema_migrations (version int PRIMARY KEY,"\
" name text NOT NULL, checksum text NOT NULL,"\
" applied_at timestamptz NOT NULL DEFAULT now())" >/dev/null
  for f in "$root"/persistence/matchdb/migrations/000[1-6]_*.sql; do
    "${q[@]}" -1 -f "$f" -c "INSERT INTO schema_migrations VALUES"\
" ($(basename "$f" | cut -c1-4 | sed 's/^0*//'), '$(basename "$f" .sql)',"\
" 'bench')" >/dev/null
  done
  local t0 t1
  t0=$(date +%s%N)
  # Live pairs: session, two members, match.created (the newest undelivered).
  # Ended ones: the history row, match.created delivered and session.ended
  # (the newest undelivered). Ids as the store makes them (UUID text).
  "${q[@]}" >/dev/null <<SQL
INSERT INTO match_sessions (id, match_key, queue, user_a, ticket_a, user_b,
                            ticket_b, created_at)
SELECT md5('s' || g)::uuid::text, 'voice' || chr(9) || 'a' || g || chr(9)
       || 't' || chr(9) || 'b' || g || chr(9) || 't', 'voice', 'a' || g, 't',
       'b' || g, 't', now() - (g || ' ms')::interval
FROM generate_series(1, $mig_active) g;
INSERT INTO session_members (session_id, user_id)
SELECT md5('s' || g)::uuid::text, u || g
FROM generate_series(1, $mig_active) g, (VALUES ('a'), ('b')) v(u);
INSERT INTO session_history (id, match_key, queue, user_a, ticket_a, user_b,
                             ticket_b, created_at, closed_at, close_reason,
                             ended_by)
SELECT md5('s' || g)::uuid::text, 'k' || g, 'voice', 'a' || g, 't', 'b' || g,
       't', now() - (g || ' ms')::interval - interval '1 minute',
       now() - (g || ' ms')::interval, 'done', 'a' || g
FROM generate_series($mig_active + 1, $mig_sessions) g;
INSERT INTO outbox (event_id, aggregate_id, type, payload, created_at,
                    delivered_at, attempts)
SELECT 'match.created:' || id, id, 'match.created',
       jsonb_build_object('type', 'match.created', 'session_id', id,
                          'users', jsonb_build_array(user_a, user_b)),
       created_at, created_at + interval '5 ms', 1
FROM (SELECT id, user_a, user_b, created_at FROM match_sessions
      UNION ALL
      SELECT id, user_a, user_b, created_at FROM session_history) s
ORDER BY created_at;
INSERT INTO outbox (event_id, aggregate_id, type, payload, created_at,
                    delivered_at, attempts)
SELECT 'session.ended:' || id, id, 'session.ended',
       jsonb_build_object('type', 'session.ended', 'session_id', id),
       closed_at, closed_at + interval '5 ms', 1
FROM session_history ORDER BY closed_at;
UPDATE outbox SET delivered_at = NULL, attempts = 0
WHERE id IN (SELECT id FROM outbox WHERE type = 'match.created'
             ORDER BY created_at DESC LIMIT $mig_undelivered)
   OR id IN (SELECT id FROM outbox WHERE type = 'session.ended'
             ORDER BY created_at DESC LIMIT $mig_undelivered);
VACUUM ANALYZE;
CHECKPOINT;
SQL
  t1=$(date +%s%N)
  local rows size0
  rows=$("${q[@]}" -t -A -c "SELECT count(*) FROM outbox")
  size0=$("${q[@]}" -t -A -c "SELECT pg_size_pretty(pg_database_size('migrate'))")
  echo "# filled in $(( (t1 - t0) / 1000000 )) ms: $rows outbox rows, database $size0"
  # The probe: a read of each locked table, as short as a statement gets.
  cat >"$dir/probe_tx.sql" <<'SQL'
SELECT 1 FROM session_members WHERE session_id = 'none';
SELECT 1 FROM match_sessions WHERE id = 'none';
SELECT 1 FROM outbox WHERE id = -1;
SQL
  mig_step 7 0007_compact_rows
  local tx7=$mig_tx_ms max7=$mig_max_ms pending size1
  pending=$("${q[@]}" -t -A -c "SELECT count(*) FROM outbox_pending")
  size1=$("${q[@]}" -t -A -c "SELECT pg_size_pretty(pg_database_size('migrate'))")
  echo "# 0007 applied in ${tx7} ms (probe's longest ${max7} ms):"\
" $pending events pending (expected $((2 * mig_undelivered))), database"\
" $size0 -> $size1; probe: $mig_probe"
  if [ "$pending" != $((2 * mig_undelivered)) ]; then
    echo "bench/run migrate: VIOLATION pending=$pending" >&2
    return 1
  fi
  # 0008 on the database 0007 left: catalog changes only.
  mig_step 8 0008_text_payloads
  echo "# 0008 applied in ${mig_tx_ms} ms (probe's longest ${mig_max_ms} ms);"\
" probe: $mig_probe"
  echo "migrate_sessions=$mig_sessions migrate_outbox_rows=$rows"
  echo "migrate_0008_tx_ms=$mig_tx_ms migrate_0008_probe_max_ms=$mig_max_ms"
  echo "migrate_tx_ms=$tx7 migrate_probe_max_ms=$max7"
}

# Applies migration VERSION NAME as the store does (one transaction,
# recorded) while the probe runs, one connection, 20 s from 3 s before.
# Sets mig_tx_ms (psql's time of each statement, BEGIN and COMMIT
# included, summed: the transaction without psql's own start),
# mig_max_ms (the probe's longest transaction) and mig_probe.
mig_step() {
  local version=$1 name=$2
  rm -f "$dir"/probelog.*
  (cd "$dir" && "$pgbin/pgbench" -n -h 127.0.0.1 -p "$pgport" -U postgres \
     -c 1 -T 20 -f "$dir/probe_tx.sql" -l --log-prefix=probelog migrate \
     >"$dir/pgbench.out" 2>&1) &
  local probe=$!
  sleep 3
  "${q[@]}" -1 -c '\timing on' \
    -f "$root/persistence/matchdb/migrations/$name.sql" \
    -c "INSERT INTO schema_migrations (version, name, checksum) VALUES"\
" ($version, '$name', 'bench')" >"$dir/migrate.out"
  wait "$probe" || true
  mig_tx_ms=$(awk '/^Time: / { t += $2 } END { printf "%.1f", t }' "$dir/migrate.out")
  # pgbench's log: client, transaction, latency in us, ...
  mig_max_ms=$(cat "$dir"/probelog.* 2>/dev/null \
                 | awk '$3 + 0 > m { m = $3 + 0 } END { printf "%.1f", m / 1000 }')
  mig_probe=$(grep -E 'number of transactions actually|latency average' \
                "$dir/pgbench.out" | tr '\n' ' ')
}
