#!/usr/bin/env bash
# matchd on the private Redis + PostgreSQL under `matchctl load`, then the
# checker's verdict cross-checked against the stores.
#   matchd_load_test.sh load    MATCHD MATCHCTL REDIS_DIR PG_DIR
#     20,000 users, 5% cancels: zero double bookings, zero lost users, every
#     match event delivered to both users; the database agrees.
#   matchd_load_test.sh sigterm MATCHD MATCHCTL REDIS_DIR PG_DIR
#     SIGTERM in the middle of the load: matchd exits 0 within its drain
#     bound; no ticket is left half-claimed; nothing is lost.
set -euo pipefail
mode=$1 matchd=$2 matchctl=$3 redis_dir=$4 pg_dir=$5
redis_port=$(cat "$redis_dir/port")
pg_port=$(cat "$pg_dir/port")
work=$(mktemp -d /tmp/matchd_load.XXXXXX)
db="load_${mode}_$$"
psql=(psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres)
"${psql[@]}" -d postgres -c "CREATE DATABASE $db" >/dev/null
conninfo="host=127.0.0.1 port=$pg_port user=postgres dbname=$db"
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
port=$(free_port)
secret="load-test-secret-0123456789"
prefix="${mode}$$-"
queue_count=100 # many queues: users wait long enough for most cancels to land
drain_ms=10000
fail() {
  echo "FAIL: $*"
  tail -n 20 "$work/matchd.log" | cut -c1-400
  exit 1
}

"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node "load-$mode" \
  --redis "127.0.0.1:$redis_port" --postgres "$conninfo" --log-level warn \
  --drain-timeout "$drain_ms" --queues "$(seq -s, -f 'q%g' 0 $((queue_count - 1)))" \
  >"$work/matchd.log" 2>&1 &
pid=$!
cleanup() { kill -KILL "$pid" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || fail "matchd not ready"

# The wait after the last join: the users left waiting at the end (their
# partner cancelled) hold the run for all of it; events take milliseconds
# (under SIGTERM, the drain's answers more).
settle=15000
[ "$mode" = load ] && settle=8000
load=("$matchctl" load --url "http://127.0.0.1:$port" --secret "$secret"
      --users 20000 --cancel-rate 0.05 --queues "$queue_count" --prefix "$prefix"
      --no-progress --json "$work/report.json" --settle-ms "$settle")
if [ "$mode" = load ]; then
  set +e
  "${load[@]}" --rate 2000 --cancel-delay-ms 10 | tee "$work/load.out"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || fail "matchctl load exited $rc"
else
  # A node that drains refuses joins: their share is not held to a bound.
  "${load[@]}" --rate 3000 --min-availability 0 >"$work/load.out" 2>&1 &
  loader=$!
  sleep 3
  t0=$(date +%s%N)
  kill -TERM "$pid"
  set +e
  wait "$pid"
  rc=$?
  set -e
  took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "matchd exited $rc after SIGTERM in ${took_ms} ms (bound ${drain_ms} ms)"
  [ "$rc" = 0 ] || fail "matchd exit status $rc"
  [ "$took_ms" -le $((drain_ms + 1000)) ] || fail "drain took ${took_ms} ms"
  set +e
  wait "$loader"
  lrc=$?
  set -e
  cat "$work/load.out"
  [ "$lrc" = 0 ] || fail "matchctl load found violations (exit $lrc)"
fi

python3 - "$work/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["checker"]
print("report:", {k: r[k] for k in ("users", "joined", "matched", "sessions", "cancelled", "waiting", "shutdown_notices", "unreachable")}, c)
assert c["verdict"] == "ok", c
for k in ("double_bookings", "lost_users", "undelivered_events", "cancelled_but_matched"):
    assert c[k] == 0, (k, c[k])
assert r["matched"] > 0
PY

# The database agrees with what the clients saw.
q() { "${psql[@]}" -d "$db" -c "$1"; }
sessions=$(q "SELECT count(*) FROM match_sessions WHERE user_a LIKE '${prefix}%'")
double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE user_id LIKE '${prefix}%' GROUP BY user_id HAVING count(*) > 1) d")
# The relay marks pushed events in batches, and a mark that failed (a
# slow or briefly unreachable database) is retried with backoff: "never
# delivered" is a row still unmarked after that backoff had its turns.
for _ in $(seq 200); do
  undelivered=$(q "SELECT count(*) FROM outbox_pending")
  [ "$undelivered" = 0 ] && break
  sleep 0.1
done
reported=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sessions'])" "$work/report.json")
echo "database: $sessions sessions (clients saw $reported), $double users in two sessions, $undelivered events undelivered"
[ "$double" = 0 ] || fail "double bookings in the database"
[ "$sessions" = "$reported" ] || fail "the clients saw $reported sessions, the database has $sessions"
[ "$undelivered" = 0 ] || fail "$undelivered committed events were never delivered"

# No ticket is left half-claimed: what is left in Redis is waiting.
half=0
for i in $(seq 0 $((queue_count - 1))); do
  # A record's state is a NUL-separated field (lua/lib/common.lua).
  n=$(redis-cli -p "$redis_port" --raw HVALS "mm:{q$i}:tickets" | grep -a -c -P '\x00claim(ed|er)\x00' || true)
  half=$((half + n))
done
echo "redis: $half tickets claimed but not settled"
[ "$half" = 0 ] || fail "$half half-claimed tickets"
echo "PASS ($mode)"
