#!/usr/bin/env bash
# Configures and builds the project into build/: the `ci` preset of
# CMakePresets.json (RelWithDebInfo with -O2 -g1 and the gold linker: line
# tables are enough for a backtrace, and a fresh build on 2 cores takes
# about a third less time than with -g; docs/benchmarks.md, "Build time").
# A developer build for a debugger: `cmake --preset debug`.
# The benchmarks (bench/) are not built here: no test runs them, and
# `bench/run NAME` builds what it runs (MM_BUILD_BENCH=ON asks for them).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset ci "-DMM_BUILD_BENCH=${MM_BUILD_BENCH:-OFF}" >/dev/null
cmake --build build -j "$(nproc)"
