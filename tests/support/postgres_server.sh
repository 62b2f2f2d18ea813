#!/usr/bin/env bash
# Starts or stops a private PostgreSQL 15 for the tests: loopback only, on a
# free port, with its own data and socket directories. Never touches the
# machine's PostgreSQL service or clusters.
#   postgres_server.sh start DIR  -> writes DIR/port, DIR/socket, DIR/base
#   postgres_server.sh stop DIR
# MM_PG_OPTS: more server options for `start` (e.g. "-c
# shared_preload_libraries=pg_stat_statements"), appended to postgres' own.
# initdb refuses to run as root, so as root the server runs as `postgres`,
# and its files live in a fresh directory under /tmp (recorded in DIR/base):
# the postgres user may not be able to traverse DIR's parents.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}

bin=${MM_PG_BIN:-/usr/lib/postgresql/15/bin}
owner=$(id -un)
if [ "$(id -u)" = 0 ]; then
  owner=postgres
fi

# Runs a command as the owner of the server files.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$owner" -- "$@"
  else
    "$@"
  fi
}

# shellcheck source=free_port.sh
. "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

stop_server() {
  [ -f "$dir/base" ] || return 0
  local base
  base=$(cat "$dir/base")
  # Only ever remove what this script created.
  case "$base" in
    /tmp/mm-pg.*) ;;
    *) echo "refusing to remove unexpected directory '$base'" >&2; return 1 ;;
  esac
  if [ -f "$base/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$base/data" -m fast -w -t 30 stop >/dev/null \
      || true
  fi
  # A server that did not stop in time: its pid is the first line of
  # postmaster.pid (never kill by name — other servers may run here).
  if [ -f "$base/data/postmaster.pid" ]; then
    pid=$(head -n 1 "$base/data/postmaster.pid" 2>/dev/null) || pid=
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -QUIT "$pid" 2>/dev/null || true
      sleep 1
    fi
  fi
  rm -rf "$base"
  rm -f "$dir/base" "$dir/port" "$dir/socket"
}

case "$cmd" in
  start)
    stop_server || true
    mkdir -p "$dir"
    base=$(mktemp -d /tmp/mm-pg.XXXXXX)
    echo "$base" > "$dir/base"
    chmod 755 "$base"
    install -d -o "$owner" -m 700 "$base/data"
    install -d -o "$owner" -m 755 "$base/sock"
    if ! as_owner "$bin/initdb" -D "$base/data" -U postgres -A trust -E UTF8 \
         --no-locale >"$base/initdb.log" 2>&1; then
      echo "initdb failed:" >&2
      cat "$base/initdb.log" >&2
      stop_server || true
      exit 1
    fi
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      if as_owner "$bin/pg_ctl" -D "$base/data" -l "$base/data/server.log" \
           -o "-p $port -k $base/sock -c listen_addresses=127.0.0.1 ${MM_PG_OPTS:-}" \
           -w -t 20 start >/dev/null; then
        echo "$port" > "$dir/port"
        echo "$base/sock" > "$dir/socket"
        echo "postgres started on 127.0.0.1:$port, data in $base/data"
        exit 0
      fi
      # Most likely the port was taken meanwhile: try another one.
      as_owner "$bin/pg_ctl" -D "$base/data" -m immediate -w stop \
        >/dev/null 2>&1 || true
    done
    echo "could not start postgres in $base/data" >&2
    tail -n 20 "$base/data/server.log" >&2 || true
    stop_server || true
    exit 1
    ;;
  stop)
    stop_server
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
