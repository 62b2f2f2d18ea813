#!/usr/bin/env bash
# bench/fuzz.sh — `bench/run fuzz`: the fuzz targets of tests/fuzz/ under
# libFuzzer with ASan and UBSan, one after the other (one fuzzing process at
# a time), each for FUZZ_SECONDS (default 600) from a copy of the committed
# corpus. Per target: executions, executions/s, coverage (libFuzzer's cov
# and ft), corpus size at the start and the end, crashes (each crash input
# is kept in the target's work directory). Last line: fuzz_crashes=N.
#
# Knobs (environment): FUZZ_SECONDS (default 600), FUZZ_TARGETS (default
# "http body token codec"), MM_FUZZ_BUILD_DIR (default build-fuzz: clang-14,
# -fsanitize=fuzzer-no-link,address,undefined on every library; UBSan's
# third-party exemptions: tests/fuzz/ubsan_ignore.txt),
# FUZZ_OUT (work directories, default $MM_FUZZ_BUILD_DIR/fuzz-run),
# FUZZ_MAX_LEN (libFuzzer -max_len, default 16384: matchd's --max-body),
# FUZZ_ENGINE_LIB (a prebuilt libmm_engine.a, e.g. build/libmm_engine.a of
# the g++ build: the actors are then linked uninstrumented, which halves the
# build on a busy machine; default: built instrumented here),
# FUZZ_MODEL_ENGINE=ON (http and body over a model of the engine without
# CAF, tests/fuzz/engine_model.cpp: minutes instead of the actors' build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MM_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-600}
targets=${FUZZ_TARGETS:-http body token codec}
out=${FUZZ_OUT:-$build/fuzz-run}
max_len=${FUZZ_MAX_LEN:-16384}

# FUZZ_ENGINE_LIB: a libmm_engine.a to link instead of building the actors
# instrumented (tests/fuzz/CMakeLists.txt); empty: build them here.
echo "# configuring $build (clang-14, ASan + UBSan + libFuzzer)" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -fsanitize-ignorelist=$root/tests/fuzz/ubsan_ignore.txt" \
  -DMM_BUILD_BENCH=OFF -DMM_FUZZ=ON "-DMM_FUZZ_ENGINE_LIB=${FUZZ_ENGINE_LIB:-}" \
  "-DMM_FUZZ_MODEL_ENGINE=${FUZZ_MODEL_ENGINE:-OFF}" >/dev/null
bins=""
for t in $targets; do bins="$bins fuzz_$t"; done
# shellcheck disable=SC2086
cmake --build "$build" -j2 --target $bins >&2

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "# bench/run fuzz: $(date -u +%FT%TZ), commit $(git -C "$root" rev-parse --short HEAD),"\
" $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), ${seconds}s per target,"\
" $(clang++-14 --version | head -1), engine: $([ "${FUZZ_MODEL_ENGINE:-OFF}" = ON ] && echo model || echo "real, actors ${FUZZ_ENGINE_LIB:-instrumented}")"
total=0
for t in $targets; do
  work=$out/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/crashes"
  cp "$root/tests/fuzz/corpus/$t/"* "$work/corpus/"
  start=$(ls "$work/corpus" | wc -l)
  rc=0
  # -timeout: one input that takes a minute is a hang (the targets wait at
  # most 60 s for an answer themselves).
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
    -max_len="$max_len" -timeout=90 -rss_limit_mb=3072 \
    -artifact_prefix="$work/crashes/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
  crashes=$(find "$work/crashes" -type f | wc -l)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
    crashes=1 # died without an artifact: count it, the log says why
  fi
  total=$((total + crashes))
  last=$(grep -E '^#[0-9]+' "$work/log" | tail -1 || true)
  field() { sed -nE "s/.* $1: ([0-9]+).*/\\1/p" <<<"$last"; }
  execs=$(sed -nE 's/^stat::number_of_executed_units: ([0-9]+)/\1/p' "$work/log")
  rate=$(sed -nE 's/^stat::average_exec_per_sec: +([0-9]+)/\1/p' "$work/log")
  end=$(ls "$work/corpus" | wc -l)
  echo "fuzz target=$t seconds=$seconds execs=${execs:-?} execs_per_s=${rate:-?}"\
" cov=$(field cov) ft=$(field ft) corpus_start=$start corpus_end=$end"\
" crashes=$crashes exit=$rc work=$work"
  if [ "$crashes" -gt 0 ]; then
    grep -E 'ERROR|invariant broken|SUMMARY|Test unit written' "$work/log" | head -5 | sed 's/^/#   /'
  fi
done
echo "fuzz_crashes=$total"
