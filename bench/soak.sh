# shellcheck shell=bash
# bench/soak.sh: `bench/run soak`, sourced by bench/run (which owns $root,
# $build, $dir, the private redis on $port, free_port and the cleanup trap).
#
# A long-running node: one matchd on the private Redis + PostgreSQL driven
# by `matchctl load --cycles` (each virtual user: join, match, hold the
# session, end it, join again) through SOAK_USERS x SOAK_CYCLES
# user-lifecycles. matchctl's progress line (stderr) gives the cycles done
# so far; after 10 % and 50 % of them and when the run is over, one line
# with matchd's RSS and the sizes of the stores (pg_database_size and row
# counts of the match tables; Redis INFO memory used_memory and DBSIZE).
# Before it, on a matchd and a database of its own, a single-shot `matchctl
# load` (join and match only) measures matches/s on the same machine and
# servers for the comparison. After it, a matchd at its defaults: its RSS
# SOAK_DEFAULTS_WAIT (60) s after the last of SOAK_DEFAULTS_USERS users
# left against its RSS before any user (soak_defaults_rss_ratio=X.XX, the
# second-last line; SOAK_PARTS=defaults runs this part alone). Last line:
# soak_rss_growth_ratio=X.XX (RSS at 100 % / RSS at 10 %).

soak_users=${SOAK_USERS:-100000}
soak_cycles=${SOAK_CYCLES:-10}
soak_single_users=${SOAK_SINGLE_USERS:-$((soak_users < 20000 ? soak_users : 20000))}
soak_concurrency=${SOAK_CONCURRENCY:-$((soak_users / 5 < 2000 ? (soak_users / 5 > 2 ? soak_users / 5 : 2) : 2000))}
soak_queues=${SOAK_QUEUES:-8}
soak_hold_ms=${SOAK_HOLD_MS:-200}
soak_cancel_rate=${SOAK_CANCEL_RATE:-0}
# Short enough that sessions expire and closed rows are pruned during the
# run (matchd's defaults: 3600 s and 7 days).
soak_max_session=${SOAK_MAX_SESSION:-60}
soak_retention=${SOAK_RETENTION:-30}
# matchctl stops starting users after this many seconds (0: no bound).
soak_max_s=${SOAK_MAX_S:-3600}
soak_secret="bench-soak-secret-0123456789"
# matchctl's --settle-ms; it is also its stall bound (no cycle done for that
# long with every slot taken ends the starting). On a machine shared by
# many jobs the first wave of users, which all end their last cycle at about
# the same time, can take longer than 10 s to leave: raise it there.
soak_settle_ms=${SOAK_SETTLE_MS:-10000}
# Top statements by PostgreSQL time to print after each part (0: none). The
# private cluster then loads pg_stat_statements (with planning time), which
# costs a little CPU itself: compare runs with the same setting.
soak_pg_stats=${SOAK_PG_STATS:-0}

soak_mpid=""  # the matchd of the current part
soak_mport=""
soak_db=""
soak_pgport=""

# soak_idle_args: the idle-release option when this matchd has one (another
# branch adds it); its value from SOAK_IDLE_RELEASE, else a short grace
# guessed from the help text's unit (5 s or 5000 ms; true for a switch).
soak_idle_args=()
soak_find_idle_release() {
  local line opt v
  line=$("$build/bin/matchd" --help | grep -E -- '--idle-(release|grace)' \
           | head -n 1 || true)
  [ -n "$line" ] || return 0
  opt=$(echo "$line" | grep -oE -- '--idle-(release|grace)[a-z-]*' | head -n 1)
  if [ -n "${SOAK_IDLE_RELEASE:-}" ]; then
    v=$SOAK_IDLE_RELEASE
  elif echo "$line" | grep -qE -- "$opt +BOOLEAN"; then
    v=true
  elif ! echo "$line" | grep -qE -- "$opt +[A-Z]+([ =]|$)"; then
    soak_idle_args=("$opt") # a plain switch
    return 0
  elif echo "$line" | grep -qwi 'ms'; then
    v=5000
  else
    v=5
  fi
  soak_idle_args=("$opt=$v")
}

# soak_matchd LABEL DB: starts matchd on the private Redis and database DB
# (created here), waits until it is ready; sets soak_mpid and soak_mport.
soak_matchd() {
  local label=$1 db=$2
  psql -X -q -h 127.0.0.1 -p "$soak_pgport" -U postgres -d postgres \
    -c "CREATE DATABASE $db" >/dev/null
  soak_mport=$(free_port)
  "$build/bin/matchd" --listen "127.0.0.1:$soak_mport" --secret "$soak_secret" \
    --node "soak-$label" --log-level warn --threads 2 \
    --queues "$(load_queue_list "$soak_queues")" \
    --redis "127.0.0.1:$port" \
    --postgres "host=127.0.0.1 port=$soak_pgport user=postgres dbname=$db" \
    --max-session "$soak_max_session" --retention "$soak_retention" \
    "${soak_idle_args[@]}" >"$dir/matchd_$label.log" 2>&1 &
  soak_mpid=$!
  local _
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$soak_mport/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$soak_mpid" 2>/dev/null || break
    sleep 0.05
  done
  echo "bench/run: matchd ($label) did not get ready:" >&2
  tail -n 20 "$dir/matchd_$label.log" >&2
  exit 1
}

# soak_pg_reset: forgets the statement statistics (before a part's load).
soak_pg_reset() {
  [ "$soak_pg_stats" -gt 0 ] || return 0
  psql -X -q -h 127.0.0.1 -p "$soak_pgport" -U postgres -d postgres \
    -c "SELECT pg_stat_statements_reset()" >/dev/null
}

# soak_pg_top LABEL DB N UNIT: the statements of database DB since the last
# reset, most PostgreSQL time first: calls and time per UNIT (N of them),
# mean time per call, rows per call; then all statements together.
soak_pg_top() {
  local label=$1 db=$2 n=$3 unit=$4
  [ "$soak_pg_stats" -gt 0 ] && [ "${n:-0}" -gt 0 ] || return 0
  echo "# $label pg_stat_statements (database $db, per $unit of $n;"\
" exec + plan ms):"
  psql -X -q -t -A -F ' | ' -h 127.0.0.1 -p "$soak_pgport" -U postgres \
    -d postgres -v n="$n" -v db="$db" -v top="$soak_pg_stats" <<'SQL' \
    | sed 's/^/#   /'
WITH s AS (
  SELECT * FROM pg_stat_statements
  WHERE dbid = (SELECT oid FROM pg_database WHERE datname = :'db'))
(SELECT to_char(calls::float8 / :n, 'FM9990.000') || ' calls',
        to_char((total_exec_time + total_plan_time) / :n, 'FM9990.000')
          || ' ms',
        to_char(mean_exec_time, 'FM9990.000') || ' ms/call exec',
        to_char(total_plan_time / greatest(calls, 1), 'FM9990.000')
          || ' ms/call plan',
        to_char(rows::float8 / greatest(calls, 1), 'FM999990.0') || ' rows',
        left(regexp_replace(query, '\s+', ' ', 'g'), 110)
 FROM s ORDER BY total_exec_time + total_plan_time DESC LIMIT :top)
UNION ALL
SELECT to_char(sum(calls)::float8 / :n, 'FM9990.000') || ' calls',
       to_char(sum(total_exec_time + total_plan_time) / :n, 'FM9990.000')
         || ' ms',
       '', '', '', 'all statements'
FROM s;
SQL
}

soak_stop_matchd() {
  [ -n "$soak_mpid" ] || return 0
  kill -TERM "$soak_mpid" 2>/dev/null || true
  wait "$soak_mpid" 2>/dev/null || true
  soak_mpid=""
}

# matchctl load against the current matchd with the run's shared options;
# run it as `soak_load ... &`: it execs, so $! is matchctl itself (its CPU,
# the cleanup's kill).
soak_load() {
  exec "$build/bin/matchctl" load --url "http://127.0.0.1:$soak_mport" \
    --secret "$soak_secret" --threads 2 --abrupt-close --connections 64 \
    --rate 0 --concurrency "$soak_concurrency" --queues "$soak_queues" \
    --cancel-rate "$soak_cancel_rate" --settle-ms "$soak_settle_ms" "$@"
}

# field KEY LINE: the value of KEY=... in LINE.
soak_field() {
  echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# -- CPU accounting (where the time goes) ------------------------------------
tck=$(getconf CLK_TCK)

# proc_cpu PID [all]: CPU seconds of PID (with "all": and of its waited-for
# children, e.g. PostgreSQL's ended backends); 0 when it is gone.
proc_cpu() {
  awk -v t="$tck" -v all="${2:-}" '{ sub(/^.*\) /, "")
      s = $12 + $13; if (all != "") s += $14 + $15; printf "%.2f\n", s / t }' \
    "/proc/$1/stat" 2>/dev/null || echo 0
}

# postgres: the postmaster with its ended children, and its live children.
soak_pg_cpu() {
  local pid kid sum
  pid=$(head -n 1 "$(cat "$dir/pg/base")/data/postmaster.pid")
  sum=$(proc_cpu "$pid" all)
  for kid in $(ps -o pid= --ppid "$pid"); do
    sum=$(awk -v a="$sum" -v b="$(proc_cpu "$kid")" 'BEGIN { print a + b }')
  done
  echo "$sum"
}

soak_redis_cpu() {
  redis-cli -p "$port" INFO cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.2f\n", s }'
}

# The whole machine's busy CPU seconds (all cores; idle, iowait and steal
# excluded).
soak_machine_cpu() {
  awk -v t="$tck" '/^cpu / { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8) / t }' \
    /proc/stat
}

# soak_cpu: "wall matchd postgres redis machine" now (seconds).
soak_cpu() {
  echo "$(date +%s.%N) $(proc_cpu "$soak_mpid") $(soak_pg_cpu)"\
" $(soak_redis_cpu) $(soak_machine_cpu)"
}

# soak_cpu_line WHAT N BEFORE AFTER CTL: CPU per unit of work between two
# soak_cpu readings, CTL = matchctl's CPU seconds.
soak_cpu_line() {
  local what=$1 n=$2 ctl=$5
  local -a a b
  read -ra a <<<"$3"
  read -ra b <<<"$4"
  awk -v w="$what" -v n="$n" -v ctl="$ctl" -v c="$(nproc)" \
    -v t0="${a[0]}" -v m0="${a[1]}" -v p0="${a[2]}" -v r0="${a[3]}" -v x0="${a[4]}" \
    -v t1="${b[0]}" -v m1="${b[1]}" -v p1="${b[2]}" -v r1="${b[3]}" -v x1="${b[4]}" \
    'BEGIN { if (n <= 0 || t1 <= t0) exit
             m = m1 - m0; p = p1 - p0; r = r1 - r0; x = x1 - x0
             o = x - m - p - r - ctl; if (o < 0) o = 0
             printf "# %s: cpu ms per %s: matchd %.2f, postgres %.2f, redis %.2f,"\
" matchctl %.2f, other processes %.2f; machine busy %.0f %% of %d cores"\
" over %.0f s\n", w, (w ~ /single/ ? "match" : "cycle"), 1000 * m / n,
                    1000 * p / n, 1000 * r / n, 1000 * ctl / n, 1000 * o / n,
                    100 * x / (c * (t1 - t0)), c, t1 - t0 }'
}

# soak_wait HOOK: waits for matchctl ($child), reading its CPU seconds into
# soak_ctl_cpu every 0.5 s and running HOOK each time; returns its exit code.
soak_ctl_cpu=0
soak_wait() {
  local hook=$1 rc=0 c
  while kill -0 "$child" 2>/dev/null; do
    c=$(proc_cpu "$child")
    [ "$c" = 0 ] || soak_ctl_cpu=$c
    "$hook"
    sleep 0.5
  done
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# (1) single-shot matches/s: join and match only, a matchd of its own.
soak_single_rate=""
soak_single() {
  soak_matchd single soak_single
  echo "# soak: single-shot matchctl load, $soak_single_users users (join and"\
" match), concurrency $soak_concurrency, $soak_queues queues"
  local rc=0 last before after
  soak_pg_reset
  before=$(soak_cpu)
  soak_ctl_cpu=0
  soak_load --users "$soak_single_users" --prefix single- --no-progress \
    >"$dir/single.out" 2>&1 &
  child=$!
  soak_wait true || rc=$?
  after=$(soak_cpu)
  soak_stop_matchd
  last=$(grep '^verdict=' "$dir/single.out" | tail -n 1 || true)
  echo "# single-shot: $last"
  soak_cpu_line single-shot "$(soak_field matched "$last" \
    | awk '{ print int($1 / 2) }')" "$before" "$after" "$soak_ctl_cpu"
  soak_pg_top single-shot soak_single "$(soak_field matched "$last" \
    | awk '{ print int($1 / 2) }')" match
  if [ "$rc" != 0 ] || [ -z "$last" ]; then
    tail -n 20 "$dir/single.out" >&2
    echo "bench/run: the single-shot run failed (exit $rc)" >&2
    exit 1
  fi
  soak_single_rate=$(soak_field matches_per_s "$last")
  redis-cli -p "$port" FLUSHALL >/dev/null
}

# (3) matchd at its defaults (no --max-session, --retention or idle option):
# its RSS before any user, then SOAK_DEFAULTS_USERS users through
# SOAK_DEFAULTS_CYCLES cycles, then its RSS every 5 s until
# SOAK_DEFAULTS_WAIT s after the last user left (the load's end: its users
# close their WebSockets). Sets soak_defaults_ratio (RSS then / before).
soak_defaults_ratio=""
soak_defaults() {
  local users=${SOAK_DEFAULTS_USERS:-40000} cycles=${SOAK_DEFAULTS_CYCLES:-2}
  local wait_s=${SOAK_DEFAULTS_WAIT:-60} before warm after t rc=0 last
  psql -X -q -h 127.0.0.1 -p "$soak_pgport" -U postgres -d postgres \
    -c "CREATE DATABASE soak_defaults" >/dev/null
  soak_mport=$(free_port)
  "$build/bin/matchd" --listen "127.0.0.1:$soak_mport" --secret "$soak_secret" \
    --node soak-defaults --log-level warn \
    --queues "$(load_queue_list "$soak_queues")" --redis "127.0.0.1:$port" \
    --postgres "host=127.0.0.1 port=$soak_pgport user=postgres dbname=soak_defaults" \
    >"$dir/matchd_defaults.log" 2>&1 &
  soak_mpid=$!
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$soak_mport/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  sleep 5
  before=$(soak_rss_kb VmRSS)
  # The warm floor: 200 users through the same cycles open the stores'
  # connections, prepare their statements and touch every thread; the RSS
  # that stays once they left is what any node that served users keeps.
  soak_load --users 200 --cycles "$cycles" --hold-ms "$soak_hold_ms" \
    --prefix warm- --no-progress >"$dir/defaults_warm.out" 2>&1 &
  child=$!
  soak_wait true || true
  sleep "$wait_s"
  warm=$(soak_rss_kb VmRSS)
  echo "# soak defaults: matchd at its defaults; RSS before any user"\
" $(awk -v k="$before" 'BEGIN { printf "%.1f", k / 1024 }') MiB, $wait_s s"\
" after 200 users (the warm floor) $(awk -v k="$warm" 'BEGIN { printf "%.1f", k / 1024 }')"\
" MiB; now $users users x $cycles cycles, hold 0-$soak_hold_ms ms"
  soak_load --users "$users" --cycles "$cycles" --hold-ms "$soak_hold_ms" \
    --prefix dflt- --no-progress >"$dir/defaults.out" 2>&1 &
  child=$!
  soak_wait true || rc=$?
  last=$(grep '^verdict=' "$dir/defaults.out" | tail -n 1 || true)
  echo "# soak defaults: ${last:-no verdict (exit $rc)}"
  echo "# soak defaults: RSS when the last user left"\
" $(awk -v k="$(soak_rss_kb VmRSS)" 'BEGIN { printf "%.1f", k / 1024 }') MiB"\
" (peak $(awk -v k="$(soak_rss_kb VmHWM)" 'BEGIN { printf "%.1f", k / 1024 }'))"
  for t in $(seq 5 5 "$wait_s"); do
    sleep 5
    after=$(soak_rss_kb VmRSS)
    echo "# soak defaults: +$t s: RSS $(awk -v k="$after" 'BEGIN { printf "%.1f", k / 1024 }') MiB"
  done
  soak_stop_matchd
  soak_defaults_ratio=$(awk -v a="$after" -v b="$before" \
    'BEGIN { if (b > 0) printf "%.2f", a / b }')
  echo "# soak defaults: RSS $wait_s s after the last user left / before any"\
" user = $soak_defaults_ratio; / the warm floor ="\
" $(awk -v a="$after" -v b="$warm" 'BEGIN { if (b > 0) printf "%.2f", a / b }');"\
" the warm floor / before any user ="\
" $(awk -v a="$warm" -v b="$before" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
  redis-cli -p "$port" FLUSHALL >/dev/null
  [ "$rc" = 0 ] || soak_rc=1
}

# The cycles completed so far, from matchctl's progress line ("\r...cycles N").
soak_done() {
  tail -c 400 "$dir/soak.err" 2>/dev/null | tr '\r' '\n' \
    | grep -oE 'cycles [0-9]+' | tail -n 1 | cut -d' ' -f2 || true
}

soak_rss_kb() {
  awk -v k="$1:" '$1 == k { print $2 }' "/proc/$soak_mpid/status"
}

# soak_sample PERCENT DONE: one line of figures; remembers the RSS.
declare -A soak_rss=()
soak_t0=0
soak_last_t=0
soak_last_n=0
soak_sample() {
  local pct=$1 n=${2:-0} t rss hwm pg redis_mem redis_keys rate
  t=$(date +%s.%N)
  rss=$(soak_rss_kb VmRSS)
  hwm=$(soak_rss_kb VmHWM)
  soak_rss[$pct]=$rss
  read -ra pg <<<"$(psql -X -q -t -A -F ' ' -h 127.0.0.1 -p "$soak_pgport" -U postgres \
          -d "$soak_db" -c "SELECT pg_database_size(current_database()),
            (SELECT count(*) FROM all_sessions),
            (SELECT count(*) FROM match_sessions WHERE status = 'active'),
            (SELECT count(*) FROM session_members),
            (SELECT count(*) FROM outbox),
            (SELECT count(*) FROM outbox_pending)" \
          || true)"
  redis_mem=$(redis-cli -p "$port" INFO memory | tr -d '\r' \
                | sed -n 's/^used_memory://p' || true)
  redis_keys=$(redis-cli -p "$port" DBSIZE || true)
  rate=$(awk -v n="$n" -v m="$soak_last_n" -v t="$t" -v s="$soak_last_t" \
           'BEGIN { printf "%.0f", (t > s) ? (n - m) / (t - s) : 0 }')
  printf '# soak %s%%: %s of %s cycles at %.0f s (%s cycles/s since the last'\
' line); matchd rss %.1f MiB (peak %.1f), cpu %s s; postgres %.1f MiB:'\
' sessions %s (active %s), session_members %s, outbox %s'\
' (undelivered %s); redis used_memory %.1f MiB, dbsize %s\n' \
    "$pct" "$n" "$soak_total" "$(awk -v t="$t" -v s="$soak_t0" 'BEGIN { print t - s }')" \
    "$rate" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" \
    "$(awk -v k="$hwm" 'BEGIN { print k / 1024 }')" "$(proc_cpu "$soak_mpid")" \
    "$(awk -v b="${pg[0]:-0}" 'BEGIN { print b / 1048576 }')" \
    "${pg[1]:-?}" "${pg[2]:-?}" "${pg[3]:-?}" "${pg[4]:-?}" "${pg[5]:-?}" \
    "$(awk -v b="${redis_mem:-0}" 'BEGIN { print b / 1048576 }')" \
    "${redis_keys:-?}"
  # The heap as malloc sees it: RSS rising while "in use" stays flat is
  # memory the allocator keeps, not something matchd holds.
  local metrics
  metrics=$(curl -fsS "http://127.0.0.1:$soak_mport/metrics" 2>/dev/null || true)
  soak_metric() { echo "$metrics" | awk -v n="$1" 'index($1, n "{") == 1 { print $2; exit }'; }
  printf '# soak %s%%: heap in use %.1f MiB, free in arenas %.1f MiB; sessions live %s, client links %s\n' \
    "$pct" "$(awk -v b="$(soak_metric mm_heap_in_use_bytes)" 'BEGIN { print b / 1048576 }')" \
    "$(awk -v b="$(soak_metric mm_heap_free_bytes)" 'BEGIN { print b / 1048576 }')" \
    "$(soak_metric mm_sessions_live)" "$(soak_metric mm_client_links)"
  soak_last_t=$t
  soak_last_n=$n
}

# (2) the soak: users x cycles on a fresh matchd, sampled at 10 / 50 / 100 %.
soak_total=0
soak_run() {
  soak_db=soak
  soak_matchd soak "$soak_db"
  soak_total=$((soak_users * soak_cycles))
  echo "# soak: matchctl load --cycles $soak_cycles --users $soak_users"\
" ($soak_total user-lifecycles), hold 0-$soak_hold_ms ms, concurrency"\
" $soak_concurrency, $soak_queues queues; matchd --max-session"\
" $soak_max_session --retention $soak_retention ${soak_idle_args[*]}"
  soak_t0=$(date +%s.%N)
  soak_last_t=$soak_t0
  soak_sample 0 0
  local before after
  soak_pg_reset
  before=$(soak_cpu)
  soak_ctl_cpu=0
  soak_load --users "$soak_users" --cycles "$soak_cycles" \
    --hold-ms "$soak_hold_ms" --prefix soak- --duration "$soak_max_s" \
    >"$dir/soak.out" 2>"$dir/soak.err" &
  child=$!
  local rc=0 n pct
  soak_wait soak_check || rc=$?
  after=$(soak_cpu)
  n=$(grep '^verdict=' "$dir/soak.out" | tail -n 1 || true)
  n=$(soak_field cycles "$n")
  # A run that ended early still gets every line (same figures).
  for pct in 10 50 100; do
    [ -n "${soak_rss[$pct]:-}" ] || soak_sample "$pct" "${n:-0}"
  done
  soak_cpu_line soak "${n:-0}" "$before" "$after" "$soak_ctl_cpu"
  soak_pg_top soak "$soak_db" "${n:-0}" cycle
  soak_rc=$rc
}

# The hook of soak_wait during the soak: the 10 % and 50 % lines.
soak_check() {
  local n pct
  n=$(soak_done)
  for pct in 10 50; do
    if [ -z "${soak_rss[$pct]:-}" ] \
       && [ "${n:-0}" -ge $((soak_total * pct / 100)) ]; then
      soak_sample "$pct" "$n"
    fi
  done
}

soak_main() {
  if [ "${MM_BENCH_NO_BUILD:-0}" != 1 ]; then
    cmake --build "$build" -j2 --target matchd matchctl >/dev/null
  fi
  soak_find_idle_release
  if [ "$soak_pg_stats" -gt 0 ]; then
    MM_PG_OPTS="${MM_PG_OPTS:-} -c shared_preload_libraries=pg_stat_statements"
    MM_PG_OPTS="$MM_PG_OPTS -c pg_stat_statements.track_planning=on"
    export MM_PG_OPTS
  fi
  "$root/tests/support/postgres_server.sh" start "$dir/pg" >/dev/null
  soak_pgport=$(cat "$dir/pg/port")
  if [ "$soak_pg_stats" -gt 0 ]; then
    psql -X -q -h 127.0.0.1 -p "$soak_pgport" -U postgres -d postgres \
      -c "CREATE EXTENSION pg_stat_statements" >/dev/null
  fi
  echo "# bench/run soak: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg); private PostgreSQL on"\
" 127.0.0.1:$soak_pgport, private redis on 127.0.0.1:$port"
  if [ ${#soak_idle_args[@]} = 0 ]; then
    echo "# soak: this matchd has no idle-release option"
  fi
  soak_rc=0
  if [ "${SOAK_PARTS:-all}" = defaults ]; then
    soak_defaults
    echo "soak_defaults_rss_ratio=${soak_defaults_ratio:-?}"
    return "$soak_rc"
  fi
  soak_single
  soak_run
  soak_stop_matchd
  soak_defaults
  local last
  last=$(grep '^verdict=' "$dir/soak.out" | tail -n 1 || true)
  grep -E '^(users|matched|cycles|cancelled|waiting|ended|time to match|duration|errors) ' \
    "$dir/soak.out" | sed 's/^/# soak load: /' || true
  echo "# soak: $last"
  local cps sessions
  cps=$(soak_field cycles_per_s "$last")
  sessions=$(grep '^cycles ' "$dir/soak.out" | grep -oE '[0-9]+ sessions ended' \
               | cut -d' ' -f1 || true)
  # A cycle is one user's join, match and end; a match is two users'. Both
  # comparisons: per the issue's wording and per match.
  awk -v c="${cps:-0}" -v m="${soak_single_rate:-0}" \
    'BEGIN { if (m <= 0) exit
             printf "# soak: %.1f cycles/s (%.1f sessions/s) vs single-shot %.1f"\
" matches/s: cycles/s / matches/s = %.2f, sessions/s / matches/s = %.2f\n",
                    c, c / 2, m, c / m, c / 2 / m }'
  echo "# soak: RSS MiB at 10 % $(awk -v k="${soak_rss[10]}" 'BEGIN { printf "%.1f", k / 1024 }'),"\
" 50 % $(awk -v k="${soak_rss[50]}" 'BEGIN { printf "%.1f", k / 1024 }'),"\
" 100 % $(awk -v k="${soak_rss[100]}" 'BEGIN { printf "%.1f", k / 1024 }');"\
" ${sessions:-?} sessions ended"
  if [ "$soak_rc" != 0 ] || [ -z "$last" ] || [ "${last#verdict=ok }" = "$last" ]; then
    tail -n 30 "$dir/soak.out" >&2
    echo "bench/run: the soak run failed (matchctl exit $soak_rc)" >&2
    soak_rc=1
  fi
  echo "soak_defaults_rss_ratio=${soak_defaults_ratio:-?}"
  awk -v a="${soak_rss[100]}" -v b="${soak_rss[10]}" \
    'BEGIN { if (b <= 0) exit 1; printf "soak_rss_growth_ratio=%.2f\n", a / b }'
  return "$soak_rc"
}
