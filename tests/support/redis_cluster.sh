#!/usr/bin/env bash
# Starts or stops a private Redis Cluster for the tests: 3 primaries + 3
# replicas (REDIS_CLUSTER_PRIMARIES, REDIS_CLUSTER_REPLICAS per primary),
# loopback only, free ports, each node in a directory of its own, no
# persistence. Never touches a system service.
#   redis_cluster.sh start DIR  -> DIR/seeds ("127.0.0.1:P1,127.0.0.1:P2,..."),
#                                  DIR/ports (one per line), DIR/nN/redis.pid
#   redis_cluster.sh restart DIR N  -> node N (1-based, the Nth line of
#                                  DIR/ports) again, with its nodes.conf
#   redis_cluster.sh stop DIR
# The cluster's node timeout is 1000 ms (REDIS_CLUSTER_NODE_TIMEOUT), so a
# killed primary's replica takes over within a few seconds.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
primaries=${REDIS_CLUSTER_PRIMARIES:-3}
replicas=${REDIS_CLUSTER_REPLICAS:-1}
node_timeout=${REDIS_CLUSTER_NODE_TIMEOUT:-1000}

# A free loopback port whose cluster bus port (+10000) is free too.
cluster_port() {
  python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randint(20000, 50000)
    try:
        a = socket.socket(); a.bind(("127.0.0.1", p))
        b = socket.socket(); b.bind(("127.0.0.1", p + 10000))
        a.close(); b.close()
        print(p)
        break
    except OSError:
        pass
PY
}

stop_all() {
  # Read every pid once, before any kill: a Redis that shuts down removes
  # its own pid file, so reading it after the kill races the exit.
  local f pid pids=()
  for f in "$dir"/n*/redis.pid; do
    pid=$(cat "$f" 2>/dev/null) || continue
    [ -n "$pid" ] && pids+=("$pid")
  done
  for pid in "${pids[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]:-}"; do
    [ -n "$pid" ] || continue
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -f "$dir"/n*/redis.pid "$dir/seeds" "$dir/ports"
}

start_node() { # INDEX PORT [keep]
  local d="$dir/n$1"
  [ "${3:-}" = keep ] || rm -rf "$d"
  mkdir -p "$d"
  redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no \
    --cluster-enabled yes --cluster-config-file "$d/nodes.conf" \
    --cluster-node-timeout "$node_timeout" --repl-diskless-sync-delay 0 \
    --daemonize yes --dir "$d" \
    --pidfile "$d/redis.pid" --logfile "$d/redis.log" >/dev/null
  for _ in $(seq 1 100); do
    redis-cli -p "$2" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  echo "redis node $1 on port $2 did not start" >&2
  tail -n 20 "$d/redis.log" >&2 || true
  return 1
}

cluster_ok() { # every node sees state ok and all slots assigned
  local p
  for p in "$@"; do
    redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' \
      | grep -q '^cluster_state:ok$' || return 1
    redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' \
      | grep -q '^cluster_slots_assigned:16384$' || return 1
  done
}

case "$cmd" in
  start)
    stop_all
    mkdir -p "$dir"
    total=$((primaries * (1 + replicas)))
    ports=()
    for i in $(seq 1 "$total"); do
      p=$(cluster_port)
      while printf '%s\n' "${ports[@]:-}" | grep -qx "$p"; do p=$(cluster_port); done
      ports+=("$p")
      start_node "$i" "$p"
    done
    addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" \
         --cluster-yes >"$dir/create.log" 2>&1; then
      echo "redis-cli --cluster create failed" >&2
      cat "$dir/create.log" >&2
      stop_all
      exit 1
    fi
    for _ in $(seq 1 200); do
      cluster_ok "${ports[@]}" && break
      sleep 0.05
    done
    if ! cluster_ok "${ports[@]}"; then
      echo "redis cluster did not reach state ok" >&2
      stop_all
      exit 1
    fi
    # Every replica attached and in sync before a test kills a primary (a
    # replica that never finished its first sync refuses to take over).
    synced() {
      local p n=0
      for p in "${ports[@]}"; do
        redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r' \
          | grep -q '^master_link_status:up$' && n=$((n + 1))
      done
      [ "$n" -ge $((primaries * replicas)) ]
    }
    for _ in $(seq 1 400); do
      synced && break
      sleep 0.05
    done
    synced || { echo "redis cluster replicas did not sync" >&2; stop_all; exit 1; }
    printf '%s\n' "${ports[@]}" >"$dir/ports"
    (IFS=,; echo "${addrs[*]}") >"$dir/seeds"
    echo "redis cluster of $primaries primaries x $replicas replicas on $(cat "$dir/seeds") in $dir"
    ;;
  restart)
    n=${3:?node number}
    p=$(sed -n "${n}p" "$dir/ports")
    [ -n "$p" ] || { echo "no node $n in $dir/ports" >&2; exit 2; }
    start_node "$n" "$p" keep
    ;;
  stop)
    stop_all
    ;;
  *) echo "usage: $0 start|stop DIR | restart DIR N" >&2; exit 2 ;;
esac
