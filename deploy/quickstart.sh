#!/usr/bin/env bash
# First run on a fresh Debian 12 machine: installs the packages, builds, and
# runs the claim benchmark, which starts its own private redis-server, races
# the atomic claim script against the naive two-step claim, and prints the
# figures (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
bash deploy/build.sh
exec bench/run claim "$@"
