#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the Debian packages,
# builds, and runs every test through CTest. CTest fixtures start the private
# redis-server the integration tests need (loopback, free port, its own
# directory under build/test-services) and stop it by its pid afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
bash deploy/build.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
