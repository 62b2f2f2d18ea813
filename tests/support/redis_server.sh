#!/usr/bin/env bash
# Starts or stops a private redis-server for the tests: loopback only, on a
# free port, in a directory of its own. Never touches a system service.
#   redis_server.sh start DIR   -> writes DIR/port, DIR/redis.pid
#   redis_server.sh stop DIR
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}

# shellcheck source=free_port.sh
. "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

case "$cmd" in
  start)
    "$0" stop "$dir" || true
    mkdir -p "$dir"
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      if redis-server --port "$port" --bind 127.0.0.1 --save '' \
           --appendonly no --daemonize yes --dir "$dir" \
           --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"; then
        for _ in $(seq 1 100); do
          if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
            echo "$port" > "$dir/port"
            echo "redis started on 127.0.0.1:$port in $dir"
            exit 0
          fi
          sleep 0.05
        done
      fi
      "$0" stop "$dir" || true
    done
    echo "could not start redis-server in $dir" >&2
    tail -n 20 "$dir/redis.log" >&2 || true
    exit 1
    ;;
  stop)
    # A Redis that exits removes its pid file: read it once, tolerate it gone.
    if pid=$(cat "$dir/redis.pid" 2>/dev/null) && [ -n "$pid" ]; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/redis.pid" "$dir/port"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
