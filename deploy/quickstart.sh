#!/usr/bin/env bash
# First run on a fresh Debian 12 machine: installs the packages, builds,
# starts matchd on the embedded defaults (embedded queue store, in-memory
# persistence) on a free loopback port, drives a short `matchctl load`
# against its HTTP/WebSocket API, prints the result and stops matchd.
# Extra arguments go to `matchctl load` (e.g. --users 20000 --rate 5000).
# matchd serves the one queue `default` (no --queues), which is the queue
# `matchctl load` joins (with its default --queues 1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
bash deploy/build.sh

work=$(mktemp -d /tmp/matchd-quickstart.XXXXXX)
# shellcheck source=../tests/support/free_port.sh
. tests/support/free_port.sh
port=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
build/bin/matchd --listen "127.0.0.1:$port" --secret "$secret" >"$work/matchd.log" 2>&1 &
pid=$!
stop() {
  kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
head -n 2 "$work/matchd.log"
echo "matchd ready on http://127.0.0.1:$port (log: $work/matchd.log)"
build/bin/matchctl load --url "http://127.0.0.1:$port" --secret "$secret" \
  --users 4000 --rate 2000 --cancel-rate 0.05 "$@"
