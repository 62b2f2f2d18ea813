#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need.
# Idempotent: a second run changes nothing. Run as root (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libcaf-dev libcaf-openssl0.17 libhiredis-dev libpq-dev libspdlog-dev libfmt-dev
  liblua5.1-0-dev libboost-dev nlohmann-json3-dev libcli11-dev
  libssl-dev prometheus-cpp-dev libgtest-dev libjemalloc-dev
  redis-server redis-tools postgresql postgresql-contrib faketime python3 curl
  openssl iproute2 procps
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
echo "setup: all packages present"
