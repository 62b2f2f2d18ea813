#!/usr/bin/env bash
# Configures and builds the project into build/ (Release with line-table
# debug info). -g1 (function names and line numbers, enough for a backtrace)
# instead of -g, and the gold linker: a fresh build of the ~160 translation
# units and ~70 test binaries on 2 cores takes about a third less time
# (docs/benchmarks.md, "Build time"). A developer build for a debugger:
# cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo (full -g).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=gold" >/dev/null
cmake --build build -j "$(nproc)"
