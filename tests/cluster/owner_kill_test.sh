#!/usr/bin/env bash
# A cancel whose claimer node was SIGKILLed (issue 11): the answer agrees
# with the database, and it is never a guess.
#   owner_kill_test.sh MATCHCTL [ROUNDS]
# Node 1 comes from deploy/cluster-local.sh (with its own Redis and
# PostgreSQL); node 2 is started here, as this script's child, with a
# failpoint (MM_FAILPOINT, docs/matchd.md) that makes it SIGKILL itself at
# its first commit. Per round: user A joins on node 1 and waits; user B
# joins on node 2 and claims A; node 2 dies (exit status 137 = SIGKILL
# checked); A cancels on node 1.
#   kill_after_commit:  the cancel answers `matched` with the session the
#                       database holds for A; A's state reads the same.
#   kill_before_commit: the cancel answers `cancelled` (from the queue and
#                       the database once the claim can no longer commit,
#                       docs/engine.md), within the bound below, and the
#                       database holds no session for A, then or later.
# --member-ttl is long, so node 1 treats the dead node as live-but-
# unreachable all along: the answer comes from the path under test, not
# from the membership lapse.
set -euo pipefail
matchctl=${1:?matchctl} rounds=${2:-2}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
matchd=${MATCHD_BIN:-$root/build/bin/matchd}
cluster="$root/deploy/cluster-local.sh"
dir=$(mktemp -d /tmp/mm_ownerkill.XXXXXX)
node2_pid=
cleanup() {
  if [ -n "$node2_pid" ] && kill -0 "$node2_pid" 2>/dev/null; then
    kill -KILL "$node2_pid" 2>/dev/null || true
  fi
  "$cluster" stop "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  tail -n 20 "$dir/node1.log" 2>/dev/null | sed 's/^/  node1: /'
  exit 1
}
# Defaults for the stores' bounds: claim hold 10 s, commit bound 2 x the
# 5 s statement timeout. kill_before_commit's answer comes after the hold
# lapsed (<= 10 s after the claim), a sweep or our look removed the record
# (<= 1 s), the commit bound passed (10 s) and one more look (<= 3 s).
bound_before_s=30
bound_after_s=8
export MATCHD_MEMBER_TTL=60000 MATCHD_CLIENT_TTL=120000 MATCHD_LOG_LEVEL=info
# Both nodes serve the rounds' queues (q<n>-<variant>, see run_round).
MATCHD_QUEUES=$(for v in kill_after_commit kill_before_commit; do
  for n in $(seq "$rounds"); do printf 'q%s-%s,' "$n" "$v"; done
done)
export MATCHD_QUEUES=${MATCHD_QUEUES%,}
"$cluster" start "$dir" 1 >/dev/null
secret=$(cat "$dir/secret")
url1=$(sed -n 1p "$dir/urls")
pg_port=$(cat "$dir/pg/port")
q() { psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres -d matchmaker -c "$1"; }
# shellcheck source=../support/free_port.sh
. "$root/tests/support/free_port.sh"
port2=$(free_port)
cport2=$(free_port)
url2="http://127.0.0.1:$port2"

start_node2() { # FAILPOINT
  [ -f "$dir/certs/node-2.crt" ] \
    || "$root/deploy/cluster-certs.sh" "$dir/certs" node-2 >/dev/null
  MM_FAILPOINT=$1 "$matchd" --node node-2 --listen "127.0.0.1:$port2" \
    --cluster-port "$cport2" --cluster-host 127.0.0.1 \
    --cluster-cert "$dir/certs/node-2.crt" --cluster-key "$dir/certs/node-2.key" \
    --cluster-ca "$dir/certs/ca-bundle.crt" \
    --redis "127.0.0.1:$(cat "$dir/redis/port")" \
    --postgres "host=127.0.0.1 port=$pg_port user=postgres dbname=matchmaker" \
    --secret "$secret" >>"$dir/node2.log" 2>&1 &
  node2_pid=$!
  for _ in $(seq 200); do
    curl -fsS "$url2/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "node 2 did not become ready"
}

# HTTP: METHOD URL USER [BODY] -> the body on stdout.
call() {
  local token
  token=$("$matchctl" --secret "$secret" token "$3")
  curl -sS --max-time 60 -X "$1" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' ${4:+--data "$4"} "$2"
}
field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
now_ms() { date +%s%3N; }

run_round() { # VARIANT N
  local variant=$1 n=$2
  local a="a$n-$variant-$$" b="b$n-$variant-$$" queue="q$n-$variant" ticket="t-$n"
  start_node2 "$variant"
  local r
  r=$(call POST "$url1/v1/users/$a/tickets" "$a" "{\"queue\":\"$queue\",\"ticket\":\"$ticket\"}")
  [ "$(field state <<<"$r")" = queued ] || fail "A's join: $r"
  call POST "$url1/v1/users/$a/tickets/$ticket/heartbeat" "$a" >/dev/null
  # B claims A on node 2; node 2's finalizer kills the process at the
  # failpoint, so B's request gets no answer.
  call POST "$url2/v1/users/$b/tickets" "$b" "{\"queue\":\"$queue\",\"ticket\":\"$ticket\"}" >/dev/null 2>&1 || true
  set +e
  wait "$node2_pid"
  local rc=$?
  set -e
  node2_pid=
  [ "$rc" = 137 ] || fail "node 2 exited $rc, not by SIGKILL (137)"
  grep -q "failpoint $variant: pair" "$dir/node2.log" || fail "node 2 died elsewhere than at its failpoint"
  local active
  active=$(q "SELECT session_id FROM session_members WHERE user_id = '$a' AND active")
  if [ "$variant" = kill_after_commit ]; then
    [ -n "$active" ] || fail "kill_after_commit: no session for A in the database"
  else
    [ -z "$active" ] || fail "kill_before_commit: the database holds session $active for A"
  fi
  # A cancels on node 1 while B's claim (by the dead node) holds her ticket.
  local t0 t1 answer state sid took
  t0=$(now_ms)
  answer=$(call DELETE "$url1/v1/users/$a/tickets/$ticket" "$a")
  t1=$(now_ms)
  took=$((t1 - t0))
  state=$(field state <<<"$answer")
  sid=$(field session_id <<<"$answer")
  local db_after
  db_after=$(q "SELECT session_id FROM session_members WHERE user_id = '$a' AND active")
  echo "round $n $variant: cancel answered '$state'${sid:+ (session $sid)} after $took ms; database: '${db_after:-no session}'"
  if [ "$variant" = kill_after_commit ]; then
    [ "$state" = matched ] || fail "kill_after_commit: cancel answered $answer"
    [ "$sid" = "$active" ] || fail "kill_after_commit: answered session $sid, the database holds $active"
    [ "$took" -le $((bound_after_s * 1000)) ] || fail "kill_after_commit: answer after $took ms (bound ${bound_after_s} s)"
    local st
    st=$(call GET "$url1/v1/users/$a/tickets/$ticket" "$a")
    [ "$(field state <<<"$st")" = matched ] && [ "$(field session_id <<<"$st")" = "$active" ] \
      || fail "kill_after_commit: A's state reads $st"
  else
    [ "$state" = cancelled ] || fail "kill_before_commit: cancel answered $answer"
    [ "$took" -le $((bound_before_s * 1000)) ] || fail "kill_before_commit: answer after $took ms (bound ${bound_before_s} s)"
    [ -z "$db_after" ] || fail "kill_before_commit: cancelled, but the database holds $db_after for A"
    grep -q "cancel of .*$a.* honoured: owner node node-2 cannot be asked" "$dir/node1.log" \
      || fail "kill_before_commit: the answer did not come from the owner-unreachable path"
    # Nothing lands later either: no session for A, ever; her state stays.
    sleep 2
    local later
    later=$(q "SELECT count(*) FROM session_members WHERE user_id = '$a'")
    [ "$later" = 0 ] || fail "kill_before_commit: A is in $later session(s) after her cancel"
    local st
    st=$(call GET "$url1/v1/users/$a/tickets/$ticket" "$a")
    [ "$(field state <<<"$st")" = cancelled ] || fail "kill_before_commit: A's state reads $st"
  fi
}

for n in $(seq "$rounds"); do
  run_round kill_after_commit "$n"
done
for n in $(seq "$rounds"); do
  run_round kill_before_commit "$n"
done
echo "PASS (owner kill: $rounds rounds after commit, $rounds before commit)"
