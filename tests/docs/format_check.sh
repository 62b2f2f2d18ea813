#!/usr/bin/env bash
# The tree keeps the project's format (.clang-format, clang-format 14).
#
#   format_check.sh ROOT        every tracked .cpp/.hpp, exit 1 naming each
#                               file clang-format would change
#   format_check.sh --self-test a misformatted file in a scratch copy of
#                               .clang-format must be caught (the check can
#                               fail), a formatted one must pass
# Fix a file with `clang-format -i FILE`.
set -euo pipefail
fmt=${CLANG_FORMAT:-clang-format}
command -v "$fmt" >/dev/null || { echo "format_check: $fmt not found (deploy/setup.sh installs it)"; exit 1; }

check() { # DIR FILE...: names each file that differs, returns 1 if any
  local dir=$1 out; shift
  # One clang-format for all files; -Werror makes each difference an
  # "error:" line that starts with the file's name.
  if out=$(cd "$dir" && "$fmt" --dry-run -Werror --style=file "$@" 2>&1); then
    return 0
  fi
  grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$out" | cut -d: -f1 | sort -u \
    | sed 's/^\(.*\)$/format_check: \1 is not formatted (clang-format -i \1)/'
  grep -q ': error' <<<"$out" || echo "$out"
  return 1
}

if [ "${1:-}" = "--self-test" ]; then
  root=$(cd "$(dirname "$0")/../.." && pwd)
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  cp "$root/.clang-format" "$tmp/"
  printf 'int  f( int x ){return x*2;}\n' >"$tmp/bad.cpp"
  printf 'int f(int x) {\n  return x * 2;\n}\n' >"$tmp/good.cpp"
  if check "$tmp" bad.cpp >/dev/null; then
    echo "format_check self-test: a misformatted file passed"; exit 1
  fi
  check "$tmp" good.cpp || { echo "format_check self-test: a formatted file failed"; exit 1; }
  echo "format_check self-test: ok"
  exit 0
fi

root=${1:?usage: format_check.sh ROOT | --self-test}
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked files that exist (a file deleted in the work tree is not checked).
  mapfile -t files < <(git ls-files -co --exclude-standard '*.cpp' '*.hpp' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
else
  mapfile -t files < <(find actors app bench core messages persistence tests \
                         -name '*.cpp' -o -name '*.hpp' | sort)
fi
if check . "${files[@]}"; then
  echo "format_check: ${#files[@]} files formatted"
else
  exit 1
fi
