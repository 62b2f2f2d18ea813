#!/usr/bin/env bash
# bench/run tidy [BASE] — the .clang-tidy checks over the product's
# translation units (actors/, app/, core/, messages/, persistence/), their
# headers through HeaderFilterRegex. With BASE (a git revision): only the
# .cpp files changed since BASE, and the .cpp files beside changed headers.
# Needs build/compile_commands.json (configures build/ with the ci preset
# when it is missing). Prints each finding; last line: tidy_findings=N.
#
#   TIDY_JOBS (default: nproc)   clang-tidy processes at once
#   TIDY_MAX  (default: all)     at most this many files (the first ones)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tidy=${CLANG_TIDY:-clang-tidy}
command -v "$tidy" >/dev/null || { echo "tidy: $tidy not found (deploy/setup.sh installs it)" >&2; echo "tidy_findings=missing"; exit 1; }
build=${MM_TIDY_BUILD_DIR:-$root/build}
if [ ! -f "$build/compile_commands.json" ]; then
  cmake --preset ci >/dev/null
fi
# The generated sources (scripts, migrations, console assets) must exist
# for the TUs that include them.
cmake --build "$build" --target mm_store mm_build_info_header >/dev/null 2>&1 || true

rooms='^(actors|app|core|messages|persistence)/'
if [ -n "${1:-}" ]; then
  changed=$(git diff --name-only "$1" -- '*.cpp' '*.hpp' | grep -E "$rooms" || true)
  files=$( { grep '\.cpp$' <<<"$changed" || true
             for h in $(grep '\.hpp$' <<<"$changed" || true); do
               # (a header without a .cpp beside it adds nothing, and must
               # not end the script under pipefail)
               c=${h%.hpp}.cpp; if [ -f "$c" ]; then echo "$c"; fi; done; } | sort -u)
else
  files=$(git ls-files '*.cpp' | grep -E "$rooms" | sort)
fi
# Only files the build compiles (compile_commands.json knows them).
files=$(for f in $files; do grep -q "\"file\": \"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done || true)
[ -n "${TIDY_MAX:-}" ] && files=$(head -n "$TIDY_MAX" <<<"$files")
n=$(grep -c . <<<"$files" || true)
echo "# tidy: $n files, $(clang-tidy --version | grep -o 'version [0-9.]*'), build $build"
out=$(mktemp); trap 'rm -f "$out"' EXIT
if [ "$n" -gt 0 ]; then
  # shellcheck disable=SC2086
  printf '%s\n' $files | xargs -P "${TIDY_JOBS:-$(nproc)}" -n 1 \
    "$tidy" -p "$build" --quiet >"$out" 2>/dev/null || true
fi
grep -E '(warning|error): .*\[[a-z-]+.*\]$' "$out" | sort -u | tee /dev/stderr >/dev/null || true
findings=$(grep -E '(warning|error): .*\[[a-z-]+.*\]$' "$out" | sort -u | grep -c . || true)
echo "tidy_findings=$findings"
[ "$findings" -eq 0 ]
