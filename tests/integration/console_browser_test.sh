#!/usr/bin/env bash
# The web console in headless Chromium against a real matchd under
# `matchctl load` (embedded stores): console_browser.mjs checks the live page
# and two demo pages; this script checks the routes' refusals with curl and
# that a node without the console flags serves none of it.
#   console_browser_test.sh MATCHD MATCHCTL CLIENT_DIR SHOT_DIR
# With MM_UPDATE_SCREENSHOTS=1 the screenshots are also copied to
# docs/images/ (docs/console.md shows them).
set -euo pipefail
matchd=$1 matchctl=$2 client_dir=$3 shot_dir=$4
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../support/free_port.sh
. "$here/../support/free_port.sh"
# shellcheck source=../support/http_expect.sh
. "$here/../support/http_expect.sh"
work=$(mktemp -d /tmp/console_browser.XXXXXX)
mkdir -p "$shot_dir"
port=$(free_port)
port_off=$(free_port)
secret="console-test-secret-0123456789"
console_token="console-operator-token-0123456789"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  tail -n 20 "$work/matchd.log"
  exit 1
}
# A 2-vs-2 with a ready check, for the page's proposal tiles.
cat >"$work/rules.json" <<'JSON'
{"ready": {"shape": {"players": {"min": 4, "max": 4},
                     "teams": {"count": 2, "size": 2},
                     "accept_timeout_s": 3, "backfill": "auto"}}}
JSON
"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node console-test \
  --queues default,demo,ready --rules "$work/rules.json" \
  --console-token "$console_token" --demo-queue demo \
  --log-level warn >"$work/matchd.log" 2>&1 &
pids+=($!)
"$matchd" --listen "127.0.0.1:$port_off" --secret "$secret" --node no-console \
  --log-level warn >"$work/matchd_off.log" 2>&1 &
pids+=($!)
for p in "$port" "$port_off"; do
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$p/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
done
url="http://127.0.0.1:$port"

# The console is off without --console-token: nothing of it is served.
expect 404 unknown_route "http://127.0.0.1:$port_off/console/"
expect 404 unknown_route "http://127.0.0.1:$port_off/console/demo.html"
expect 404 unknown_route "http://127.0.0.1:$port_off/v1/console/stats" -H "Authorization: Bearer $console_token"
expect 404 unknown_route -X POST "http://127.0.0.1:$port_off/v1/console/demo"
# With it: the stats need the operator token, and only it.
expect 401 missing_token "$url/v1/console/stats"
expect 401 bad_console_token "$url/v1/console/stats" -H "Authorization: Bearer ${console_token}x"
expect 401 bad_console_token "$url/v1/console/stats" -H "Authorization: Bearer $(printf '%s' "$console_token" | tr 0 1)"
expect 405 method_not_allowed -X POST "$url/v1/console/stats" -H "Authorization: Bearer $console_token"
expect 200 "" "$url/v1/console/stats" -H "Authorization: Bearer $console_token"
expect 405 method_not_allowed "$url/v1/console/demo"
expect 404 unknown_route --path-as-is "$url/console/../token.cpp"
expect 404 unknown_route "$url/console/nothing.js"
# A demo token acts as its demo user and no other.
expect 200 "" -X POST "$url/v1/console/demo"
demo_user=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["user"])' "$work/body")
demo_token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$work/body")
expect 403 forbidden -X POST "$url/v1/users/someone-else/tickets" -H "Authorization: Bearer $demo_token" -d '{"queue":"demo","ticket":"t"}'
expect 200 "" -X POST "$url/v1/users/$demo_user/tickets" -H "Authorization: Bearer $demo_token" -d '{"queue":"demo","ticket":"t"}'
expect 200 "" -X DELETE "$url/v1/users/$demo_user/tickets/t" -H "Authorization: Bearer $demo_token"
# ... and joins the demo queue only (its JWT's queues claim), alone or as a
# party's leader; the refusal changes nothing.
expect 403 forbidden -X POST "$url/v1/users/$demo_user/tickets" -H "Authorization: Bearer $demo_token" -d '{"queue":"default","ticket":"t2"}'
grep -q "may not join queue 'default'" "$work/body" || fail "demo refusal: $(cat "$work/body")"
expect 404 "" "$url/v1/users/$demo_user/tickets/t2" -H "Authorization: Bearer $demo_token"
expect 200 "" -X POST "$url/v1/users/$demo_user/parties" -H "Authorization: Bearer $demo_token"
demo_party=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["party"])' "$work/body")
expect 403 forbidden -X POST "$url/v1/users/$demo_user/parties/$demo_party/tickets" -H "Authorization: Bearer $demo_token" -d '{"queue":"default","ticket":"t3"}'
expect 200 "" -X POST "$url/v1/users/$demo_user/parties/$demo_party/leave" -H "Authorization: Bearer $demo_token"
# Pages carry their policy.
curl -sI "$url/console/" | grep -qi "^content-security-policy: default-src 'none'; script-src 'self'" \
  || fail "no Content-Security-Policy on /console/"

# Proposals first (the counters only grow): 10 % of the answers decline.
"$matchctl" load --url "$url" --secret "$secret" --users 200 --rate 400 \
  --queue ready --players 4 --teams 2 --accept-rate 0.9 --settle-ms 4000 \
  --prefix rc- --no-progress >"$work/ready.out" 2>&1 \
  || fail "the ready check load: $(tail -n 1 "$work/ready.out")"
# Load on the queue 'default' while the browser looks.
"$matchctl" load --url "$url" --secret "$secret" --users 100000 --rate 400 \
  --duration 25 --settle-ms 500 --no-progress >"$work/load.out" 2>&1 &
load_pid=$!
pids+=("$load_pid")
node "$here/console_browser.mjs" "$url" "$console_token" "$client_dir" "$shot_dir" \
  || fail "the browser checks failed"
kill -TERM "$load_pid" 2>/dev/null || true
# What the stats counted: the demo queue saw exactly the curl user's join
# (cancelled) and the two pages' joins, one match of two users, ended; the
# load's queue counts each matched user's wait once.
expect 200 "" "$url/v1/console/stats" -H "Authorization: Bearer $console_token"
python3 - "$work/body" <<'PY' || fail "the stats do not add up"
import json, sys
s = json.load(open(sys.argv[1]))
q = {x["name"]: x for x in s["queues"]}
d, l = q["demo"], q["default"]
print("demo:", {k: d[k] for k in ("joins", "matched_users", "ended_users", "sessions_active")},
      "ttm count", d["time_to_match"]["count"])
print("default:", {k: l[k] for k in ("joins", "matched_users", "sessions_active")},
      "ttm", {k: l["time_to_match"][k] for k in ("count", "p50_s", "p99_s")})
assert (d["joins"], d["matched_users"], d["ended_users"], d["sessions_active"]) == (3, 2, 2, 0), d
assert d["time_to_match"]["count"] == 2 and sum(d["time_to_match"]["buckets"]) == 2, d
assert l["matched_users"] > 0 and l["joins"] >= l["matched_users"], l
# Every matched user of the load joined through this node: one wait each
# (give or take the few matched between the reads of the two counters).
assert abs(l["time_to_match"]["count"] - l["matched_users"]) <= 2 + l["matched_users"] // 100, l
assert 0 < l["time_to_match"]["p50_s"] <= l["time_to_match"]["p99_s"], l
p = s["node"]["proposals"]
print("proposals:", p, "backfill:", s["node"]["backfill"])
assert p["made"] > 0 and p["accepted"] > 0 and p["declined"] > 0, p
assert p["accepted"] + p["declined"] + p["timed_out"] <= p["made"], p
PY
if [ "${MM_UPDATE_SCREENSHOTS:-0}" = 1 ]; then
  src=$(cd "$here/../.." && pwd)
  mkdir -p "$src/docs/images"
  cp "$shot_dir/console.png" "$src/docs/images/console.png"
  cp "$shot_dir/demo.png" "$src/docs/images/console-demo.png"
  echo "screenshots copied to docs/images/"
fi
echo "console_browser_test: ok"
