#!/usr/bin/env bash
# Configures and builds the project into build/ (Release with line-table
# debug info). -g1 (function names and line numbers, enough for a backtrace)
# instead of -g, and the gold linker: a fresh build of the ~160 translation
# units and ~70 test binaries on 2 cores takes about a third less time
# (docs/benchmarks.md, "Build time"). A developer build for a debugger:
# cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo (full -g).
# The benchmarks (bench/) are not built here: no test runs them, and
# `bench/run NAME` builds what it runs (MM_BUILD_BENCH=ON, the default of a
# plain cmake configure; bench/run asks for it). About 2 min of CI's 29
# (docs/benchmarks.md, "Build time").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=gold" "-DMM_BUILD_BENCH=${MM_BUILD_BENCH:-OFF}" >/dev/null
cmake --build build -j "$(nproc)"
