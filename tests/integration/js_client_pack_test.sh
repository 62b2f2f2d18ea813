#!/usr/bin/env bash
# The JavaScript client as people install it: `npm pack` of clients/js, the
# tarball checked (what package.json's main, types and exports name is in
# it, LICENSE is the project's, no tests, lock file or node_modules), then
# installed with npm into a fresh project (ws from the registry or npm's
# cache) where a script imports "@matchmaker/client" by name and matches
# two users on a private matchd (embedded stores), on every Node of
# tests/support/node_versions.sh; the packed example runs there too. And it
# fails on a broken package: a copy whose "files" leaves out src/index.js
# is refused by both the tarball check and the install.
#   js_client_pack_test.sh MATCHD CLIENT_DIR
set -euo pipefail
matchd=$1 client_dir=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../support/free_port.sh
. "$here/../support/free_port.sh"
# shellcheck source=../support/node_versions.sh
. "$here/../support/node_versions.sh"
nodes=$(node_versions "$root")
work=$(mktemp -d /tmp/js_client_pack.XXXXXX)
pid=
cleanup() {
  [ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
npm_q() { npm --no-audit --no-fund --loglevel=error "$@"; }

# pack DIR OUT: npm pack of DIR into OUT; prints the tarball's path.
pack() {
  mkdir -p "$2"
  (cd "$1" && npm_q pack --pack-destination "$2" >/dev/null)
  ls "$2"/*.tgz
}

# check_tarball TGZ: what the package's entry points name is in it, and
# nothing that should not ship.
check_tarball() {
  local tgz=$1 x bad=0
  x=$(mktemp -d "$work/x.XXXXXX")
  tar -xzf "$tgz" -C "$x"
  (cd "$x/package" && find . -type f | sed 's|^\./||' | sort) >"$x.files"
  for f in package.json README.md LICENSE src/index.js src/index.d.ts; do
    grep -qx "$f" "$x.files" || { echo "tarball: $f missing"; bad=1; }
  done
  # Every file package.json points at (main, types, exports).
  for f in $(node -e '
    const p = require(process.argv[1]);
    const out = new Set([p.main, p.types]);
    const walk = (v) => typeof v === "string" ? out.add(v) : Object.values(v || {}).forEach(walk);
    walk(p.exports);
    for (const f of out) if (f) console.log(f.replace(/^\.\//, ""));' "$x/package/package.json"); do
    grep -qx "$f" "$x.files" || { echo "tarball: $f (named by package.json) missing"; bad=1; }
  done
  if grep -v -E '^(package\.json|README\.md|LICENSE|src/[^/]+\.(js|d\.ts)|examples/[^/]+\.mjs)$' "$x.files"; then
    echo "tarball: the files above should not ship"; bad=1
  fi
  if [ -f "$x/package/LICENSE" ] && ! cmp -s "$x/package/LICENSE" "$root/LICENSE"; then
    echo "tarball: LICENSE is not the project's (LICENSE at the root)"; bad=1
  fi
  return "$bad"
}

# install TGZ APP: a fresh project APP with the tarball installed by npm and
# match.mjs, which imports the client by its package name.
install() {
  local tgz=$1 app=$2
  mkdir -p "$app"
  echo '{"name": "pack-test-app", "version": "1.0.0", "private": true, "type": "module"}' >"$app/package.json"
  (cd "$app" && npm_q install --prefer-offline "$tgz")
  cat >"$app/match.mjs" <<'JS'
// Two users join "default" and are matched: both hear match.created with
// the same session. Tokens signed as a host backend does (docs/api.md).
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { MatchmakerClient } from '@matchmaker/client';

const { MATCHD_URL: url, MATCHD_SECRET: secret } = process.env;
const sign = (user) => {
  const p = `v1.${Buffer.from(user).toString('base64url')}.${Math.floor(Date.now() / 1000) + 600}`;
  return `${p}.${createHmac('sha256', secret).update(p).digest('base64url')}`;
};
const run = randomBytes(4).toString('hex');
const [a, b] = ['ann', 'ben'].map((n) => {
  const user = `pack-${n}-${run}`;
  return new MatchmakerClient({ url, user, token: sign(user) });
});
const [sa, sb] = [a.events(), b.events()];
try {
  await Promise.all([sa.opened(), sb.opened()]);
  assert.equal((await a.join('default')).state, 'queued');
  await b.join('default');
  const isMatch = (ev) => ev.type === 'match.created';
  const [ma, mb] = await Promise.all([sa.next(isMatch, { timeoutMs: 10000 }), sb.next(isMatch, { timeoutMs: 10000 })]);
  assert.equal(ma.session_id, mb.session_id);
  assert.deepEqual([...ma.users].sort(), [a.user, b.user].sort());
  assert.equal((await a.endSession(ma.session_id, 'done')).state, 'ended');
  console.log(`Node ${process.version}: ${a.user} + ${b.user} matched in session ${ma.session_id}`);
} finally {
  sa.close();
  sb.close();
}
JS
}

tgz=$(pack "$client_dir" "$work/pack")
echo "packed: $(basename "$tgz") ($(tar -tzf "$tgz" | wc -l) files)"
check_tarball "$tgz" || fail "the tarball of clients/js"
install "$tgz" "$work/app"
ws=$(node -p 'require(process.argv[1]).version' "$work/app/node_modules/ws/package.json") \
  || fail "ws, the client's dependency, was not installed"
want=$(node -p 'require(process.argv[1]).dependencies.ws' "$client_dir/package.json")
[ "$ws" = "$want" ] || fail "installed ws $ws, package.json pins $want"

port=$(free_port)
secret="js-client-pack-secret-0123456789"
"$matchd" --listen "127.0.0.1:$port" --secret "$secret" --node js-pack \
  --log-level warn >"$work/matchd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
export MATCHD_URL="http://127.0.0.1:$port" MATCHD_SECRET="$secret"
for node in $nodes; do
  (cd "$work/app" && timeout 30 "$node" match.mjs) \
    || { tail -n 30 "$work/matchd.log"; fail "Node $("$node" --version): no match with the installed package"; }
done
# The example as shipped, importing the package by its own name.
sign() { (cd "$work/app" && node --input-type=module -e "
  import { createHmac } from 'node:crypto';
  const p = 'v1.' + Buffer.from('$1').toString('base64url') + '.' + (Math.floor(Date.now() / 1000) + 600);
  console.log(p + '.' + createHmac('sha256', '$secret').update(p).digest('base64url'));"); }
(cd "$work/app" && ALICE_USER="pk-alice-$$" BOB_USER="pk-bob-$$" ALICE_TOKEN=$(sign "pk-alice-$$") \
  BOB_TOKEN=$(sign "pk-bob-$$") timeout 20 node node_modules/@matchmaker/client/examples/match_two.mjs) \
  >"$work/example.out" 2>&1 || { cat "$work/example.out"; fail "the packed example"; }
grep -q "^alice hears: session.ended by pk-bob-$$ (bye)" "$work/example.out" \
  || { cat "$work/example.out"; fail "the packed example's output"; }
echo "the packed example: $(tail -n 1 "$work/example.out")"

# A broken package is caught: "files" without src/index.js.
mkdir -p "$work/broken"
(cd "$client_dir" && cp -r package.json README.md LICENSE src examples "$work/broken/")
node -e '
  const fs = require("fs"), f = process.argv[1], p = JSON.parse(fs.readFileSync(f));
  p.files = p.files.filter((x) => x !== "src/index.js");
  fs.writeFileSync(f, JSON.stringify(p, null, 2));' "$work/broken/package.json"
btgz=$(pack "$work/broken" "$work/broken-pack")
if check_tarball "$btgz" >"$work/broken.out"; then fail "the tarball check passed a package without src/index.js"; fi
grep -q "src/index.js missing" "$work/broken.out" || { cat "$work/broken.out"; fail "the tarball check did not name src/index.js"; }
install "$btgz" "$work/broken-app"
if (cd "$work/broken-app" && timeout 30 node match.mjs) >"$work/broken-run.out" 2>&1; then
  fail "a package without src/index.js matched users"
fi
grep -q "ERR_MODULE_NOT_FOUND" "$work/broken-run.out" || { cat "$work/broken-run.out"; fail "the broken package failed otherwise"; }
echo "a package without src/index.js: refused by the tarball check and by its import"
echo "js_client_pack_test: ok"
