#!/usr/bin/env bash
# docs/openapi.yaml passes Redocly's recommended-strict rules
# (tools/openapi-lint; its exceptions, each with its reason, in
# tools/openapi-lint/.redocly.lint-ignore.yaml), and the linter fails on a
# broken spec: the license taken out, and a description whose unquoted
# comma makes a bogus key in a flow mapping (the bug d09b813 fixed).
#   openapi_lint_test.sh SPEC LINT_DIR
set -euo pipefail
spec=$1 lint=$2/lint.mjs
work=$(mktemp -d /tmp/mm_openapi_lint.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

node "$lint" "$spec" >"$work/ok.out" 2>&1 || { cat "$work/ok.out"; fail "the spec does not lint"; }
tail -n 1 "$work/ok.out"

# broken NAME RULE: lints $work/NAME.yaml, which must fail naming RULE.
broken() {
  local rc=0
  node "$lint" "$work/$1.yaml" >"$work/$1.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { cat "$work/$1.out"; fail "$1: the linter exited $rc, not 1"; }
  grep -q "$2" "$work/$1.out" || { cat "$work/$1.out"; fail "$1: no $2 problem"; }
  echo "$1: refused ($2)"
}

python3 - "$spec" "$work" <<'PY'
import sys
spec, work = sys.argv[1], sys.argv[2]
text = open(spec).read()
lic = "  license:\n    name: Apache-2.0\n    url: https://www.apache.org/licenses/LICENSE-2.0\n"
assert lic in text, "the spec's license block moved: update this test"
open(f"{work}/no_license.yaml", "w").write(text.replace(lic, "", 1))
ok = '"200": {description: "The file (HTML, JavaScript or CSS)."}'
assert ok in text, "the console asset's 200 moved: update this test"
bad = '"200": {description: The file (HTML, JavaScript or CSS).}'
open(f"{work}/comma.yaml", "w").write(text.replace(ok, bad, 1))
PY
broken no_license info-license
broken comma struct
echo "openapi_lint_test: ok"
