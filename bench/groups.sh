# shellcheck shell=bash
# bench/groups.sh: `bench/run groups`, sourced by bench/run (which owns
# $root, $build, $dir, the private redis on $port and the cleanup trap).
#
# Groups (issue 32, docs/benchmarks.md "Groups"), on the private Redis +
# PostgreSQL, all through the embedding API:
# 1. The 1:1 path against the build before groups (GROUPS_BEFORE, default
#    fbd2a48, the last commit before them): e2e_bench of each build, same
#    options, in the order new, old, old, new; each build counts with its
#    better run. The old build's e2e_bench is built once from `git archive`
#    into ~/.cache/mm-bench (about 10 minutes on 2 cores the first time).
# 2. groups_bench: rounds of GROUPS_USERS users (default 60,000) in a 1:1
#    queue, a 5-vs-5 queue in parties of 1..3 with random skills, again
#    the 5-vs-5, again the 1:1 (ABBA, each mode the mean of its rounds),
#    on one engine.
# Last lines: pairs_ratio_to_before=X.XX, then groups_bench's
# groups_balance=X.XXX ... groups_users_ratio_to_pairs=X.XX.
#
# `bench/run groups ready` (issue 33, docs/benchmarks.md "Ready check"):
# groups_bench --mode ready, READY_USERS (default 20,000) users per run: a
# 5-vs-5 without and with a ready check that everyone accepts at once
# (ABBA), then with READY_DECLINE (0.1) of the answers declining. Last
# lines: ready_ttm_p95_ms, ready_rematch_p95_ms, ready_rematch_max_ms,
# ready_rematch_within_p95, ready_violations, ready_ratio_to_plain=X.XX.

groups_users=${GROUPS_USERS:-60000}
groups_before=${GROUPS_BEFORE:-fbd2a48}
groups_pair_users=${GROUPS_PAIR_USERS:-30000}

# groups_before_bin: builds (once) and prints the old e2e_bench's path.
groups_before_bin() {
  local commit cache
  commit=$(git -C "$root" rev-parse --short=12 "$groups_before")
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/mm-bench/before-$commit
  if [ ! -x "$cache/tree/build/bench/e2e_bench" ]; then
    echo "# building e2e_bench of $commit in $cache (once)" >&2
    rm -rf "$cache"
    mkdir -p "$cache/tree"
    git -C "$root" archive "$commit" | tar -x -C "$cache/tree"
    (cd "$cache/tree" && cmake --preset ci -DMM_BUILD_BENCH=ON >/dev/null \
      && cmake --build build --target e2e_bench -j2 >/dev/null) >&2
  fi
  echo "$cache/tree/build/bench/e2e_bench"
}

# groups_pairs BIN LABEL: one e2e_bench run of the 1:1 path on Redis +
# PostgreSQL; prints its matches/s.
groups_pairs() {
  local bin=$1 label=$2 out
  out=$("$bin" --label "$label" --store redis --db postgres \
    --redis-dir "$dir" --pg-dir "$dir/pg" --users "$groups_pair_users" \
    --in-flight 2000 --queues 8 --sched-threads 2 --sched-policy sharing \
    --no-progress 2>&1 | grep '^e2e_embed ' | tail -n 1)
  echo "# groups: $label: ${out:-no final line}" >&2
  echo "$out" | tr ' ' '\n' | sed -n 's/^matches_per_s=//p'
}

groups_ready_main() {
  cmake --build "$build" -j2 --target groups_bench >/dev/null
  "$root/tests/support/postgres_server.sh" start "$dir/pg" >/dev/null
  local pg="host=127.0.0.1 port=$(cat "$dir/pg/port") user=postgres dbname=postgres"
  echo "# bench/run groups ready: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg); private redis on 127.0.0.1:$port,"\
" PostgreSQL on 127.0.0.1:$(cat "$dir/pg/port")"
  "$build/bench/groups_bench" --mode ready --store redis --db postgres \
    --pg "$pg" --redis-port "$port" --users "${READY_USERS:-20000}" \
    --decline "${READY_DECLINE:-0.1}" 2>&1 | grep -v '\[warning\]'
}

groups_main() {
  if [ "${1:-}" = ready ]; then
    groups_ready_main
    return
  fi
  cmake --build "$build" -j2 --target groups_bench e2e_bench >/dev/null
  local old
  old=$(groups_before_bin)
  "$root/tests/support/postgres_server.sh" start "$dir/pg" >/dev/null
  local pg="host=127.0.0.1 port=$(cat "$dir/pg/port") user=postgres dbname=postgres"
  echo "# bench/run groups: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg); private redis on 127.0.0.1:$port,"\
" PostgreSQL on 127.0.0.1:$(cat "$dir/pg/port"); before = $groups_before"
  local n1 o1 o2 n2
  n1=$(groups_pairs "$build/bench/e2e_bench" new-1)
  o1=$(groups_pairs "$old" before-1)
  o2=$(groups_pairs "$old" before-2)
  n2=$(groups_pairs "$build/bench/e2e_bench" new-2)
  echo "# 1:1 matches/s: this build $n1, $n2; before $o1, $o2 (each build"\
" counts with its better run)"
  "$build/bench/groups_bench" --store redis --db postgres --pg "$pg" \
    --redis-port "$port" --users "$groups_users" 2>&1 \
    | grep -v '\[warning\]' >"$dir/groups.out" || true
  awk -v a="$n1" -v b="$n2" -v c="$o1" -v d="$o2" 'BEGIN {
    new = a > b ? a : b; old = c > d ? c : d
    if (old > 0) printf "pairs_ratio_to_before=%.2f\n", new / old
    else print "pairs_ratio_to_before=0.00" }'
  cat "$dir/groups.out"
}
