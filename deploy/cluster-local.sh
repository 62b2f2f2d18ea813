#!/usr/bin/env bash
# A three-node matchd cluster on loopback, for trying things out and for the
# cluster tests: a private Redis and PostgreSQL and three matchd nodes, all in
# one private directory, stopped by their pids.
#
#   deploy/cluster-local.sh start DIR [NODES]   start (default 3 nodes); prints
#                                                the nodes' URLs, writes
#                                                DIR/urls, DIR/secret
#   deploy/cluster-local.sh stop DIR             stop everything started in DIR
#   deploy/cluster-local.sh kill DIR N           SIGKILL node N (1-based)
#   deploy/cluster-local.sh restart DIR N        start node N again, same id
#
# Binaries: build/bin/matchd (MATCHD_BIN overrides). Node N listens on
# DIR/nodeN.port (HTTP) and DIR/nodeN.cport (gateway, bound to 127.0.0.1);
# its log is DIR/nodeN.log. Membership goes through Redis (no static peer
# list). The nodes talk over mutual TLS with certificates made by
# deploy/cluster-certs.sh in DIR/certs (node-N.crt/.key, ca-bundle.crt);
# MATCHD_CLUSTER_INSECURE=true runs them on plaintext instead. The nodes
# inherit the MATCHD_* environment (e.g. MATCHD_QUEUES=voice,games; without
# it each serves the one queue "default").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
matchd=${MATCHD_BIN:-$root/build/bin/matchd}
cmd=${1:?start|stop|kill|restart}
dir=${2:?directory}

# shellcheck source=../tests/support/free_port.sh
. "$root/tests/support/free_port.sh"

start_node() { # N
  local n=$1 port cport
  port=$(cat "$dir/node$n.port" 2>/dev/null || free_port)
  cport=$(cat "$dir/node$n.cport" 2>/dev/null || free_port)
  echo "$port" >"$dir/node$n.port"
  echo "$cport" >"$dir/node$n.cport"
  local tls=()
  if [ "${MATCHD_CLUSTER_INSECURE:-false}" != true ]; then
    [ -f "$dir/certs/node-$n.crt" ] \
      || "$root/deploy/cluster-certs.sh" "$dir/certs" "node-$n" >/dev/null
    tls=(--cluster-cert "$dir/certs/node-$n.crt"
         --cluster-key "$dir/certs/node-$n.key"
         --cluster-ca "$dir/certs/ca-bundle.crt")
  fi
  "$matchd" --node "node-$n" --listen "127.0.0.1:$port" \
    --cluster-port "$cport" --cluster-host 127.0.0.1 "${tls[@]}" \
    --redis "127.0.0.1:$(cat "$dir/redis/port")" \
    --postgres "host=127.0.0.1 port=$(cat "$dir/pg/port") user=postgres dbname=matchmaker" \
    --secret "$(cat "$dir/secret")" --log-level "${MATCHD_LOG_LEVEL:-info}" \
    >>"$dir/node$n.log" 2>&1 &
  echo $! >"$dir/node$n.pid"
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "node $n did not become ready; see $dir/node$n.log" >&2
  return 1
}

stop_pid_file() { # FILE SIGNAL
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill "-$2" "$pid" 2>/dev/null || true
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}

case "$cmd" in
  start)
    nodes=${3:-3}
    mkdir -p "$dir"
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/secret"
    "$root/tests/support/redis_server.sh" start "$dir/redis" >/dev/null
    "$root/tests/support/postgres_server.sh" start "$dir/pg" >/dev/null
    psql -X -q -h 127.0.0.1 -p "$(cat "$dir/pg/port")" -U postgres -d postgres \
      -c "CREATE DATABASE matchmaker" >/dev/null
    : >"$dir/urls"
    for n in $(seq "$nodes"); do
      start_node "$n"
      echo "http://127.0.0.1:$(cat "$dir/node$n.port")" >>"$dir/urls"
    done
    echo "$nodes" >"$dir/nodes"
    echo "cluster of $nodes nodes in $dir (secret in $dir/secret):"
    cat "$dir/urls"
    ;;
  stop)
    for f in "$dir"/node*.pid; do
      [ -e "$f" ] && stop_pid_file "$f" TERM
    done
    "$root/tests/support/postgres_server.sh" stop "$dir/pg" >/dev/null 2>&1 || true
    "$root/tests/support/redis_server.sh" stop "$dir/redis" >/dev/null 2>&1 || true
    echo "stopped the cluster in $dir"
    ;;
  kill)
    stop_pid_file "$dir/node${3:?node number}.pid" KILL
    echo "killed node ${3}"
    ;;
  restart)
    start_node "${3:?node number}"
    echo "node ${3} is back on http://127.0.0.1:$(cat "$dir/node${3}.port")"
    ;;
  *)
    echo "usage: $0 start|stop|kill|restart DIR [N]" >&2
    exit 2
    ;;
esac
