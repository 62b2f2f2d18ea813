#!/usr/bin/env bash
# matchd under `matchctl load --cycles`: 200 users live through 10 cycles
# each (join, match, hold the session, one member ends it, both see
# session.ended, join again with the same ticket or a new one; 5% of the
# joins cancelled), on the embedded stores and on the private Redis +
# PostgreSQL with the requests on each user's WebSocket (matchctl's default
# with --cycles), and once more on Redis + PostgreSQL over HTTP (--http).
#   matchd_cycles_test.sh MATCHD MATCHCTL REDIS_DIR PG_DIR
# Passes when matchctl exits 0 with verdict=ok and (nearly) every cycle
# completed on both, and PostgreSQL agrees: no user in two active sessions,
# no session of the run left active, as many sessions as the clients saw,
# every outbox row delivered; mm_websocket_requests_total shows which
# transport carried them. Every run runs even when one before it fails.
set -euo pipefail
matchd=$1 matchctl=$2 redis_dir=$3 pg_dir=$4
redis_port=$(cat "$redis_dir/port")
pg_port=$(cat "$pg_dir/port")
work=$(mktemp -d /tmp/matchd_cycles.XXXXXX)
psql=(psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres)
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
secret="cycles-test-secret-0123456789"
users=200 cycles=10 queues=4
fail() { echo "FAIL: $*"; exit 1; }
# A failed check of a store's run; the run's other checks still report.
problems=()
problem() { echo "FAIL: $*"; problems+=("$*"); }

# One store, in a subshell of its own: a failure ends only this store's run.
run_store() {
  local store=$1 transport=$2 prefix="cyc$$-$1-$2-" port db= pid=
  local stores=() over=()
  [ "$transport" = http ] && over=(--http)
  trap '[ -n "${pid:-}" ] && kill -KILL "$pid" 2>/dev/null || true' EXIT
  port=$(free_port)
  if [ "$store" = redis_pg ]; then
    db="cycles_$$_$transport"
    "${psql[@]}" -d postgres -c "CREATE DATABASE $db" >/dev/null
    stores=(--redis "127.0.0.1:$redis_port"
            --postgres "host=127.0.0.1 port=$pg_port user=postgres dbname=$db")
  fi
  "$matchd" --listen "127.0.0.1:$port" --secret "$secret" \
    --node "cycles-$store" "${stores[@]}" --log-level warn \
    --queues "$(seq -s, -f 'q%g' 0 $((queues - 1)))" \
    >"$work/matchd-$store.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null \
    || fail "$store: matchd not ready"

  local t0 rc
  t0=$(date +%s)
  set +e
  "$matchctl" load --url "http://127.0.0.1:$port" --secret "$secret" \
    --users "$users" --cycles "$cycles" --hold-ms 200 --rate 1000 \
    --cancel-rate 0.05 --cancel-delay-ms 10 --queues "$queues" \
    --prefix "$prefix" --settle-ms 3000 --no-progress "${over[@]}" \
    --json "$work/report-$store.json" \
    | tee "$work/load-$store.out"
  rc=${PIPESTATUS[0]}
  set -e
  echo "$store: matchctl load took $(( $(date +%s) - t0 )) s"
  [ "$rc" = 0 ] || problem "$store: matchctl load exited $rc"
  tail -n 1 "$work/load-$store.out" | grep -q '^verdict=ok ' \
    || problem "$store: the verdict is not ok"

  python3 - "$work/report-$store.json" "$users" "$cycles" "$queues" <<'PY' \
    || problem "$store: the report's figures"
import json, sys
r = json.load(open(sys.argv[1]))
users, cycles, queues = (int(a) for a in sys.argv[2:5])
c, cy = r["checker"], r["cycles"]
print("report:", {k: r[k] for k in ("users", "joined", "matched", "sessions", "cancelled")}, cy, c)
assert c["verdict"] == "ok", c
for k in ("double_bookings", "lost_users", "undelivered_events",
          "cancelled_but_matched", "overlapping_sessions",
          "missing_session_ended", "end_mismatches", "in_session_after_end"):
    assert c[k] == 0, (k, c[k])
assert cy["planned"] == users * cycles, cy
# The users kept cycling. Not every cycle completes: the last user of a
# queue may find nobody left to match (it waits, and is not lost:
# lost_users == 0), and a user whose join is refused stops (an error).
assert r["waiting"] <= queues, r["waiting"]
assert cy["completed"] >= 0.9 * cy["planned"], cy
assert cy["sessions_ended"] == r["sessions"], (cy, r["sessions"])
PY

  if [ "$store" = redis_pg ]; then
    q() { "${psql[@]}" -d "$db" -c "$1"; }
    local double active sessions reported undelivered
    double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE active AND user_id LIKE '${prefix}%' GROUP BY user_id HAVING count(*) > 1) d")
    active=$(q "SELECT count(*) FROM match_sessions WHERE status = 'active' AND user_a LIKE '${prefix}%'")
    sessions=$(q "SELECT count(*) FROM all_sessions WHERE user_a LIKE '${prefix}%'")
    reported=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sessions'])" "$work/report-$store.json")
    # The relay marks a row delivered just after pushing it: give the last
    # session.ended rows a moment.
    for _ in $(seq 50); do
      undelivered=$(q "SELECT count(*) FROM outbox_pending")
      [ "$undelivered" = 0 ] && break
      sleep 0.1
    done
    echo "database: $sessions sessions (clients saw $reported), $active still active, $double users in two active sessions, $undelivered events undelivered"
    [ "$double" = 0 ] || problem "users in two active sessions in the database"
    [ "$active" = 0 ] || problem "$active sessions were never ended"
    [ "$sessions" = "$reported" ] || problem "the clients saw $reported sessions, the database has $sessions"
    [ "$undelivered" = 0 ] || problem "$undelivered committed events were never delivered"
  fi
  # Which transport carried the joins, cancels and ends.
  local on_ws
  on_ws=$(curl -fsS "http://127.0.0.1:$port/metrics" |
            awk '/^mm_websocket_requests_total/ { print int($NF) }')
  echo "$store/$transport: ${on_ws:-?} requests on WebSockets"
  if [ "$transport" = socket ]; then
    [ "${on_ws:-0}" -ge $((users * cycles * 9 / 10)) ] \
      || problem "$store/$transport: only ${on_ws:-0} requests on WebSockets"
  else
    [ "${on_ws:-x}" = 0 ] \
      || problem "$store/$transport: ${on_ws:-?} requests on WebSockets"
  fi
  kill -TERM "$pid"
  wait "$pid" || fail "$store: matchd exit status $?"
  pid=
  [ ${#problems[@]} = 0 ] || exit 1
  echo "PASS ($store/$transport)"
}

failed=()
for run in embedded:socket redis_pg:socket redis_pg:http; do
  ( run_store "${run%%:*}" "${run##*:}" ) || failed+=("$run")
done
[ ${#failed[@]} = 0 ] || fail "on ${failed[*]}"
echo PASS
