#!/usr/bin/env bash
# Redis AUTH through the real daemon (issue 15): a private redis-server with
# a password and an ACL user of its own. matchd without a password, with a
# wrong one and with a wrong ACL user stops at start with the named error
# store_auth_failed (exit 2); with the right password (from a file, and as
# an ACL user from the environment) it serves a load whose checker verdict
# is ok; the password is in no log line, not in /metrics, not on the
# command line.
#   redis_auth_test.sh MATCHD MATCHCTL
set -euo pipefail
matchd=$1 matchctl=$2
work=$(mktemp -d /tmp/redis_auth.XXXXXX)
pid= rpid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  [ -n "$rpid" ] && kill -KILL "$rpid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }
secret="redis-auth-secret-0123456789"
password="Pw-3f9c1e-never-logged"
acl_password="Acl-77d0-never-logged"

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$work" --requirepass "$password" --logfile "$work/redis.log" &
rpid=$!
for _ in $(seq 100); do
  redis-cli -p "$rport" -a "$password" --no-auth-warning ping 2>/dev/null | grep -q PONG && break
  sleep 0.05
done
redis-cli -p "$rport" -a "$password" --no-auth-warning \
  ACL SETUSER mm on ">$acl_password" '~*' '&*' '+@all' >/dev/null
printf '%s\n' "$password" >"$work/pw"
printf 'not-the-password\n' >"$work/badpw"

refused() { # NAME ARGS... : matchd must stop at start, naming store_auth_failed
  local name=$1 out rc
  shift
  set +e
  out=$(timeout 20 "$matchd" --listen 127.0.0.1:0 --secret "$secret" \
          --redis "127.0.0.1:$rport" "$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, want 2 ($out)"
  grep -q "store_auth_failed" <<<"$out" || fail "$name: error not named: $out"
  if grep -q -e "$password" -e "$acl_password" -e "not-the-password" <<<"$out"; then
    fail "$name: a password is in the output"
  fi
}
refused "no password"
refused "wrong password" --redis-password-file "$work/badpw"
MATCHD_REDIS_USER=mm refused "wrong ACL user password" --redis-password-file "$work/pw"
MATCHD_REDIS_PASSWORD=$acl_password refused "ACL password as the default user's"

serve() { # NAME ARGS... : matchd serves a load, verdict ok
  local name=$1 port
  shift
  port=$(free_port)
  "$matchd" --listen "127.0.0.1:$port" --secret "$secret" \
    --redis "127.0.0.1:$rport" --log-level debug --queues q0,q1 "$@" \
    >"$work/matchd-$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || fail "$name: matchd not ready"
  "$matchctl" load --url "http://127.0.0.1:$port" --secret "$secret" --no-progress \
    --queues 2 --users 200 --connections 8 --rate 0 --cancel-rate 0 \
    --prefix "$name-" >"$work/load-$name.log" 2>&1 || fail "$name: load failed"
  grep -q '^verdict=ok' "$work/load-$name.log" || fail "$name: verdict not ok"
  curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics-$name.txt"
  if grep -q -e "$password" -e "$acl_password" "$work/metrics-$name.txt"; then
    fail "$name: a password is in /metrics"
  fi
  if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -e "$password" -e "$acl_password"; then
    fail "$name: a password is on the command line"
  fi
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
  if grep -q -e "$password" -e "$acl_password" "$work/matchd-$name.log"; then
    fail "$name: a password is in the log"
  fi
}
serve file --redis-password-file "$work/pw"
MATCHD_REDIS_USER=mm MATCHD_REDIS_PASSWORD=$acl_password serve acl

echo "redis_auth_test: ok"
