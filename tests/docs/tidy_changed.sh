#!/usr/bin/env bash
# The .clang-tidy checks on the files the last commit touched.
#
#   tidy_changed.sh ROOT BUILD
# First a self-test: a snippet with a use after move, checked with the
# project's .clang-tidy, must be reported (the checks are live). Then
# bench/tidy.sh on the .cpp files (and the .cpp beside each .hpp) that the
# last commit changed under the product's rooms, at most TIDY_MAX (6).
# A clone without the parent commit checks nothing beyond the self-test.
set -euo pipefail
root=${1:?usage: tidy_changed.sh ROOT BUILD}
build=${2:?usage: tidy_changed.sh ROOT BUILD}
tidy=${CLANG_TIDY:-clang-tidy}
command -v "$tidy" >/dev/null || { echo "tidy_changed: $tidy not found (deploy/setup.sh installs it)"; exit 1; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$root/.clang-tidy" "$tmp/"
cat >"$tmp/moved.cpp" <<'CPP'
#include <string>
#include <utility>
std::string f(std::string s) {
  std::string t = std::move(s);
  return s + t;
}
CPP
if (cd "$tmp" && "$tidy" --quiet moved.cpp -- -std=c++17 >"$tmp/out" 2>&1); then
  echo "tidy_changed self-test: a use after move was not reported"; cat "$tmp/out"; exit 1
fi
grep -q 'bugprone-use-after-move' "$tmp/out" \
  || { echo "tidy_changed self-test: unexpected output"; cat "$tmp/out"; exit 1; }
echo "tidy_changed self-test: ok (bugprone-use-after-move reported)"

cd "$root"
if ! git rev-parse -q --verify HEAD~1 >/dev/null 2>&1; then
  echo "tidy_changed: no parent commit here; nothing else to check"
  exit 0
fi
MM_TIDY_BUILD_DIR=$build TIDY_MAX=${TIDY_MAX:-6} exec "$root/bench/tidy.sh" HEAD~1
