#!/usr/bin/env bash
# Many connected users on one matchd (issue 34, docs/matchd.md "Many
# connected users"): 20,000 WebSockets at once on Redis + PostgreSQL,
# spread over two source addresses, every user joins `default` once and
# must hear its match.created on its own socket while all stay open; then
# the database agrees (one session per pair, nobody in two, every outbox
# row delivered). Where the descriptor hard limit is below 20,000 plus
# what matchd needs for its stores (this machine: 20,000, and it cannot be
# raised), the test holds as many as the limit allows and says so.
#   connections_test.sh MATCHD MATCHCTL REDIS_DIR PG_DIR
set -euo pipefail
matchd=$1 matchctl=$2 redis_dir=$3 pg_dir=$4
redis_port=$(cat "$redis_dir/port")
pg_port=$(cat "$pg_dir/port")
work=$(mktemp -d /tmp/connections.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
fail() { echo "FAIL: $*"; tail -20 "$work/matchd.log"; exit 1; }
psql=(psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres)
secret="connections-test-secret-0123456789"
prefix="conn$$-"

want=20000
hard=$(ulimit -Hn)
users=$want
if [ "$hard" != unlimited ] && [ $((hard - 400)) -lt "$want" ]; then
  users=$(( (hard - 400) / 2 * 2 ))
  echo "descriptor hard limit $hard: $users sockets instead of $want"
fi

db="connections_$$"
"${psql[@]}" -d postgres -c "CREATE DATABASE $db" >/dev/null
port=$(free_port)
"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node conn \
  --redis "127.0.0.1:$redis_port" \
  --postgres "host=127.0.0.1 port=$pg_port user=postgres dbname=$db" \
  --max-connections $((users + 100)) --rate 100000 --log-level warn \
  >"$work/matchd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || fail "matchd not ready"
grep -q "descriptor limit" "$work/matchd.log" && fail "matchd: descriptor limit"

set +e
# Sources other than 127.0.0.1: tests running beside this one bind their
# listeners to 127.0.0.1 ports they found free, and 19,600 client sockets
# on that address took one of them (owner_kill_test: EADDRINUSE).
"$matchctl" --url "http://127.0.0.1:$port" --secret "$secret" connections \
  --users "$users" --match-all --open-rate 2000 --idle-s 2 --join-rate 1000 \
  --sources 127.0.0.3 --sources 127.0.0.4 --prefix "$prefix" --pid "$pid" \
  --settle-s 60 >"$work/out" 2>"$work/err"
rc=$?
set -e
cat "$work/out"
[ "$rc" = 0 ] || { tail -5 "$work/err"; fail "matchctl connections exit $rc"; }
grep -q "^connections_held=$users of=$users dropped=0 refused=0" "$work/out" \
  || fail "not every socket held"
grep -q " matched=$users missing_events=0 " "$work/out" \
  || fail "not every user heard its match"
grep -q "^verdict=ok" "$work/out" || fail "verdict"

# The database agrees: a session per pair, nobody in two, all delivered.
q() { "${psql[@]}" -d "$db" -c "$1"; }
for _ in $(seq 100); do
  undelivered=$(q "SELECT count(*) FROM outbox_pending")
  [ "$undelivered" = 0 ] && break
  sleep 0.2
done
sessions=$(q "SELECT count(*) FROM all_sessions WHERE user_a LIKE '${prefix}%'")
double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE active AND user_id LIKE '${prefix}%' GROUP BY user_id HAVING count(*) > 1) d")
echo "sessions=$sessions double=$double undelivered=$undelivered"
[ "$sessions" = $((users / 2)) ] || fail "sessions $sessions, want $((users / 2))"
[ "$double" = 0 ] || fail "$double users in two sessions"
[ "$undelivered" = 0 ] || fail "$undelivered outbox rows undelivered"
kill -TERM "$pid"
wait "$pid" || true
pid=
"${psql[@]}" -d postgres -c "DROP DATABASE $db" >/dev/null
echo "connections_test: ok ($users sockets)"
