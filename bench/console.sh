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
# Order off, on, on, off, ... (CONSOLE_ROUNDS pairs); each mode counts with
# the median of its runs.
# Last line: console_cost_ratio=X.XXX (matches/s with the console / without).

console_users=${CONSOLE_USERS:-30000}
console_rounds=${CONSOLE_ROUNDS:-2}
console_store=${CONSOLE_STORE:-redis}
console_secret="bench-console-secret-0123456789"
console_token="bench-console-operator-0123456789"

console_rate="" # matches/s of the last run
console_run() { # off | on
  local mode=$1 mport margs=() ppid=""
  mport=$(free_port)
  [ "$console_store" = redis ] && margs+=(--redis "127.0.0.1:$port")
  [ "$mode" = on ] && margs+=(--console-token "$console_token")
  "$build/app/matchd" --listen "127.0.0.1:$mport" --secret "$console_secret" \
    --log-level warn --threads 2 --queues "$(load_queue_list 8)" "${margs[@]}" \
    >"$dir/matchd_console_$mode.log" 2>&1 &
  local mpid=$!
  local _
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  if [ "$mode" = on ]; then
    node "$root/bench/console_page.mjs" "http://127.0.0.1:$mport" "$console_token" \
      "$root/clients/js" >"$dir/page.out" 2>&1 &
    ppid=$!
    for _ in $(seq 400); do
      grep -q '^open' "$dir/page.out" 2>/dev/null && break
      sleep 0.05
    done
    grep -q '^open' "$dir/page.out" || { echo "bench/run: the console page did not open" >&2; cat "$dir/page.out" >&2; exit 1; }
  fi
  "$build/app/matchctl" load --url "http://127.0.0.1:$mport" --secret "$console_secret" \
    --no-progress --threads 2 --abrupt-close --cancel-rate 0 --queues 8 \
    --connections 64 --users "$console_users" --rate 0 --prefix "c$mode-" \
    >"$dir/load_console.out" 2>&1 || true
  if [ -n "$ppid" ]; then kill -TERM "$ppid" 2>/dev/null; wait "$ppid" 2>/dev/null || true; fi
  kill -TERM "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null || true
  local last
  last=$(grep '^verdict=' "$dir/load_console.out" | tail -n 1 || true)
  echo "# console=$mode: $last"
  case "$last" in verdict=ok*) ;; *) echo "bench/run: console $mode failed" >&2; tail -n 5 "$dir/load_console.out" >&2; exit 1 ;; esac
  console_rate=$(echo "$last" | tr ' ' '\n' | sed -n 's/^matches_per_s=//p')
}

console_main() {
  cmake --build "$build" -j2 --target matchd matchctl >/dev/null
  "$root/tests/support/npm_ci.sh" "$root/clients/js" >/dev/null
  echo "# bench/run console: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);"\
" $console_users users per run, store $console_store"
  local off=() on=() i
  for i in $(seq "$console_rounds"); do
    if [ $((i % 2)) = 1 ]; then
      console_run off; off+=("$console_rate")
      console_run on; on+=("$console_rate")
    else
      console_run on; on+=("$console_rate")
      console_run off; off+=("$console_rate")
    fi
  done
  local moff mon
  moff=$(printf '%s\n' "${off[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  mon=$(printf '%s\n' "${on[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  echo "# matches/s without the console: ${off[*]} (median $moff); with the page open: ${on[*]} (median $mon)"
  awk -v a="$mon" -v b="$moff" 'BEGIN { printf "console_cost_ratio=%.3f\n", a / b }'
}
