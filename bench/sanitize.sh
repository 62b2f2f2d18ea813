#!/usr/bin/env bash
# bench/sanitize.sh: `bench/run sanitize` (bench/run execs it before it
# starts any service of its own).
#
# The unit and conformance tests under AddressSanitizer + UndefinedBehavior-
# Sanitizer (g++, -DMM_SANITIZE=ON, CMakeLists.txt): configures
# build-sanitize/ (SANITIZE_BUILD_DIR picks another), builds only the target
# sanitize_tests (the test binaries labelled `sanitize` and what they link),
# runs `ctest -L sanitize` (the CTest fixtures start the private redis-server
# and PostgreSQL of the conformance tests) with the ASAN/LSAN/UBSAN options
# and the third-party suppressions under tests/sanitize/ that
# tests/CMakeLists.txt sets, and prints the build and test times, every
# sanitizer report's first line, and as its last line
# sanitize_failures=N (failed tests; 0 is clean). Exit status 1 when N > 0.
# Knobs: SANITIZE_JOBS (build jobs, default 2), SANITIZE_TIMEOUT (s per test,
# default 900), SANITIZE_REGEX (ctest -R, a subset of the label).
# Far too slow for CI: a full build of sanitize_tests took 41-84 min on the
# shared 2 cores, ctest -L sanitize about 2 min (docs/benchmarks.md,
# "Sanitizers"); later runs rebuild only what changed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$root/build-sanitize}
jobs=${SANITIZE_JOBS:-2}
timeout=${SANITIZE_TIMEOUT:-900}
regex=${SANITIZE_REGEX:-}
if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi

echo "# bench/run sanitize: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg), $(c++ --version | head -n 1), build $build"
log=$build/sanitize-build.log
mkdir -p "$build"
t0=$(date +%s)
# -O1 -g1: what ASan is meant for (line tables are enough for its stack
# traces), and much cheaper to compile than -O2 -g with the instrumentation.
if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
       -DMM_SANITIZE=ON -DMM_BUILD_BENCH=OFF >"$log" 2>&1 \
   || ! cmake --build "$build" -j"$jobs" --target sanitize_tests >>"$log" 2>&1
then
  tail -n 40 "$log" >&2
  echo "bench/run sanitize: the build failed (whole log: $log)" >&2
  echo "sanitize_failures=build"
  exit 1
fi
t1=$(date +%s)
echo "# build (configure + sanitize_tests, -j$jobs): $((t1 - t0)) s"

out=$build/sanitize-ctest.log
args=(-L sanitize --output-on-failure --timeout "$timeout")
[ -n "$regex" ] && args+=(-R "$regex")
rc=0
(cd "$build" && ctest "${args[@]}") >"$out" 2>&1 || rc=$?
t2=$(date +%s)
grep -E '^ *[0-9]+/[0-9]+ Test +#' "$out" || true
echo "# ctest -L sanitize: $((t2 - t1)) s (exit $rc, whole log: $out)"
# The first line of every report (ASan, LSan, UBSan).
grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer' \
  "$out" | sort | uniq -c | sed 's/^/# finding: /' || true
summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$out" | tail -n 1 || true)
if [ -z "$summary" ]; then
  tail -n 20 "$out" >&2
  echo "bench/run sanitize: ctest printed no summary" >&2
  echo "sanitize_failures=unknown"
  exit 1
fi
echo "# $summary"
failed=$(echo "$summary" | sed -E 's/.*tests passed, ([0-9]+) tests failed.*/\1/')
echo "sanitize_failures=$failed"
[ "$failed" = 0 ]
