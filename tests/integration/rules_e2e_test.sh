#!/usr/bin/env bash
# Match rules through the real daemon and CLI (docs/rules.md), on the
# embedded stores: matchd refuses an unusable rules file by name (exit 2);
# over HTTP a join with typed attributes waits with its windows in its
# state, bad attributes are 400 invalid_attribute and create nothing, an
# incompatible user is not paired while a compatible one is; matchctl
# explain answers compatible (0) / incompatible naming the rule (1) / bad
# input (2).
#   rules_e2e_test.sh MATCHD MATCHCTL
set -euo pipefail
matchd=$1 matchctl=$2
work=$(mktemp -d /tmp/rules_e2e.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
fail() { echo "FAIL: $*"; [ -f "$work/matchd.log" ] && tail -20 "$work/matchd.log"; exit 1; }
secret="rules-e2e-secret-0123456789"

cat >"$work/rules.json" <<'JSON'
{"ranked": {
  "attributes": {"skill": {"type": "number", "min": 0, "max": 5000},
                 "region": {"type": "string", "values": ["eu", "us"]}},
  "rules": [
    {"kind": "distance", "attribute": "skill", "base": 50, "step": 50,
     "every_s": 5, "cap": 400},
    {"kind": "equal", "attribute": "region"}]}}
JSON
echo '{"ranked": {"rules": [{"kind": "distance", "attribute": "elo"}]}}' \
  >"$work/bad.json"

# An unusable rules file: exit 2, the error named.
set +e
out=$("$matchd" --listen 127.0.0.1:0 --secret "$secret" --queues ranked \
        --rules "$work/bad.json" 2>&1)
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad rules: exit $rc, want 2 ($out)"
grep -q "invalid_rules" <<<"$out" || fail "bad rules not named: $out"
set +e
out=$("$matchd" --listen 127.0.0.1:0 --secret "$secret" --queues other \
        --rules "$work/rules.json" 2>&1)
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "rules of an unserved queue: exit $rc, want 2"

port=$(free_port)
"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --queues ranked,plain \
  --rules "$work/rules.json" --log-level warn >"$work/matchd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || fail "matchd not ready"

MATCHCTL=$matchctl PORT=$port SECRET=$secret python3 - <<'PY'
import json, os, subprocess, sys, time, urllib.request, urllib.error
port, secret, mc = os.environ["PORT"], os.environ["SECRET"], os.environ["MATCHCTL"]
def token(user):
    return subprocess.check_output([mc, "--secret", secret, "token", user],
                                   text=True).strip()
def call(method, user, path, body=None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token(user),
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
def join(user, attrs, queue="ranked"):
    return call("POST", user, f"/v1/users/{user}/tickets",
                {"queue": queue, "ticket": "t-1", "attrs": attrs})
def state(user):
    return call("GET", user, f"/v1/users/{user}/tickets/t-1")[1]
def check(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)

s, a = join("alice", {"skill": 1500, "region": "eu"})
check(s == 200 and a["state"] == "queued", f"alice: {s} {a}")
w = state("alice")
check(w.get("windows", {}).get("skill") == 50, f"alice's windows: {w}")
for bad, reason in [({"skill": "x", "region": "eu"}, "wrong_type"),
                    ({"skill": 1500}, "missing_attribute"),
                    ({"skill": 1500, "region": "mars"}, "bad_value"),
                    ({"skill": 1500, "region": "eu", "hat": 1}, "unknown_attribute"),
                    ({"skill": 99999, "region": "eu"}, "out_of_range")]:
    s, r = join("mallory", bad)
    check(s == 400 and r["error"] == "invalid_attribute"
          and r["detail"].startswith(reason + ":"), f"{bad}: {s} {r}")
s, r = call("GET", "mallory", "/v1/users/mallory/tickets/t-1")
check(s == 404, f"a refused join left a ticket: {s} {r}")
# Other region, far skill: not paired; near skill, same region: paired.
s, b = join("bob", {"skill": 1510, "region": "us"})
check(s == 200 and b["state"] == "queued", f"bob: {s} {b}")
s, c = join("carol", {"skill": 1900, "region": "eu"})
check(s == 200 and c["state"] == "queued", f"carol: {s} {c}")
s, d = join("dave", {"skill": 1530, "region": "eu"})
deadline = time.time() + 10
while time.time() < deadline and state("dave")["state"] != "matched":
    time.sleep(0.05)
sd, sa = state("dave"), state("alice")
check(sd["state"] == "matched" and sa["state"] == "matched"
      and sd["session_id"] == sa["session_id"], f"dave {sd} alice {sa}")
check(state("bob")["state"] == "queued" and state("carol")["state"] == "queued",
      "an incompatible user was paired")
# A queue without rules keeps opaque string attributes.
s, p = join("erin", "anything at all", queue="plain")
check(s == 200 and p["state"] == "queued", f"plain queue: {s} {p}")
print("http checks passed")
PY

ex() {
  # No --secret: a dry run of the rules file needs no server and no token.
  env -u MATCHD_SECRET "$matchctl" explain --rules "$work/rules.json" --queue ranked "$@"
}
set +e
out=$(ex --a '{"skill": 1000, "region": "eu"}' --b '{"skill": 1300, "region": "eu"}')
rc=$?
[ "$rc" -eq 1 ] && grep -q '"attribute":"skill"' <<<"$out" \
  || fail "explain far apart: $rc $out"
out=$(ex --a '{"skill": 1000, "region": "eu"}' --a-waited 30 \
         --b '{"skill": 1300, "region": "eu"}' --b-waited 25)
rc=$?
[ "$rc" -eq 0 ] && grep -q '"compatible":true' <<<"$out" \
  || fail "explain widened: $rc $out"
out=$(ex --a '{"skill": 1000, "region": "eu"}' --b '{"skill": 1000, "region": "us"}')
rc=$?
[ "$rc" -eq 1 ] && grep -q '"attribute":"region"' <<<"$out" \
  || fail "explain regions: $rc $out"
out=$(ex --a '{"skill": "x", "region": "eu"}' --b '{"skill": 1, "region": "eu"}')
rc=$?
[ "$rc" -eq 2 ] && grep -q 'invalid_attribute' <<<"$out" \
  || fail "explain bad input: $rc $out"
set -e
echo "rules_e2e_test: ok"
