# shellcheck shell=bash
# bench/connections.sh: `bench/run connections`, sourced by bench/run (which
# owns $root, $build, $dir, the private redis on $port, free_port and the
# cleanup trap).
#
# Many connected users on one node (issue 34; docs/matchd.md "Many
# connected users"): one matchd on the private Redis + PostgreSQL holds
# CONN_USERS WebSockets (default 100,000, spread over 127.0.0.x source
# addresses, CONN_PER_PROC a matchctl process), CONN_WAITING of them (0.9)
# waiting in the queue `hold` where nobody matches them (a value of its
# `equal` attribute each; the server's pings are their heartbeats), the
# rest idle; then nobody joins: CONN_IDLE_S (10) s right after connecting,
# CONN_SETTLE_S (65) s while the one-off timers of the connects and joins
# fire, and CONN_IDLE_S s of steady state (the idle window); then
# CONN_JOIN_RATE (1,000) joins/s in all for CONN_JOIN_S (60) s into
# `default` (match, one member ends, both join again). matchd's RSS and
# CPU are read from /proc here: before any user, and over both idle
# windows once every process has connected all of its users. Where the descriptor hard limit holds fewer
# than CONN_USERS (a process cannot raise it), CONN_USERS is cut to fit and
# the run says so.
# Last lines: connections_held=N, connections_rss_kib_per_user=X,
# connections_join_p99_ms=X (the largest of the processes'),
# connections_idle_cpu_pct=X. CONN_PERF=FILE records a perf profile of
# matchd over the idle window; CONN_MATCHD_ARGS adds matchd flags (e.g.
# "--heartbeat 30000 --ws-idle-timeout 120000").

conn_users=${CONN_USERS:-100000}
conn_waiting=${CONN_WAITING:-0.9}
conn_idle_s=${CONN_IDLE_S:-10}
conn_settle_s=${CONN_SETTLE_S:-65}
conn_join_rate=${CONN_JOIN_RATE:-1000}
conn_join_s=${CONN_JOIN_S:-60}
conn_open_rate=${CONN_OPEN_RATE:-2000}
conn_secret="bench-connections-secret-0123456789"
conn_mpid=""

# conn_switches: context switches of all of matchd's threads so far, by
# thread name ("name:count ..."), for the idle window's wake-up rate.
conn_switches() {
  local t
  for t in /proc/"$conn_mpid"/task/*; do
    awk -v n="$(cat "$t/comm")" '/ctxt_switches/ { s += $2 } END { print n, s }' "$t/status"
  done | awk '{ s[$1] += $2 } END { for (n in s) printf "%s:%d ", n, s[n] }'
}

# conn_sample: "RSS_KIB CPU_S" of matchd now.
conn_sample() {
  local rss ticks
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$conn_mpid/status")
  ticks=$(sed 's/.*) //' "/proc/$conn_mpid/stat" | awk '{ print $12 + $13 }')
  echo "$rss $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')"
}

connections_main() {
  cmake --build "$build" -j2 --target matchd matchctl >/dev/null
  local hard want=$conn_users per procs
  hard=$(ulimit -Hn)
  if [ "$hard" != unlimited ] && [ $((hard - 400)) -lt "$conn_users" ]; then
    conn_users=$((hard - 400))
  fi
  if [ "$hard" = unlimited ]; then per=50000; else per=$((hard - 200)); fi
  per=${CONN_PER_PROC:-$per}
  procs=$(( (conn_users + per - 1) / per ))
  "$root/tests/support/postgres_server.sh" start "$dir/pg" >/dev/null
  local pgport
  pgport=$(cat "$dir/pg/port")
  psql -X -q -h 127.0.0.1 -p "$pgport" -U postgres -d postgres \
    -c "CREATE DATABASE connections" >/dev/null
  echo "# bench/run connections: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg); descriptor hard limit $hard; $conn_users"\
" users (asked $want) over $procs matchctl process(es), waiting"\
" $conn_waiting, idle ${conn_idle_s}s, $conn_join_rate joins/s for ${conn_join_s}s"
  cat >"$dir/conn_rules.json" <<'JSON'
{"hold": {"attributes": {"room": {"type": "string"}},
          "rules": [{"kind": "equal", "attribute": "room"}]}}
JSON
  local mport extra=()
  mport=$(free_port)
  read -r -a extra <<<"${CONN_MATCHD_ARGS:-}"
  "$build/bin/matchd" --listen "127.0.0.1:$mport" --secret "$conn_secret" \
    --node conn --redis "127.0.0.1:$port" \
    --postgres "host=127.0.0.1 port=$pgport user=postgres dbname=connections" \
    --queues default,hold --rules "$dir/conn_rules.json" \
    --max-connections $((conn_users + 100)) --rate 100000 --log-level warn \
    "${extra[@]}" >"$dir/conn_matchd.log" 2>&1 &
  conn_mpid=$!
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  sleep 2
  local before t_open p idle_for pids=() n
  before=$(conn_sample)
  # Each process waits long enough for the others to connect, then the
  # idle window, before it joins.
  idle_for=$(( conn_users / conn_open_rate + 2 * conn_idle_s + conn_settle_s + 10 ))
  t_open=$(date +%s.%N)
  for ((p = 0; p < procs; ++p)); do
    n=$(( p == procs - 1 ? conn_users - p * per : per ))
    "$build/bin/matchctl" --url "http://127.0.0.1:$mport" \
      --secret "$conn_secret" connections --users "$n" \
      --waiting "$conn_waiting" --open-rate $((conn_open_rate / procs)) \
      --idle-s "$idle_for" --join-rate $((conn_join_rate / procs)) \
      --join-s "$conn_join_s" --sources "127.0.0.$((2 * p + 1))" \
      --sources "127.0.0.$((2 * p + 2))" --prefix "cb$$-$p-" --settle-s 30 \
      >"$dir/conn_$p.out" 2>"$dir/conn_$p.err" &
    pids+=($!)
  done
  # Every process connected: the idle window, measured here.
  local done_procs=0
  while [ "$done_procs" -lt "$procs" ]; do
    sleep 1
    done_procs=$(cat "$dir"/conn_*.out 2>/dev/null | grep -c '^connected=' || true)
    if ! kill -0 "${pids[0]}" 2>/dev/null && [ "$done_procs" -lt "$procs" ]; then
      cat "$dir/conn_0.out" "$dir/conn_0.err" | tail -5
      echo "bench/run connections: a load process ended early" >&2
      exit 1
    fi
  done
  local opened_s held_at idle_from idle_to t0 t1
  opened_s=$(awk -v a="$(date +%s.%N)" -v b="$t_open" 'BEGIN { printf "%.0f", a - b }')
  sleep 2
  # Right after connecting: the one-off timers of each user's connect and
  # join (the requests' timeouts, the session's first idle check, all
  # within a minute) still fire, and no socket has been pinged yet.
  local e0 e1 te0 te1
  e0=$(conn_sample); te0=$(date +%s.%N)
  sleep "$conn_idle_s"
  e1=$(conn_sample); te1=$(date +%s.%N)
  # Then the steady state, the figure: nothing but what lasts.
  sleep "$conn_settle_s"
  local sw0 sw1 r0 r1
  sw0=$(conn_switches)
  r0=$(redis_cpu)
  idle_from=$(conn_sample); t0=$(date +%s.%N)
  if [ -n "${CONN_PERF:-}" ]; then
    # A profile of the idle window (perf record's file), for finding its cost.
    perf record -q -g -F 999 -p "$conn_mpid" -o "$CONN_PERF" \
      -- sleep "$conn_idle_s" >/dev/null 2>&1
  else
    sleep "$conn_idle_s"
  fi
  idle_to=$(conn_sample); t1=$(date +%s.%N)
  r1=$(redis_cpu)
  sw1=$(conn_switches)
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  local held=0 p99=0 line
  for ((p = 0; p < procs; ++p)); do
    line=$(grep '^connections_held=' "$dir/conn_$p.out" || true)
    held=$(( held + $(sed -n 's/^connections_held=\([0-9]*\).*/\1/p' <<<"$line") ))
    p99=$(sed -n 's/^connections_join_p99_ms=\([0-9.]*\).*/\1/p' "$dir/conn_$p.out" \
            | awk -v m="$p99" '{ print ($1 > m ? $1 : m) }')
    grep -E '^(users|first_error|connections_join|verdict)' "$dir/conn_$p.out" \
      | sed "s/^/# proc $p: /"
  done
  echo "# matchd RSS before any user $(cut -d' ' -f1 <<<"$before") KiB, all"\
" connected $(cut -d' ' -f1 <<<"$idle_to") KiB; connected in ${opened_s} s"
  awk -v c1="$(cut -d' ' -f2 <<<"$e1")" -v c0="$(cut -d' ' -f2 <<<"$e0")" \
    -v t1="$te1" -v t0="$te0" -v s="$conn_settle_s" \
    'BEGIN { printf "# idle CPU right after connecting %.2f %% (then %d s of settling)\n", 100 * (c1 - c0) / (t1 - t0), s }'
  echo "# idle window: context switches by thread (name:count)"\
" before $sw0; after $sw1"
  # Redis's share: the waiting tickets' re-scans run there too.
  awk -v r1="$r1" -v r0="$r0" -v t1="$t1" -v t0="$t0" \
    'BEGIN { printf "# idle window: Redis CPU %.2f %%\n", 100 * (r1 - r0) / (t1 - t0) }'
  [ "$rc" = 0 ] || echo "# a load process reported a failure (verdict above)"
  echo "connections_held=$held"
  awk -v a="$(cut -d' ' -f1 <<<"$idle_to")" -v b="$(cut -d' ' -f1 <<<"$before")" \
    -v n="$conn_users" 'BEGIN { printf "connections_rss_kib_per_user=%.2f\n", (a - b) / n }'
  echo "connections_join_p99_ms=$p99"
  awk -v c1="$(cut -d' ' -f2 <<<"$idle_to")" -v c0="$(cut -d' ' -f2 <<<"$idle_from")" \
    -v t1="$t1" -v t0="$t0" \
    'BEGIN { printf "connections_idle_cpu_pct=%.2f\n", 100 * (c1 - c0) / (t1 - t0) }'
  kill "$conn_mpid" 2>/dev/null || true
  wait "$conn_mpid" 2>/dev/null || true
  conn_mpid=""
}
