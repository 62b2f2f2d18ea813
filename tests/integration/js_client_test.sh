#!/usr/bin/env bash
# The JavaScript client's tests (clients/js/test/, Node's test runner)
# against real matchd nodes on the embedded stores, on every Node of
# tests/support/node_versions.sh (the system's, and Node 22):
# - with MATCHD given, the tests start the node they need themselves
#   (clients/js/test/matchd.js);
# - on a node started here as clients/js/README.md ("Tests") says, named by
#   MATCHD_URL, which the Node example (examples/match_two.mjs) runs on too;
# - a node in open mode (--queues '*') is refused by the tests at once,
#   saying what they need.
#   js_client_test.sh MATCHD CLIENT_DIR
set -euo pipefail
matchd=$1 client_dir=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../support/free_port.sh
. "$here/../support/free_port.sh"
# shellcheck source=../support/node_versions.sh
. "$here/../support/node_versions.sh"
nodes=$(node_versions "$root")
work=$(mktemp -d /tmp/js_client.XXXXXX)
secret="js-client-test-secret-0123456789"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# start_node NAME ARGS...: a matchd on a free port (sets $port), its log in
# $work/NAME.log.
start_node() {
  local name=$1; shift
  port=$(free_port)
  "$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node "$name" \
    --log-level warn "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "FAIL: matchd $name did not get ready"; cat "$work/$name.log"; return 1
}
cd "$client_dir"
rc=0
for node in $nodes; do
  echo "=== Node $("$node" --version): the tests start their own matchd"
  env -u MATCHD_URL -u MATCHD_SECRET MATCHD="$matchd" \
    "$node" --test --test-reporter=spec test/client.test.js || rc=1
done

echo "=== Node $(node --version): a node set up as clients/js/README.md says (MATCHD_URL)"
start_node js-test --queues default,trio,ready --rules test/rules.json
export MATCHD_URL="http://127.0.0.1:$port" MATCHD_SECRET="$secret"
node --test --test-reporter=spec test/client.test.js || rc=1
# The Node example runs as documented (clients/js/README.md).
if [ "$rc" = 0 ]; then
  sign() { node --input-type=module -e "import {sign} from './test/token.js'; console.log(sign('$secret', '$1'))"; }
  ALICE_USER="ex-alice-$$" BOB_USER="ex-bob-$$" ALICE_TOKEN=$(sign "ex-alice-$$") \
    BOB_TOKEN=$(sign "ex-bob-$$") timeout 20 node examples/match_two.mjs >"$work/example.out" 2>&1 || rc=1
  cat "$work/example.out"
  grep -q "^alice hears: session.ended by ex-bob-$$ (bye)" "$work/example.out" || rc=1
fi

echo "=== a node in open mode (--queues '*'): refused, saying what the tests need"
start_node js-open --queues '*'
open_rc=0
MATCHD_URL="http://127.0.0.1:$port" node --test test/client.test.js >"$work/open.out" 2>&1 || open_rc=$?
if [ "$open_rc" = 0 ] || ! grep -q "serves any queue name (--queues '\*').*--queues default,trio,ready --rules clients/js/test/rules.json" "$work/open.out"; then
  echo "FAIL: the tests on an open-mode node exited $open_rc without saying what they need:"
  tail -n 20 "$work/open.out"; rc=1
else
  grep -m1 -o "MATCHD_URL=.*have no shape" "$work/open.out"
fi
if [ "$rc" != 0 ]; then
  echo "--- matchd log"; tail -n 30 "$work/js-test.log"
fi
exit "$rc"
