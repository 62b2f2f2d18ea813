#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need.
# (libsystemd-dev: sd_notify; systemd: systemd-analyze for the unit tests;
# prometheus: promtool, for the metrics and alert rule tests. Its service
# is not started: see policy-rc.d below. podman, runc, mmdebstrap: the
# container image's test builds a Debian base and the image, and runs it.)
# Idempotent: a second run changes nothing. Run as root (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libcaf-dev libcaf-openssl0.17 libhiredis-dev libpq-dev libspdlog-dev libfmt-dev
  liblua5.1-0-dev libboost-dev nlohmann-json3-dev libcli11-dev
  libssl-dev prometheus-cpp-dev libgtest-dev libjemalloc-dev
  redis-server redis-tools postgresql postgresql-contrib faketime python3 curl
  openssl iproute2 procps
  chromium python3-yaml python3-jwt python3-cryptography libsystemd-dev systemd prometheus
  clang-format clang-tidy
  podman runc mmdebstrap
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q
  # Debian's postgresql and redis packages try to start system services; the
  # project never uses those, so keep them from starting.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee /usr/sbin/policy-rc.d >/dev/null
    $sudo_cmd chmod +x /usr/sbin/policy-rc.d
    trap '$sudo_cmd rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Node 20 and npm (preinstalled on the CI machines; Debian 12 ships Node 18)
# run the JavaScript client's and the console's tests; their npm packages
# come from clients/js/package-lock.json (npm ci, tests/support/npm_ci.sh).
# Node 22, the LTS the client supports, comes from the npm registry too
# (tools/node22/package-lock.json, Linux x64: the CTest fixture node22_npm_ci).
command -v node >/dev/null && command -v npm >/dev/null \
  || echo "setup: warning: node/npm (Node 20) not found: the JavaScript tests will fail"
echo "setup: all packages present"
