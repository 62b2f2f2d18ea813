# shellcheck shell=bash
# bench/console.sh: `bench/run console`, sourced by bench/run (which owns
# $root, $build, $dir, the private redis on $port, free_port and the cleanup
# trap).
#
# What the web console costs the HTTP end-to-end figure (issue 14: at most
# 2 %): `matchctl load` at full rate as in `bench/run e2e` (every virtual
# user opens its WebSocket, joins over HTTP, waits for its match event),
# against a matchd without the console and against one with
# --console-token whose live page is open in headless Chromium, polling
# every second (bench/console_page.mjs). Stores: the private Redis and
# in-memory persistence (CONSOLE_STORE=embedded: the embedded store).
# Three modes: off; page (the live page open in headless Chromium on this
# same machine, so the browser's own CPU competes with the server for the
# two cores); poll (the server's side of an open page without a browser:
# the stats route fetched once a second with the operator token, as the
# page does). Order off page poll, poll page off, ... (CONSOLE_ROUNDS); each
# mode counts with the median of its runs. Per run also matchd's CPU per
# match (/proc) and the CPU per second of the page's processes.
# Last lines: console_page_ratio (page / off matches/s),
# console_server_cpu_ratio (matchd CPU per match, page / off) and
# console_cost_ratio=X.XXX (poll / off matches/s: what serving an open
# console costs the e2e figure).

console_users=${CONSOLE_USERS:-30000}
console_rounds=${CONSOLE_ROUNDS:-4}
console_store=${CONSOLE_STORE:-redis}
console_secret="bench-console-secret-0123456789"
console_token="bench-console-operator-0123456789"

console_rate="" # matches/s of the last run
console_cpu=""  # matchd CPU ms per match of the last run
console_side="" # CPU ms per second of the page's processes (page: chromium + node; poll: curl loop)

# utime+stime of a pid in ms (0 when it is gone).
proc_cpu_ms() {
  local f
  f=$(cut -d')' -f2- "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  echo "$f" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($12 + $13) * 1000 / hz }'
}
# The same summed over every live process whose command line matches $1.
procs_cpu_ms() {
  local sum=0 p
  for p in $(pgrep -f "$1" 2>/dev/null); do sum=$((sum + $(proc_cpu_ms "$p"))); done
  echo "$sum"
}

# The server's side of an open console page, without a browser: the stats
# route polled once a second with the operator token, as console.js does.
console_poll_loop() { # URL TOKEN
  while :; do
    curl -fsS -H "Authorization: Bearer $2" "$1/v1/console/stats" >/dev/null 2>&1 || true
    sleep 1
  done
}

console_run() { # off | page | poll
  local mode=$1 mport margs=() ppid="" side_pattern=""
  mport=$(free_port)
  [ "$console_store" = redis ] && margs+=(--redis "127.0.0.1:$port")
  [ "$mode" != off ] && margs+=(--console-token "$console_token")
  "$build/bin/matchd" --listen "127.0.0.1:$mport" --secret "$console_secret" \
    --log-level warn --threads 2 --queues "$(load_queue_list 8)" "${margs[@]}" \
    >"$dir/matchd_console_$mode.log" 2>&1 &
  local mpid=$!
  local _
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  if [ "$mode" = page ]; then
    node "$root/bench/console_page.mjs" "http://127.0.0.1:$mport" "$console_token" \
      "$root/clients/js" >"$dir/page.out" 2>&1 &
    ppid=$!
    side_pattern="mm-bench-chromium-|console_page.mjs"
    for _ in $(seq 400); do
      grep -q '^open' "$dir/page.out" 2>/dev/null && break
      sleep 0.05
    done
    grep -q '^open' "$dir/page.out" || { echo "bench/run: the console page did not open" >&2; cat "$dir/page.out" >&2; exit 1; }
  elif [ "$mode" = poll ]; then
    console_poll_loop "http://127.0.0.1:$mport" "$console_token" &
    ppid=$!
  fi
  local m0 s0 t0 m1 s1 t1
  m0=$(proc_cpu_ms "$mpid")
  s0=0; [ -n "$side_pattern" ] && s0=$(procs_cpu_ms "$side_pattern")
  t0=$(date +%s%N)
  "$build/bin/matchctl" load --url "http://127.0.0.1:$mport" --secret "$console_secret" \
    --no-progress --threads 2 --abrupt-close --cancel-rate 0 --queues 8 \
    --connections 64 --users "$console_users" --rate 0 --prefix "c$mode-" \
    >"$dir/load_console.out" 2>&1 || true
  t1=$(date +%s%N)
  m1=$(proc_cpu_ms "$mpid")
  s1=0; [ -n "$side_pattern" ] && s1=$(procs_cpu_ms "$side_pattern")
  if [ -n "$ppid" ]; then kill -TERM "$ppid" 2>/dev/null; wait "$ppid" 2>/dev/null || true; fi
  kill -TERM "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null || true
  local last
  last=$(grep '^verdict=' "$dir/load_console.out" | tail -n 1 || true)
  case "$last" in verdict=ok*) ;; *) echo "bench/run: console $mode failed" >&2; tail -n 5 "$dir/load_console.out" >&2; exit 1 ;; esac
  console_rate=$(echo "$last" | tr ' ' '\n' | sed -n 's/^matches_per_s=//p')
  local matched
  matched=$(echo "$last" | tr ' ' '\n' | sed -n 's/^matched=//p')
  console_cpu=$(awk -v c="$((m1 - m0))" -v n="$matched" 'BEGIN { printf "%.3f", (n > 0 ? 2 * c / n : 0) }')
  console_side=$(awk -v c="$((s1 - s0))" -v t="$(( (t1 - t0) / 1000000 ))" 'BEGIN { printf "%.0f", (t > 0 ? c * 1000 / t : 0) }')
  echo "# console=$mode: $last matchd_cpu_ms_per_match=$console_cpu page_cpu_ms_per_s=$console_side"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

console_main() {
  cmake --build "$build" -j2 --target matchd matchctl >/dev/null
  "$root/tests/support/npm_ci.sh" "$root/clients/js" >/dev/null
  echo "# bench/run console: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);"\
" $console_users users per run, store $console_store"
  local i mode order
  declare -A rates cpus
  for i in $(seq "$console_rounds"); do
    # ABC CBA: each mode sees the same share of early and late runs.
    if [ $((i % 2)) = 1 ]; then order="off page poll"; else order="poll page off"; fi
    for mode in $order; do
      console_run "$mode"
      rates[$mode]+="$console_rate "
      cpus[$mode]+="$console_cpu "
    done
  done
  local moff mpage mpoll coff cpage cpoll
  moff=$(printf '%s\n' ${rates[off]} | median); mpage=$(printf '%s\n' ${rates[page]} | median)
  mpoll=$(printf '%s\n' ${rates[poll]} | median)
  coff=$(printf '%s\n' ${cpus[off]} | median); cpage=$(printf '%s\n' ${cpus[page]} | median)
  cpoll=$(printf '%s\n' ${cpus[poll]} | median)
  echo "# matches/s: off ${rates[off]}(median $moff); page in chromium ${rates[page]}(median $mpage); stats polled ${rates[poll]}(median $mpoll)"
  echo "# matchd CPU ms per match: off ${cpus[off]}(median $coff); page ${cpus[page]}(median $cpage); poll ${cpus[poll]}(median $cpoll)"
  awk -v a="$mpage" -v b="$moff" 'BEGIN { printf "console_page_ratio=%.3f\n", a / b }'
  awk -v a="$cpage" -v b="$coff" 'BEGIN { printf "console_server_cpu_ratio=%.3f\n", a / b }'
  awk -v a="$mpoll" -v b="$moff" 'BEGIN { printf "console_cost_ratio=%.3f\n", a / b }'
}
