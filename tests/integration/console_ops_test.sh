#!/usr/bin/env bash
# The console's logins, roles, actions and audit log (docs/console.md
# "Acting") against a real matchd (embedded stores): curl checks the
# refusals (no token, a wrong one, a viewer's action, bad ids, a user of
# another node, a malformed operators file), pause/resume of a queue and
# drain/resume of the node; console_ops.mjs drives headless Chromium (an
# operator cancels a ticket and ends a session, a viewer cannot); the
# audit file holds every action with who asked.
#   console_ops_test.sh MATCHD MATCHCTL CLIENT_DIR SHOT_DIR
set -euo pipefail
matchd=$1 matchctl=$2 client_dir=$3 shot_dir=$4
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../support/free_port.sh
. "$here/../support/free_port.sh"
# shellcheck source=../support/http_expect.sh
. "$here/../support/http_expect.sh"
work=$(mktemp -d /tmp/console_ops.XXXXXX)
mkdir -p "$shot_dir"
port=$(free_port)
secret="console-ops-secret-0123456789"
alice="alice-operator-token-0123456789"
victor="victor-viewer-token-0123456789"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  tail -n 20 "$work/matchd.log" 2>/dev/null || true
  exit 1
}
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat >"$work/operators.json" <<JSON
{"operators": [
  {"name": "alice", "role": "operator", "token_sha256": "$(sha "$alice")"},
  {"name": "victor", "role": "viewer", "token_sha256": "$(sha "$victor")"}]}
JSON

# A malformed operators file: matchd names the entry and does not start.
echo '{"operators": [{"name": "x", "role": "admin", "token_sha256": "00"}]}' >"$work/bad.json"
set +e
timeout 20 "$matchd" --listen "127.0.0.1:$(free_port)" --secret "$secret" \
  --console-operators "$work/bad.json" >"$work/bad.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "a bad operators file: exit $rc, want 2"
grep -q 'operators\[0\]: role must be' "$work/bad.log" || fail "bad file: $(cat "$work/bad.log")"

"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node ops-test \
  --queues default,other,third --console-operators "$work/operators.json" \
  --console-audit "$work/audit.log" --console-history-interval 1 \
  --log-level warn >"$work/matchd.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
url="http://127.0.0.1:$port"

as_alice=(-H "Authorization: Bearer $alice")
as_victor=(-H "Authorization: Bearer $victor")
user_auth() { echo "Authorization: Bearer $("$matchctl" --secret "$secret" token "$1")"; }

# Logins: each token is its operator, with its role; no shared token.
expect 401 missing_token "$url/v1/console/whoami"
expect 401 bad_console_token "$url/v1/console/whoami" -H "Authorization: Bearer ${alice}x"
expect 200 "" "$url/v1/console/whoami" "${as_alice[@]}"
grep -q '"role":"operator"' "$work/body" || fail "alice: $(cat "$work/body")"
expect 200 "" "$url/v1/console/whoami" "${as_victor[@]}"
grep -q '"role":"viewer"' "$work/body" || fail "victor: $(cat "$work/body")"
expect 405 method_not_allowed -X POST "$url/v1/console/whoami" "${as_alice[@]}"

# A waiting user (u1 alone in 'default') and a matched pair (u2, u3 in
# 'other'); all three have their link on this node.
expect 200 "" -X POST "$url/v1/users/u1/tickets" -H "$(user_auth u1)" -d '{"queue":"default","ticket":"t1"}'
expect 200 "" -X POST "$url/v1/users/u2/tickets" -H "$(user_auth u2)" -d '{"queue":"other","ticket":"t2"}'
expect 200 "" -X POST "$url/v1/users/u3/tickets" -H "$(user_auth u3)" -d '{"queue":"other","ticket":"t3"}'
for _ in $(seq 100); do
  expect 200 "" "$url/v1/users/u2/tickets/t2" -H "$(user_auth u2)"
  grep -q '"state":"matched"' "$work/body" && break
  sleep 0.1
done
grep -q '"state":"matched"' "$work/body" || fail "u2 was not matched: $(cat "$work/body")"
session=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$work/body")

# Refusals change nothing.
expect 403 forbidden_role -X POST "$url/v1/console/users/u1/tickets/t1/cancel" "${as_victor[@]}"
expect 200 "" "$url/v1/users/u1/tickets/t1" -H "$(user_auth u1)"
grep -q '"state":"queued"' "$work/body" || fail "a viewer's cancel changed u1: $(cat "$work/body")"
expect 404 user_not_here "$url/v1/console/users/nobody-here" "${as_alice[@]}"
expect 404 user_not_here -X POST "$url/v1/console/users/nobody-here/tickets/t/cancel" "${as_alice[@]}"
expect 400 invalid_argument "$url/v1/console/users/bad%20id" "${as_alice[@]}"
expect 404 not_found -X POST "$url/v1/console/users/u1/tickets/not-t1/cancel" "${as_alice[@]}"
expect 405 method_not_allowed "$url/v1/console/users/u1/tickets/t1/cancel" "${as_alice[@]}"
expect 404 unknown_queue -X POST "$url/v1/console/queues/nowhere/pause" "${as_alice[@]}"
expect 403 forbidden_role -X POST "$url/v1/console/queues/third/pause" "${as_victor[@]}"
expect 403 forbidden_role -X POST "$url/v1/console/node/drain" "${as_victor[@]}"

# Pause 'third' (u6 waiting in it): joins refused 503 queue_paused, who
# waits stays; resume: u4's join is taken (and matched with u6).
expect 200 "" -X POST "$url/v1/users/u6/tickets" -H "$(user_auth u6)" -d '{"queue":"third","ticket":"t6"}'
expect 200 "" -X POST "$url/v1/console/queues/third/pause" "${as_alice[@]}"
expect 503 queue_paused -X POST "$url/v1/users/u4/tickets" -H "$(user_auth u4)" -d '{"queue":"third","ticket":"t4"}'
expect 200 "" "$url/v1/users/u6/tickets/t6" -H "$(user_auth u6)"
grep -q '"state":"queued"' "$work/body" || fail "a pause dropped u6: $(cat "$work/body")"
expect 200 "" "$url/v1/console/stats" "${as_victor[@]}"
grep -q '"paused_queues":\["third"\]' "$work/body" || fail "stats: paused queues missing"
expect 200 "" -X POST "$url/v1/console/queues/third/resume" "${as_alice[@]}"
expect 200 "" -X POST "$url/v1/users/u4/tickets" -H "$(user_auth u4)" -d '{"queue":"third","ticket":"t4"}'
# Drain: not ready, joins refused; resume: ready again.
expect 200 "" -X POST "$url/v1/console/node/drain" "${as_alice[@]}"
expect 503 "" "$url/readyz"
expect 503 shutting_down -X POST "$url/v1/users/u5/tickets" -H "$(user_auth u5)" -d '{"queue":"default","ticket":"t5"}'
expect 200 "" -X POST "$url/v1/console/node/resume" "${as_alice[@]}"
expect 200 "" "$url/readyz"

# The last hour: a sample a second here; u2 and u3 (and u4, u6) were
# matched through this node.
sleep 2
expect 200 "" "$url/v1/console/history" "${as_victor[@]}"
python3 - "$work/body" <<'PY' || fail "the history: $(cat "$work/body")"
import json, sys
h = json.load(open(sys.argv[1]))
s = h["samples"]
assert h["interval_s"] == 1 and len(s) >= 3, h
assert s[-1]["matched_users"] - s[0]["matched_users"] >= 4, s
assert all(a["t_ms"] < b["t_ms"] and a["joins"] <= b["joins"] for a, b in zip(s, s[1:])), s
assert len(s[-1]["time_to_match"]) == 16 and sum(s[-1]["time_to_match"]) >= 4, s[-1]
PY
expect 401 missing_token "$url/v1/console/history"

# The page: the operator cancels u1's ticket and ends u2's session; the
# viewer cannot.
node "$here/console_ops.mjs" "$url" "$alice" "$victor" u1 u2 "$client_dir" "$shot_dir" \
  || fail "the browser checks failed"

# What the users see: u1's ticket cancelled; the session ended by u2 (the
# operator acted as the member), the reason naming the operator.
expect 200 "" "$url/v1/users/u1/tickets/t1" -H "$(user_auth u1)"
grep -q '"state":"cancelled"' "$work/body" || fail "u1 not cancelled: $(cat "$work/body")"
expect 200 "" -X POST "$url/v1/users/u3/sessions/$session/end" -H "$(user_auth u3)" -d "{}"
python3 - "$work/body" <<'PY' || fail "the session's end: $(cat "$work/body")"
import json, sys
b = json.load(open(sys.argv[1]))
assert b["ended_now"] is False and b["ended_by"] == "u2", b
assert b["reason"] == "ended by operator alice", b
PY

# The audit file: every action and lookup, with who asked and how it ended.
python3 - "$work/audit.log" <<'PY' || fail "the audit log: $(cat "$work/audit.log")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def has(action, op, status, **target):
    return any(r["action"] == action and r["operator"] == op and r["status"] == status
               and all(r["target"].get(k) == v for k, v in target.items()) for r in rows)
assert has("cancel_ticket", "alice", 200, user="u1", ticket="t1"), rows
assert has("end_session", "alice", 200, user="u2"), rows
assert has("cancel_ticket", "victor", 403, user="u1"), rows
assert has("end_session", "victor", 403, user="u2"), rows
assert has("pause_queue", "alice", 200, queue="third"), rows
assert has("drain_node", "alice", 200) and has("drain_node", "victor", 403), rows
assert all(r["role"] in ("viewer", "operator") and r["at_ms"] > 0 for r in rows), rows
assert [r for r in rows if r["status"] == 403][0]["error"] == "forbidden_role", rows
print("audit entries:", len(rows))
PY
echo "console_ops_test: ok"
