#!/usr/bin/env bash
# Three matchd nodes on loopback sharing one Redis and one PostgreSQL
# (deploy/cluster-local.sh), driven by `matchctl load` over all three.
#   cluster_test.sh load    MATCHCTL   30,000 users spread over the nodes:
#       zero double bookings, zero lost users, every event delivered to both.
#   cluster_test.sh kill    MATCHCTL   the same with node 3 SIGKILLed in the
#       middle, then node 3 restarted with the same id taking traffic again.
#   cluster_test.sh groups  MATCHCTL   a 5-vs-5 queue (q0) with parties of
#       1..3, a party's members and the parties over all three nodes: every
#       match whole, no party split, every member told (docs/groups.md).
#       Then a 2-vs-2 with a ready check (q1), 10 % of answers declining,
#       members answering on their own nodes: no proposal leaked, no
#       requeued user lost, no double booking.
#       Then a 2-vs-2 with backfill (q3): 40 % of the matched leave, the
#       sessions go on with three and ask for players; the seats are
#       filled across nodes, never over 4, every fill told to every
#       member still listening, nobody in two sessions.
#   cluster_test.sh groups_kill MATCHCTL   the same with node 3 SIGKILLed
#       2 s in, while its claims commit groups: nobody of a party that kept
#       listening lost or stuck, no double booking, no partial session.
#   cluster_test.sh groups_kill_before_commit MATCHCTL   node 3 kills
#       itself at its first group commit with the rows written, COMMIT not
#       sent (MM_FAILPOINT, docs/matchd.md); groups_kill_after_commit: right
#       after the COMMIT, the queue not yet settled. The same checks.
#   cluster_test.sh groups_kill_proposals MATCHCTL   a 2-vs-2 with a 6 s
#       ready check (q2), each member ignoring 30 % of its proposals so
#       that most stay open; node 3 kills itself once it holds 100 open
#       proposals (MM_FAILPOINT): within their lease the store settles every
#       one, no member of a surviving node stuck, lost, or in a session it
#       did not accept.
set -euo pipefail
mode=$1 matchctl=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(mktemp -d /tmp/mm_cluster.XXXXXX)
cluster="$root/deploy/cluster-local.sh"
fail() { echo "FAIL: $*"; exit 1; }
trap '"$cluster" stop "$dir" >/dev/null 2>&1 || true' EXIT
# Short presence windows so that the dead node's tickets lapse within the
# test (the environment sits below the command line, docs/matchd.md).
# A short outbox lease likewise: the dead node's leased events are
# delivered by another node's relay once it runs out.
export MATCHD_TICKET_TTL=3000 MATCHD_HEARTBEAT=1000 MATCHD_LOG_LEVEL=warn
export MATCHD_OUTBOX_LEASE=8000
# The nodes serve the loads' queues q0..q99 (matchctl load --queues 100, 4).
MATCHD_QUEUES=$(seq -s, -f 'q%g' 0 99)
export MATCHD_QUEUES
case $mode in groups*) grouped=true ;; *) grouped=false ;; esac
if $grouped; then
  cat >"$dir/rules.json" <<'JSON'
{"q0": {"attributes": {"skill": {"type": "number", "min": 0, "max": 5000}},
        "shape": {"players": {"min": 10, "max": 10},
                  "teams": {"count": 2, "size": 5}, "party_max": 3,
                  "balance": "skill"}},
 "q1": {"shape": {"players": {"min": 4, "max": 4},
                  "teams": {"count": 2, "size": 2}, "party_max": 2,
                  "accept_timeout_s": 3}},
 "q2": {"shape": {"players": {"min": 4, "max": 4},
                  "teams": {"count": 2, "size": 2}, "party_max": 2,
                  "accept_timeout_s": 6}},
 "q3": {"shape": {"players": {"min": 3, "max": 4},
                  "teams": {"count": 2, "size": 2}, "party_max": 2,
                  "fill_after_s": 600, "backfill": "auto"}}}
JSON
  export MATCHD_RULES="$dir/rules.json"
  # Plaintext on loopback: CAF 0.17.6's OpenSSL module drops a node-to-node
  # connection under this write load (no SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER;
  # docs/cluster.md "Not done"): on TLS the nodes reconnected ~70 times
  # each in 12 s and a third of the party joins answered 503. Parties
  # across nodes over TLS: cluster_party_test (simulated network) and the
  # retried joins of this load (matchctl asks a 503 again).
  export MATCHD_CLUSTER_INSECURE=true
fi
"$cluster" start "$dir" 3
secret=$(cat "$dir/secret")
urls=()
while read -r u; do urls+=(--url "$u"); done <"$dir/urls"
pg_port=$(cat "$dir/pg/port")
q() { psql -X -q -t -A -h 127.0.0.1 -p "$pg_port" -U postgres -d matchmaker -c "$1"; }
prefix="c$$-"
# How long matchctl waits after the last join for events: a killed node's
# leased events come back after their lease (8 s); with every node alive
# they take milliseconds, and the users left waiting at the end (their
# partner cancelled) hold the run for the whole wait.
settle=20000
[ "$mode" = load ] && settle=8000
load=("$matchctl" load "${urls[@]}" --secret "$secret" --users 30000
      --rate 2000 --queues 100 --cancel-rate 0.05 --cancel-delay-ms 10
      --prefix "$prefix" --no-progress --json "$dir/report.json" --settle-ms "$settle")
# A killed node's users get no answers: their share is not held to a bound.
[ "$mode" = kill ] && load+=(--min-availability 0)

# Every committed event is delivered (a dead node's leased events come back
# after their lease, 8 s, and another node's relay delivers them).
wait_delivered() {
  local n
  for _ in $(seq 90); do
    n=$(q "SELECT count(*) FROM outbox_pending")
    [ "$n" = 0 ] && return 0
    sleep 1
  done
  fail "$n committed events never delivered"
}

if [ "$mode" = load ]; then
  set +e
  "${load[@]}" | tail -n 12
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || fail "matchctl load exited $rc"
  python3 - "$dir/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); c = r["checker"]
print("report:", {k: r[k] for k in ("users", "joined", "matched", "sessions", "cancelled", "waiting")}, c)
assert c["verdict"] == "ok" and r["matched"] > 25000, c
PY
  sessions=$(q "SELECT count(*) FROM match_sessions")
  double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members GROUP BY user_id HAVING count(*) > 1) d")
  cross=$(q "SELECT count(*) FROM match_sessions WHERE (substring(user_a from '[0-9]+\$')::int % 3) <> (substring(user_b from '[0-9]+\$')::int % 3)")
  reported=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sessions'])" "$dir/report.json")
  echo "database: $sessions sessions ($cross across nodes), clients saw $reported; $double users in two sessions"
  [ "$double" = 0 ] || fail "double bookings"
  [ "$sessions" = "$reported" ] || fail "database $sessions vs clients $reported"
  [ "$cross" -gt 0 ] || fail "no match across nodes"
  wait_delivered
  echo "PASS (load)"
  exit 0
fi

# Field NAME of the group load's last line (its verdict).
group_field() { sed -n "/^verdict=/s/.* $1=\([0-9]*\).*/\1/p" "$dir/groups.out"; }
# The group load's verdict ok with no full match left waiting; in the
# database no user in two sessions (of member rows matching FILTER) and
# every session of 10.
check_groups() { # FILTER
  grep -q '^verdict=ok ' "$dir/groups.out" || fail "group verdict"
  local left double sizes
  left=$(group_field matches_left)
  [ "${left:-x}" = 0 ] || fail "a full match left waiting (matches_left=${left:-?})"
  double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members $1 GROUP BY user_id HAVING count(*) > 1) d")
  sizes=$(q "SELECT count(*) FROM (SELECT session_id FROM session_members GROUP BY session_id HAVING count(*) <> 10) s")
  echo "database: $double users in two sessions ($1), $sizes sessions not of 10"
  [ "$double" = 0 ] || fail "double bookings"
  [ "$sizes" = 0 ] || fail "partial matches in the database"
}

if [ "$mode" = groups ]; then
  set +e
  "$matchctl" load "${urls[@]}" --secret "$secret" --users 6000 --rate 1000 \
    --queues 100 --players 10 --teams 2 --party-size 1-3 --skill \
    --prefix "$prefix" --no-progress --settle-ms 8000 >"$dir/groups.out" 2>&1
  rc=$?
  set -e
  grep "matchctl load:" "$dir/groups.out" | head -n 3 || true
  tail -n 3 "$dir/groups.out"
  [ "$rc" = 0 ] || fail "matchctl load (groups) exited $rc"
  check_groups ""
  matched=$(group_field matched)
  # A floor only: matches_left above is the sharp check (what is left
  # depends on the order of arrivals; 100 were left in one run).
  [ "${matched:-0}" -ge 5800 ] || fail "only ${matched:-0} of 6000 matched"
  # No node failed: no party stopped listening (what it missed is excused).
  [ "$(group_field unobserved)" = 0 ] || fail "parties gave up"
  [ "$(group_field cross_node_parties)" -gt 0 ] || fail "no party across nodes"
  # Matches whose members came through more than one node (matchctl knows).
  cross=$(group_field cross_node_sessions)
  echo "$cross sessions across nodes"
  [ "${cross:-0}" -gt 0 ] || fail "no match across nodes"
  # The ready check across nodes (q1, docs/groups.md "Ready check"):
  # members answer on their own nodes, the holder polls; 10 % decline.
  set +e
  "$matchctl" load "${urls[@]}" --secret "$secret" --users 1200 --rate 1000 \
    --queue q1 --players 4 --teams 2 --party-size 1-2 --accept-rate 0.9 \
    --prefix "r$prefix" --no-progress --settle-ms 8000 >"$dir/groups.out" 2>&1
  rc=$?
  set -e
  tail -n 1 "$dir/groups.out"
  [ "$rc" = 0 ] && grep -q '^verdict=ok ' "$dir/groups.out" \
    || fail "matchctl load (ready check) exited $rc"
  [ "$(group_field proposals_leaked)" = 0 ] && [ "$(group_field requeued_lost)" = 0 ] \
    || fail "ready check: proposals leaked or requeued users lost"
  [ "$(group_field declines)" -gt 0 ] && [ "$(group_field cross_node_sessions)" -gt 0 ] \
    || fail "ready check: no declines or no match across nodes"
  double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members GROUP BY user_id HAVING count(*) > 1) d")
  [ "$double" = 0 ] || fail "ready check: double bookings"
  # Backfill across nodes (q3, docs/groups.md "Backfill"): 40 % of the
  # matched leave their 2-vs-2, which goes on with three and asks for
  # players on the node that handled the leave; the parties still arriving
  # on any node fill the seats.
  set +e
  "$matchctl" load "${urls[@]}" --secret "$secret" --users 1500 --rate 400 \
    --queue q3 --players 3-4 --teams 2 --party-size 1-2 --backfill 0.4 \
    --prefix "b$prefix" --no-progress --settle-ms 6000 >"$dir/groups.out" 2>&1
  rc=$?
  set -e
  tail -n 1 "$dir/groups.out"
  [ "$rc" = 0 ] && grep -q '^verdict=ok ' "$dir/groups.out" \
    || fail "matchctl load (backfill) exited $rc"
  [ "$(group_field fills)" -gt 0 ] && [ "$(group_field seats_filled)" -gt 0 ] \
    || fail "backfill: no seat filled"
  [ "$(group_field over_capacity)" = 0 ] && [ "$(group_field double_bookings)" = 0 ] \
    && [ "$(group_field undelivered_events)" = 0 ] \
    || fail "backfill: over capacity, double booked or a fill untold"
  over=$(q "SELECT count(*) FROM (SELECT m.session_id FROM session_members m JOIN match_sessions s ON s.id = m.session_id WHERE m.active AND s.queue = 'q3' GROUP BY m.session_id HAVING count(*) > 4) o")
  [ "$over" = 0 ] || fail "backfill: $over sessions over 4 in the database"
  double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE active GROUP BY user_id HAVING count(*) > 1) d")
  [ "$double" = 0 ] || fail "backfill: double bookings in the database"
  filled=$(q "SELECT count(*) FROM session_members m JOIN match_sessions s ON s.id = m.session_id WHERE s.queue = 'q3' AND m.ord >= 4")
  echo "backfill: $filled members joined running sessions (database)"
  [ "$filled" -gt 0 ] || fail "backfill: no fill in the database"
  wait_delivered
  echo "PASS (groups)"
  exit 0
fi

if [ "$mode" = groups_kill_proposals ]; then
  # Node 3 again, armed: it SIGKILLs itself once its ready check holds
  # $held open proposals (docs/matchd.md, "Failpoints").
  held=100 accept_ms=6000 hold_ms=10000 # q2's accept time; the claim hold
  lease_ms=$((accept_ms + hold_ms))
  "$cluster" kill "$dir" 3 >/dev/null
  MM_FAILPOINT=kill_holding_proposals=$held "$cluster" restart "$dir" 3 >/dev/null
  node3=$(cat "$dir/node3.pid")
  rport=$(cat "$dir/redis/port")
  # Node 3's proposals in the queue store: its 'p:' records, and gpend's
  # leases of groups without a record or with one of node 3 (settled, a
  # proposal leaves both at once: lib/proposals.lua).
  # shellcheck disable=SC2016 # Lua, not shell
  count_lua='local n, orphans = 0, 0
local h = redis.call("HGETALL", KEYS[1])
for i = 1, #h, 2 do
  if h[i]:sub(1, 2) == "p:" and h[i + 1]:sub(1, #ARGV[1] + 1) == ARGV[1] .. "|" then n = n + 1 end
end
for _, e in ipairs(redis.call("ZRANGE", KEYS[2], 0, -1)) do
  if e:sub(1, 1) == "g" then
    local p = redis.call("HGET", KEYS[1], "p:" .. e:sub(2))
    if not p or p:sub(1, #ARGV[1] + 1) == ARGV[1] .. "|" then orphans = orphans + 1 end
  end
end
return {n, orphans}'
  of_node3() { redis-cli -p "$rport" --raw EVAL "$count_lua" 2 'mm:{q2}:gtix' 'mm:{q2}:gpend' node-3 | paste -sd' '; }
  # 30 % of the answers never come: a proposal with a silent member (three
  # in four of them) stays open its whole 6 s, so node 3 piles them up.
  # The load's final look comes after the leases: settle > lease.
  "$matchctl" load "${urls[@]}" --secret "$secret" --users 2400 --rate 400 \
    --queue q2 --players 4 --teams 2 --party-size 1-2 --ignore-rate 0.3 \
    --accept-rate 0.95 --prefix "k$prefix" --no-progress \
    --settle-ms $((lease_ms + 2000)) >"$dir/groups.out" 2>&1 &
  loader=$!
  for _ in $(seq 1200); do
    grep -q "failpoint kill_holding_proposals=$held: .* SIGKILL" "$dir/node3.log" && break
    sleep 0.05
  done
  kill_ms=$(date +%s%3N)
  grep "failpoint kill_holding_proposals" "$dir/node3.log" \
    || fail "node 3 never held $held open proposals"
  sleep 0.2
  # Gone (a zombie is gone too: SIGKILL cannot be caught).
  if kill -0 "$node3" 2>/dev/null && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$node3/stat"; then
    fail "node 3 still runs"
  fi
  at_kill=$(of_node3)
  echo "node 3 died at its failpoint; its proposals in the store (records, leases): $at_kill"
  [ "${at_kill%% *}" -ge $((held / 2)) ] || fail "only ${at_kill%% *} proposals of node 3 in the store"
  # Settled within the lease: every one of them was made before the kill,
  # so its lease ends by kill + accept + hold; a member's re-scan (1 s) or
  # any claim's sweep settles it then.
  settled_ms=
  while [ $(($(date +%s%3N) - kill_ms)) -le $((lease_ms + 5000)) ]; do
    if [ "$(of_node3)" = "0 0" ]; then
      settled_ms=$(($(date +%s%3N) - kill_ms))
      break
    fi
    sleep 0.25
  done
  echo "node 3's proposals settled in the store ${settled_ms:-never} ms after the kill (lease ${lease_ms} ms from the claim)"
  if [ -z "$settled_ms" ] || [ "$settled_ms" -gt $((lease_ms + 2000)) ]; then
    fail "node 3's proposals not settled within the lease: $(of_node3) left"
  fi
  set +e
  wait "$loader"
  rc=$?
  set -e
  grep '^holder=\|^leaked:' "$dir/groups.out" || true
  tail -n 1 "$dir/groups.out"
  [ "$rc" = 0 ] || fail "matchctl load (proposals, node killed) exited $rc"
  grep -q '^verdict=ok ' "$dir/groups.out" || fail "group verdict"
  for f in proposals_leaked requeued_lost unaccepted_sessions over_capacity lost_users; do
    [ "$(group_field $f)" = 0 ] || fail "$f=$(group_field $f)"
  done
  [ "$(group_field unobserved)" -gt 0 ] || fail "no party lost its node"
  [ "$(group_field ignores)" -gt 0 ] || fail "no proposal ignored"
  [ "$(group_field matched)" -gt 0 ] || fail "nobody matched"
  # Members on the surviving nodes heard node 3's proposals; each ended
  # for them, removed ones told within the lease, none leaked.
  line=$(grep '^holder=node-3 ' "$dir/groups.out") || fail "no member of a surviving node heard node 3's proposals"
  h3() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }
  [ "$(h3 heard)" -gt 0 ] || fail "node 3's proposals: none heard: $line"
  [ "$(h3 leaked)" = 0 ] || fail "node 3's proposals leaked: $line"
  # Both ends of a lapse: the silent removed (and told), the others back.
  [ "$(h3 removed)" -gt 0 ] || fail "node 3's proposals: nobody removed: $line"
  [ $(($(h3 later) + $(h3 matched) + $(h3 queued))) -gt 0 ] \
    || fail "node 3's proposals: nobody requeued: $line"
  late=$(($(h3 last_removed_ms) - kill_ms))
  echo "node 3's proposals: last removal told $late ms after the kill"
  [ "$late" -le $((lease_ms + 2000)) ] || fail "a removal told $late ms after the kill"
  [ "$(of_node3)" = "0 0" ] || fail "node 3's proposals back in the store: $(of_node3)"
  double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members GROUP BY user_id HAVING count(*) > 1) d")
  sizes=$(q "SELECT count(*) FROM (SELECT session_id FROM session_members GROUP BY session_id HAVING count(*) <> 4) s")
  echo "database: $double users in two sessions, $sizes sessions not of 4"
  [ "$double" = 0 ] || fail "double bookings"
  [ "$sizes" = 0 ] || fail "partial matches in the database"
  wait_delivered
  echo "PASS ($mode)"
  exit 0
fi

if $grouped; then
  # Node 3 again, armed: it SIGKILLs itself at its first group commit.
  failpoint=${mode#groups_}
  if [ "$failpoint" != kill ]; then
    "$cluster" kill "$dir" 3 >/dev/null
    MM_FAILPOINT=$failpoint "$cluster" restart "$dir" 3 >/dev/null
  fi
  # Parties with a member on node 3 give up with its sockets (counted as
  # unobserved); every other one must end matched or still waiting with no
  # match left to make, and every member of a session must hear of it.
  # The settle covers the way back of the parties node 3 held in a group
  # it never committed, from a kill as late as the last join: the claim
  # hold (10 s), the next re-scan (1 s), the grace a ticket found gone
  # waits for its event (5 s, docs/groups.md), then a claim. 12 s left a
  # full match of such parties waiting at the end once in CI.
  "$matchctl" load "${urls[@]}" --secret "$secret" --users 4000 --rate 1000 --queues 100 \
    --players 10 --teams 2 --party-size 1-3 --skill --prefix "$prefix" \
    --no-progress --settle-ms 20000 >"$dir/groups.out" 2>&1 &
  loader=$!
  if [ "$failpoint" = kill ]; then
    sleep 2
    "$cluster" kill "$dir" 3
  fi
  set +e
  wait "$loader"
  rc=$?
  set -e
  tail -n 3 "$dir/groups.out"
  [ "$rc" = 0 ] || fail "matchctl load (groups, node killed) exited $rc"
  if [ "$failpoint" != kill ]; then
    grep -q "failpoint $failpoint: group .* SIGKILL" "$dir/node3.log" \
      || fail "node 3 did not die at its failpoint"
    kill -0 "$(cat "$dir/node3.pid")" 2>/dev/null && fail "node 3 still runs"
  fi
  # The kill cut some parties off (else this tested nothing).
  [ "$(group_field unobserved)" -gt 0 ] || fail "no party lost its node"
  [ "$(group_field matched)" -ge 500 ] || fail "only $(group_field matched) matched"
  check_groups "WHERE active"
  wait_delivered
  echo "PASS ($mode)"
  exit 0
fi

# kill: node 3 dies 5 s into the run.
"${load[@]}" >"$dir/load.out" 2>&1 &
loader=$!
sleep 5
kill_ms=$(date +%s%3N)
"$cluster" kill "$dir" 3
set +e
wait "$loader"
lrc=$?
set -e
tail -n 12 "$dir/load.out"
echo "matchctl exited $lrc"
python3 - "$dir/report.json" "$lrc" "$prefix" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); c = r["checker"]
lrc, prefix = int(sys.argv[2]), sys.argv[3]
def index(name):
    assert name.startswith(prefix), name
    return int(name[len(prefix):])
dead = lambda i: i % 3 == 2  # user i talks to node i % 3 + 1; node 3 died
# A user is exempt from "matched or still waiting" only when its cancel was
# answered "cancelled" (I3 of docs/design.md holds it to that:
# cancelled_but_matched = 0). A
# cancel that was sent but answered otherwise, or not at all, exempts
# nobody (issue 11: never answer a cancel from a guess).
fine = set(r["matched_users"]) | set(r["cancelled_users"]) | set(r["waiting_users"])
users = r["started"]
missing = [i for i in range(users) if not dead(i) and prefix + str(i) not in fine]
lost = [index(u) for u in r["lost_users"]]
lost_alive = [i for i in lost if not dead(i)]
print("report:", {k: r[k] for k in ("users", "joined", "matched", "sessions", "cancelled",
      "cancel_requested", "waiting", "unreachable", "ended_by_server", "ended_details", "errors")}, c)
print("surviving nodes' users neither matched, cancelled nor waiting:", len(missing),
      [prefix + str(i) for i in missing[:5]])
print("lost users:", len(lost), "of them on surviving nodes:", len(lost_alive))
assert c["double_bookings"] == 0, c
assert c["cancelled_but_matched"] == 0, c
assert c["undelivered_events"] == 0, c
assert not lost_alive, [prefix + str(i) for i in lost_alive[:10]]
assert not missing, [prefix + str(i) for i in missing[:10]]
# matchctl's exit code says the same as its report: 2 for violations (here
# only the dead node's users, lost with it), 0 when there were none; never
# 1 (nothing worked) or a crash.
expected = 0 if c["verdict"] == "ok" else 2
assert lrc == expected, f"matchctl exited {lrc}, its report says {c['verdict']}: expected {expected}"
PY
double=$(q "SELECT count(*) FROM (SELECT user_id FROM session_members GROUP BY user_id HAVING count(*) > 1) d")
[ "$double" = 0 ] || fail "double bookings in the database"
# No ticket of the dead node's users is claimed after its deadline (kill +
# ticket TTL, plus 1 s for clocks and the last heartbeat's round trip).
late=$(q "SELECT count(*) FROM match_sessions WHERE created_at > to_timestamp(($kill_ms + 3000 + 1000) / 1000.0) AND ((substring(user_a from '[0-9]+\$')::int % 3) = 2 OR (substring(user_b from '[0-9]+\$')::int % 3) = 2)")
echo "database: $late matches with a dead node's user after its deadline"
[ "$late" = 0 ] || fail "$late dead users matched after their deadline"
wait_delivered
echo "every committed event delivered"

# The node comes back with the same id and takes traffic again.
"$cluster" restart "$dir" 3
node3=$(sed -n 3p "$dir/urls")
set +e
"$matchctl" load --url "$node3" --secret "$secret" --users 2000 --rate 1000 \
  --queues 4 --cancel-rate 0 --prefix "r$$-" --no-progress >"$dir/restart.out" 2>&1
rrc=$?
set -e
tail -n 1 "$dir/restart.out"
[ "$rrc" = 0 ] || fail "matchctl load on the restarted node exited $rrc"
echo "PASS (kill, restart)"
