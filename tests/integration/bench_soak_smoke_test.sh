#!/usr/bin/env bash
# `bench/run soak` at a small size (400 users x 3 cycles, then 200 users at
# matchd's defaults; its own private Redis and PostgreSQL), so the script
# keeps working between the long runs.
#   bench_soak_smoke_test.sh ROOT BUILD_DIR
# Passes when it exits 0 (matchctl's verdict ok on both runs), printed the
# 10/50/100 % lines, the CPU lines and, last, soak_rss_growth_ratio=X.XX.
# The figures themselves are not judged here (speed and memory are measured
# by the benchmark, not by tests).
set -euo pipefail
root=$1 build=$2
out=$(mktemp /tmp/bench_soak_smoke.XXXXXX)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

rc=0
MM_BENCH_BUILD_DIR=$build MM_BENCH_NO_BUILD=1 SOAK_USERS=400 SOAK_CYCLES=3 \
  SOAK_DEFAULTS_USERS=200 SOAK_DEFAULTS_WAIT=5 \
  "$root/bench/run" soak >"$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "bench/run soak exited $rc"
for line in '# single-shot: verdict=ok ' '# soak 10%: ' '# soak 50%: ' \
            '# soak 100%: ' '# single-shot: cpu ms per match: ' \
            '# soak: cpu ms per cycle: ' '# soak: verdict=ok '; do
  grep -qF -- "$line" "$out" || fail "no line '$line'"
done
grep -qF -- '# soak defaults: verdict=ok ' "$out" || fail "no defaults verdict line"
tail -n 2 "$out" | head -n 1 | grep -qE '^soak_defaults_rss_ratio=[0-9]+\.[0-9]{2}$' \
  || fail "the second-last line is not soak_defaults_rss_ratio=X.XX"
tail -n 1 "$out" | grep -qE '^soak_rss_growth_ratio=[0-9]+\.[0-9]{2}$' \
  || fail "the last line is not soak_rss_growth_ratio=X.XX"
grep -E '^(# soak [0-9]+%|# soak: |# soak defaults: RSS|soak_rss|soak_defaults)' "$out"
echo PASS
