# bench/shards.sh — `bench/run shards` (sourced by bench/run): the queue
# store on ONE Redis against a Redis Cluster of 3 primaries (no replicas:
# both variants hold one copy of the data), 100 queues, on this machine.
#   (a) claims/s through the queue broker (claim_bench broker, 256 and 1024 claims in
#       flight, claim n in queue n % 100), and the Redis CPU per claim summed
#       over every redis-server of the variant (/proc);
#   (b) end to end: one matchd (HTTP + WebSocket, in-memory persistence so
#       that the queue store is what differs) driven by `matchctl load
#       --queues 100`, matches/s, and matchd's and Redis's CPU per match.
# Order ABBA for both (the claims ABBA SHARDS_ROUNDS times: this machine's
# runs of one variant differ by up to 40 %), each variant counting with its
# best run.
# Last line: shards_3_vs_1_claims_ratio=X.XX.
# Knobs: SHARDS_DURATION (s per claim run, default 5), SHARDS_USERS (per e2e
# run, default 30000), SHARDS_ROUNDS (ABBA rounds of claims, default 2),
# SHARDS_WORKERS and SHARDS_MAX_BATCH (the broker's, default 4 and 64).

shards_rate=""   # of the last run
shards_rcpu=""   # Redis CPU µs per claim / per match of the last run
shards_mcpu=""   # matchd CPU µs per match of the last e2e run

# utime+stime of a pid in ms (0 when it is gone).
shards_cpu_ms() {
  local f
  f=$(cut -d')' -f2- "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  echo "$f" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($12 + $13) * 1000 / hz }'
}
shards_redis_cpu_ms() { # PIDS...
  local sum=0 p
  for p in "$@"; do sum=$((sum + $(shards_cpu_ms "$p"))); done
  echo "$sum"
}

shards_claims() { # one|three
  local v=$1 args=() sub=() pids=()
  if [ "$v" = one ]; then
    args=(--host 127.0.0.1 --port "$port")
    pids=("$(cat "$dir/redis.pid")")
  else
    local first rest
    first=$(cut -d, -f1 "$dir/cl/seeds")
    rest=$(cut -d, -f2- "$dir/cl/seeds" | tr ',' ' ')
    args=(--host "${first%:*}" --port "${first#*:}")
    # shellcheck disable=SC2206
    sub=(--cluster --seeds $rest)
    mapfile -t pids < <(cat "$dir"/cl/n*/redis.pid)
  fi
  local c0 c1
  c0=$(shards_redis_cpu_ms "${pids[@]}")
  bench '^$' "${args[@]}" broker "${sub[@]}" --store redis --form single --levels 256,1024 \
    --queues 100 --duration "$shards_duration" --warmup 0.5 --workers "${SHARDS_WORKERS:-4}" \
    --max-batch "${SHARDS_MAX_BATCH:-64}" --scheduler-threads 1 --queue "sh$v"
  c1=$(shards_redis_cpu_ms "${pids[@]}")
  shards_rate=$(awk '/^summary / { for (i = 1; i <= NF; ++i)
                     if ($i ~ /^best_claims_per_s=/) { sub(/.*=/, "", $i); print $i } }' "$dir/out")
  [ -n "$shards_rate" ] || { echo "bench/run: no claim result ($v)" >&2; exit 1; }
  # The whole run (warmups and drains included) over the claims of its
  # levels' windows at their rates: a slight overestimate of the CPU per
  # claim, alike for both variants.
  local claims
  claims=$(sed -nE 's/^\[a\] broker\(redis\) single-claim messages .*: ([0-9]+) claims\/s$/\1/p' "$dir/out" |
    awk -v d="$shards_duration" '{ s += $1 * (d + 0.5) } END { print s + 0 }')
  shards_rcpu=$(awk -v c="$((c1 - c0))" -v n="$claims" \
    'BEGIN { printf "%.1f", (n > 0 ? c * 1000 / n : 0) }')
  echo "# claims $v: ${shards_rate} claims/s, Redis CPU ${shards_rcpu} us/claim (all shards)"
}

shards_e2e() { # one|three
  local v=$1 mport margs=() pids=()
  mport=$(free_port)
  if [ "$v" = one ]; then
    margs=(--redis "127.0.0.1:$port")
    pids=("$(cat "$dir/redis.pid")")
  else
    margs=(--redis "$(cat "$dir/cl/seeds")")
    mapfile -t pids < <(cat "$dir"/cl/n*/redis.pid)
  fi
  "$build/bin/matchd" --listen "127.0.0.1:$mport" --secret "$shards_secret" \
    --log-level warn --threads 2 --queues "$(load_queue_list 100)" "${margs[@]}" \
    >"$dir/matchd_shards_$v.log" 2>&1 &
  local mpid=$! _
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  local m0 r0 m1 r1
  m0=$(shards_cpu_ms "$mpid"); r0=$(shards_redis_cpu_ms "${pids[@]}")
  "$build/bin/matchctl" load --url "http://127.0.0.1:$mport" --secret "$shards_secret" \
    --no-progress --threads 2 --abrupt-close --cancel-rate 0 --queues 100 \
    --connections 64 --users "$shards_users" --rate 0 --prefix "s$v$RANDOM-" \
    >"$dir/load_shards.out" 2>&1 || true
  m1=$(shards_cpu_ms "$mpid"); r1=$(shards_redis_cpu_ms "${pids[@]}")
  kill -TERM "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null || true
  local last matched
  last=$(grep '^verdict=' "$dir/load_shards.out" | tail -n 1 || true)
  case "$last" in verdict=ok*) ;; *) echo "bench/run: shards e2e $v failed" >&2; tail -n 5 "$dir/load_shards.out" >&2; exit 1 ;; esac
  shards_rate=$(echo "$last" | tr ' ' '\n' | sed -n 's/^matches_per_s=//p')
  matched=$(echo "$last" | tr ' ' '\n' | sed -n 's/^matched=//p')
  # matched counts users: two per match.
  shards_mcpu=$(awk -v c="$((m1 - m0))" -v n="$matched" 'BEGIN { printf "%.0f", (n > 0 ? 2000 * c / n : 0) }')
  shards_rcpu=$(awk -v c="$((r1 - r0))" -v n="$matched" 'BEGIN { printf "%.0f", (n > 0 ? 2000 * c / n : 0) }')
  echo "# e2e $v: $last matchd_cpu_us_per_match=$shards_mcpu redis_cpu_us_per_match=$shards_rcpu"
}

shards_main() {
  shards_duration=${SHARDS_DURATION:-5}
  shards_users=${SHARDS_USERS:-30000}
  shards_rounds=${SHARDS_ROUNDS:-2}
  shards_secret=shards-bench-secret-0123456789
  cmake -S "$root" -B "$build" -DMM_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j2 --target claim_bench matchd matchctl >/dev/null
  bin=$build/bench/claim_bench
  mkdir -p "$dir/cl"
  REDIS_CLUSTER_PRIMARIES=3 REDIS_CLUSTER_REPLICAS=0 \
    "$root/tests/support/redis_cluster.sh" start "$dir/cl" >/dev/null
  echo "# bench/run shards: $(date -u +%FT%TZ), commit $(git -C "$root" rev-parse --short HEAD),"\
" $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f1-3);"\
" one Redis on 127.0.0.1:$port vs a cluster of 3 primaries ($(cat "$dir/cl/seeds")), 100 queues"
  local -A claims=() crcpu=() e2e=() ercpu=() emcpu=()
  local v
  local order=() r
  for ((r = 0; r < shards_rounds; ++r)); do order+=(one three three one); done
  for v in "${order[@]}"; do
    shards_claims "$v"
    if awk -v a="$shards_rate" -v b="${claims[$v]:-0}" 'BEGIN { exit !(a > b) }'; then
      claims[$v]=$shards_rate; crcpu[$v]=$shards_rcpu
    fi
  done
  for v in one three three one; do
    shards_e2e "$v"
    if awk -v a="$shards_rate" -v b="${e2e[$v]:-0}" 'BEGIN { exit !(a > b) }'; then
      e2e[$v]=$shards_rate; ercpu[$v]=$shards_rcpu; emcpu[$v]=$shards_mcpu
    fi
  done
  echo "# claims/s (best of ${shards_rounds}x2): one Redis ${claims[one]} (Redis ${crcpu[one]} us/claim), 3 primaries ${claims[three]} (${crcpu[three]} us/claim over the 3)"
  echo "# e2e matches/s (better of two): one Redis ${e2e[one]} (matchd ${emcpu[one]} us, Redis ${ercpu[one]} us per match), 3 primaries ${e2e[three]} (matchd ${emcpu[three]} us, Redis ${ercpu[three]} us per match)"
  # One core per shard: the Redis side could serve 3 cores' worth; what the
  # clients here leave of the 2 cores bounds this run.
  awk -v c="${crcpu[three]}" 'BEGIN { if (c > 0) printf "# projection, Redis side only, one core per primary: %.0f claims/s (3 x 1e6 / %.1f us)\n", 3e6 / c, c }'
  awk -v a="${e2e[three]}" -v b="${e2e[one]}" 'BEGIN { printf "shards_3_vs_1_e2e_ratio=%.2f\n", a / b }'
  awk -v a="${claims[three]}" -v b="${claims[one]}" 'BEGIN { printf "shards_3_vs_1_claims_ratio=%.2f\n", a / b }'
}
