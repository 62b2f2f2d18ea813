#!/usr/bin/env bash
# Each core actor of a matchd killed in turn under load (issue 12,
# supervision): broker, finalizer, directory, relay, gateway, lifecycle,
# pair_lock, swipe (MM_FAILPOINT=kill_actor=NAME@MS, docs/matchd.md). The
# node must fail loudly, never limp on: it logs which actor stopped, drains,
# and exits 70 within the kill time + its drain bound + 2 s; the database
# holds nobody in two sessions; and a node started again on the same stores
# serves (a pair joins and is matched).
#   core_kill_test.sh MATCHD MATCHCTL REDIS_DIR PG_DIR
set -euo pipefail
matchd=$1 matchctl=$2 redis_dir=$3 pg_dir=$4
redis_port=$(cat "$redis_dir/port")
pg_port=$(cat "$pg_dir/port")
work=$(mktemp -d /tmp/core_kill.XXXXXX)
db="core_kill_$$"
psql=(psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres)
"${psql[@]}" -d postgres -c "CREATE DATABASE $db" >/dev/null
conninfo="host=127.0.0.1 port=$pg_port user=postgres dbname=$db"
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
secret="core-kill-secret-0123456789"
kill_ms=2000
drain_ms=3000
pid=""
fail() {
  echo "FAIL: $*"
  [ -f "$work/matchd.log" ] && tail -n 20 "$work/matchd.log" | cut -c1-300
  exit 1
}
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true; }
trap cleanup EXIT

start_matchd() { # PORT [FAILPOINT]
  MM_FAILPOINT=${2:-} "$matchd" --listen "127.0.0.1:$1" --secret "$secret" \
    --node core-kill --redis "127.0.0.1:$redis_port" --postgres "$conninfo" \
    --log-level warn --drain-timeout "$drain_ms" --queues q0,q1,q2,q3,again \
    >"$work/matchd.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "matchd not ready"
}

for name in broker finalizer directory relay gateway lifecycle pair_lock swipe; do
  port=$(free_port)
  t0=$(date +%s%N)
  start_matchd "$port" "kill_actor=$name@$kill_ms"
  "$matchctl" load --url "http://127.0.0.1:$port" --secret "$secret" \
    --users 3000 --rate 1000 --queues 4 --prefix "$name$$-" --no-progress \
    --settle-ms 2000 >"$work/load-$name.out" 2>&1 &
  loader=$!
  bound_ms=$((kill_ms + drain_ms + 2000))
  # A node that limps on (serves nothing, never exits) fails here.
  for _ in $(seq $(( (bound_ms + 5000) / 100 ))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && fail "$name killed: matchd still runs"
  set +e
  wait "$pid"
  rc=$?
  set -e
  pid=""
  took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$name killed: matchd exited $rc, ${took_ms} ms after start (bound ${bound_ms} ms)"
  [ "$rc" = 70 ] || fail "$name: exit status $rc, not 70"
  [ "$took_ms" -le "$bound_ms" ] || fail "$name: exit took ${took_ms} ms"
  grep -q "core actor $name stopped" "$work/matchd.log" \
    || fail "$name: the log does not name the stopped actor"
  wait "$loader" || true # users of a node that went away: not checked here
done

double=$("${psql[@]}" -d "$db" -c "SELECT count(*) FROM (SELECT user_id FROM session_members GROUP BY user_id HAVING count(*) > 1) d")
echo "database: $double users in two sessions"
[ "$double" = 0 ] || fail "double bookings in the database"

# The stores are fine: a node started again serves.
port=$(free_port)
start_matchd "$port"
ctl=("$matchctl" --url "http://127.0.0.1:$port" --secret "$secret")
"${ctl[@]}" join --user "again$$-a" --queue again --ticket t1 >/dev/null
"${ctl[@]}" join --user "again$$-b" --queue again --ticket t1 >/dev/null
st=""
for _ in $(seq 100); do
  st=$("${ctl[@]}" state --user "again$$-a" --ticket t1 || true)
  echo "$st" | grep -q '"matched"' && break
  sleep 0.05
done
echo "$st" | grep -q '"matched"' || fail "a restarted node did not match: $st"
kill -TERM "$pid"
wait "$pid" || fail "the restarted node exited $?"
pid=""
rm -rf "$work"
echo "PASS"
