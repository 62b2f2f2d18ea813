#!/usr/bin/env bash
# `matchctl load` tells an operator and a script when the node served
# nobody (issue 35): against a matchd whose queue store cannot be reached,
# every join is refused 503; the report prints availability=0.00 and
# matchctl exits non-zero although no invariant broke. Against a healthy
# matchd (embedded stores) the same load prints availability=1.00 and exits
# 0; with --min-availability above what a run reached it exits 3.
#   load_availability_test.sh MATCHD MATCHCTL
set -euo pipefail
matchd=$1 matchctl=$2
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
work=$(mktemp -d /tmp/load_availability.XXXXXX)
secret="availability-secret-0123456789"
fail() { echo "FAIL: $*"; exit 1; }
pid=""
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

start() { # LABEL ARGS...
  local label=$1; shift
  port=$(free_port)
  "$matchd" --listen "127.0.0.1:$port" --secret "$secret" --log-level error \
    "$@" >"$work/matchd_$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "matchd ($label) did not start: $(tail -n 5 "$work/matchd_$label.log")"
}
load() { # LABEL ARGS... -> exit code in $rc, output in $work/LABEL.out
  local label=$1; shift
  set +e
  "$matchctl" load --url "http://127.0.0.1:$port" --secret "$secret" \
    --users 60 --rate 200 --cancel-rate 0 --no-progress --settle-ms 2000 \
    --prefix "$label$$-" "$@" >"$work/$label.out" 2>&1
  rc=$?
  set -e
  echo "$label: exit $rc; $(grep -E '^(availability|verdict)=' "$work/$label.out" | tr '\n' ' ')"
}

# A queue store nobody listens on: every join answered 503.
start down --redis "127.0.0.1:$(free_port)"
load down
grep -q '^availability=0.00 ' "$work/down.out" || fail "no availability=0.00 line: $(tail -n 3 "$work/down.out")"
grep -q '^verdict=ok ' "$work/down.out" || fail "the invariants should hold: $(tail -n 1 "$work/down.out")"
[ "$rc" = 3 ] || fail "every join refused: matchctl exited $rc, want 3"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""

# A healthy node: everyone served.
start up --queues default,q0
load up
grep -q '^availability=1.00 ' "$work/up.out" || fail "availability not 1.00: $(tail -n 3 "$work/up.out")"
[ "$rc" = 0 ] || fail "a healthy run exited $rc: $(tail -n 3 "$work/up.out")"
# The threshold is the operator's: above what the run reached, exit 3.
load strict --queues 2 --min-availability 0.9
# (q0 and q1: matchd serves q0, the users of q1 are refused 404)
grep -qE '^availability=0\.[0-8][0-9] ' "$work/strict.out" || fail "availability: $(tail -n 3 "$work/strict.out")"
[ "$rc" = 3 ] || fail "below --min-availability: exit $rc, want 3"
echo PASS
