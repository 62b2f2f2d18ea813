#!/usr/bin/env bash
# The JavaScript client's tests (clients/js/test/, Node's test runner)
# against a real matchd on the embedded stores.
#   js_client_test.sh MATCHD CLIENT_DIR
set -euo pipefail
matchd=$1 client_dir=$2
# shellcheck source=../support/free_port.sh
. "$(dirname "$0")/../support/free_port.sh"
work=$(mktemp -d /tmp/js_client.XXXXXX)
port=$(free_port)
secret="js-client-test-secret-0123456789"
# "trio": a lobby of 2..3 players, parties of up to 2 (docs/groups.md),
# backfill at a member's request;
# "ready": a 1-vs-1 with a ready check.
echo '{"trio": {"shape": {"players": {"min": 2, "max": 3}, "party_max": 2,
  "fill_after_s": 600, "backfill": "manual"}},
  "ready": {"shape": {"players": {"min": 2, "max": 2},
    "teams": {"count": 2, "size": 1}, "accept_timeout_s": 5}}}' \
  >"$work/rules.json"
"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node js-test \
  --queues default,trio,ready --rules "$work/rules.json" \
  --log-level warn >"$work/matchd.log" 2>&1 &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
cd "$client_dir"
set +e
MATCHD_URL="http://127.0.0.1:$port" MATCHD_SECRET="$secret" \
  node --test --test-reporter=spec test/client.test.js
rc=$?
# The Node example runs as documented (clients/js/README.md).
if [ "$rc" = 0 ]; then
  export MATCHD_URL="http://127.0.0.1:$port" MATCHD_SECRET="$secret"
  sign() { node --input-type=module -e "import {token} from './test/support.js'; console.log(token('$1'))"; }
  ALICE_USER="ex-alice-$$" BOB_USER="ex-bob-$$" ALICE_TOKEN=$(sign "ex-alice-$$") \
    BOB_TOKEN=$(sign "ex-bob-$$") timeout 20 node examples/match_two.mjs >"$work/example.out" 2>&1
  rc=$?
  cat "$work/example.out"
  grep -q "^alice hears: session.ended by ex-bob-$$ (bye)" "$work/example.out" || rc=1
fi
set -e
if [ "$rc" != 0 ]; then
  echo "--- matchd log"; tail -n 30 "$work/matchd.log"
fi
exit "$rc"
