#!/usr/bin/env bash
# CTest fixture: installs the JavaScript packages of DIR from its lock file
# (npm ci: exactly package-lock.json, nothing resolved anew). Skipped when
# DIR/node_modules was installed from the same lock file already.
#   npm_ci.sh DIR
set -euo pipefail
dir=$1
stamp="$dir/node_modules/.mm-lock-sha256"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "npm_ci: $dir/node_modules is current"
  exit 0
fi
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
# No node_modules when every package is an optional one for another
# platform (tools/node22 off Linux x64).
mkdir -p "$dir/node_modules"
echo "$want" >"$stamp"
