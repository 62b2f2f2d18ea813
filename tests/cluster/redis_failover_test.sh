#!/usr/bin/env bash
# matchd on the private Redis Cluster (3 primaries + 3 replicas) and
# PostgreSQL under `matchctl load` over 100 queues (so every shard holds
# queues); a primary is SIGKILLed mid-load and its replica takes over.
# Checker (matchctl's verdict, then the database): 0 double bookings, every
# user that did not cancel matched or still waiting, nobody in two active
# sessions, every match event delivered. The time from the kill until the
# node answers joins on the failed shard's queues again is printed
# (docs/benchmarks.md, "Shards").
#   redis_failover_test.sh MATCHD MATCHCTL CLUSTER_DIR PG_DIR SOURCE_DIR
set -euo pipefail
matchd=$1 matchctl=$2 cluster_dir=$3 pg_dir=$4 src=$5
seeds=$(cat "$cluster_dir/seeds")
pg_port=$(cat "$pg_dir/port")
work=$(mktemp -d /tmp/redis_failover.XXXXXX)
db="failover_$$"
psql=(psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres)
"${psql[@]}" -d postgres -c "CREATE DATABASE $db" >/dev/null
conninfo="host=127.0.0.1 port=$pg_port user=postgres dbname=$db"
# shellcheck source=../support/free_port.sh
. "$src/tests/support/free_port.sh"
port=$(free_port)
secret="failover-test-secret-0123456789"
queue_count=100
pid= victim_index=
fail() {
  echo "FAIL: $*"
  tail -n 30 "$work/matchd.log" | cut -c1-400
  exit 1
}
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  # Leave the fixture's cluster whole for the tests after this one.
  if [ -n "$victim_index" ]; then
    "$src/tests/support/redis_cluster.sh" restart "$cluster_dir" "$victim_index" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node failover \
  --redis "$seeds" --postgres "$conninfo" --log-level warn \
  --queues "$(seq -s, -f 'q%g' 0 $((queue_count - 1))),probe" \
  >"$work/matchd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || fail "matchd not ready"

# Every replica in sync (a test before may have restarted a node): one that
# has not finished its first sync refuses to take over.
for _ in $(seq 400); do
  up=0
  while read -r p; do
    redis-cli -p "$p" info replication | tr -d '\r' | grep -q '^master_link_status:up$' && up=$((up + 1))
  done <"$cluster_dir/ports"
  [ "$up" -ge 3 ] && break
  sleep 0.05
done
[ "$up" -ge 3 ] || fail "the cluster's replicas are not in sync"

# The primary of the probe queue's slot is the victim (the load's 100
# queues are on every shard, so on the victim's too).
p1=$(head -n 1 "$cluster_dir/ports")
slot=$(redis-cli -p "$p1" cluster keyslot 'mm:{probe}:waiting')
victim_port=$(redis-cli -p "$p1" cluster slots | python3 -c '
import sys
lines = [l.strip() for l in sys.stdin]
slot = int(sys.argv[1])
# CLUSTER SLOTS as redis-cli prints it: start, end, host, port, id, ... per range
i = 0
while i + 3 < len(lines):
    try:
        a, b = int(lines[i]), int(lines[i + 1])
    except ValueError:
        i += 1
        continue
    if a <= slot <= b and not lines[i + 2].isdigit():
        print(lines[i + 3]); break
    i += 1
' "$slot")
[ -n "$victim_port" ] || fail "no primary found for slot $slot"
victim_index=$(grep -n -x "$victim_port" "$cluster_dir/ports" | cut -d: -f1)
victim_pid=$(cat "$cluster_dir/n$victim_index/redis.pid")

"$matchctl" load --url "http://127.0.0.1:$port" --secret "$secret" \
  --users 12000 --rate 1500 --cancel-rate 0.05 --queues "$queue_count" \
  --prefix "fo$$-" --no-progress --json "$work/report.json" --settle-ms 20000 \
  --min-availability 0 \
  >"$work/load.out" 2>&1 &
loader=$!
sleep 3
t_kill=$(date +%s%N)
kill -KILL "$victim_pid"
echo "killed the primary on port $victim_port (slot $slot of the probe queue)"

# Until a join into the probe queue (on the failed shard) is answered 200
# again; a new user each time (a join answered 503 may have been taken).
resumed_ms=""
for i in $(seq 400); do
  token=$("$matchctl" --secret "$secret" token "probe-$i")
  code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -X POST \
           -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
           -d '{"queue":"probe","ticket":"t-1"}' \
           "http://127.0.0.1:$port/v1/users/probe-$i/tickets" || true)
  if [ "$code" = 200 ] || [ "$code" = 201 ] || [ "$code" = 202 ]; then
    resumed_ms=$(( ($(date +%s%N) - t_kill) / 1000000 ))
    break
  fi
  sleep 0.05
done
[ -n "$resumed_ms" ] || fail "joins into the failed shard's queue did not resume"
echo "failover: joins on the failed shard answered again ${resumed_ms} ms after the SIGKILL"

set +e
wait "$loader"
lrc=$?
set -e
cat "$work/load.out" | tail -n 5
[ "$lrc" = 0 ] || fail "matchctl load found violations (exit $lrc)"
grep -q '^verdict=ok' "$work/load.out" || fail "verdict not ok"

# The database agrees: nobody in two active sessions.
twice=$("${psql[@]}" -d "$db" -c "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE active GROUP BY user_id HAVING count(*) > 1) x")
[ "$twice" = 0 ] || fail "$twice users in two active sessions"
# Nobody in an active session waits in a queue (a ticket re-created after
# the failover for a user the database had matched: issue 15, "Redis may
# forget"). Each queue's user index lives on its slot's node: redis-cli -c
# follows the redirects.
"${psql[@]}" -d "$db" -c "SELECT user_id FROM session_members WHERE active AND user_id LIKE 'fo$$-%'" \
  | sort >"$work/active.txt"
live=""
for s in ${seeds//,/ }; do # the killed primary is one of the seeds
  if redis-cli -h "${s%:*}" -p "${s#*:}" ping 2>/dev/null | grep -q PONG; then
    live=$s
    break
  fi
done
[ -n "$live" ] || fail "no Redis Cluster node answers"
for q in $(seq 0 $((queue_count - 1))); do
  # The users' pointers: '#' .. user fields of the tickets hash
  # (lua/lib/common.lua).
  redis-cli -c -h "${live%:*}" -p "${live#*:}" --raw hkeys "mm:{q$q}:tickets" | sed -n 's/^#//p'
done | sort >"$work/queued.txt"
both=$(comm -12 "$work/active.txt" "$work/queued.txt" | wc -l)
echo "users in an active session and in a queue: $both"
[ "$both" = 0 ] || fail "$both users in an active session still wait in a queue: $(comm -12 "$work/active.txt" "$work/queued.txt" | head -3 | tr '\n' ' ')"
echo "redis_failover_test: ok (resumed ${resumed_ms} ms after the kill)"
