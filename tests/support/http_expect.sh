# Sourced by the page tests: curl with an expected status and error name.
# Needs $work (the body lands in $work/body) and a fail() of the caller.
#   status CURL-ARGS...               prints the status
#   expect STATUS ERROR CURL-ARGS...  fails unless the status (and, when
#                                     ERROR is not empty, the error) match
status() { curl -s -o "$work/body" -w '%{http_code}' "$@"; }
expect() {
  local want=$1 err=$2
  shift 2
  local got
  got=$(status "$@")
  [ "$got" = "$want" ] || fail "$*: status $got, want $want ($(cat "$work/body"))"
  if [ -n "$err" ]; then
    grep -q "\"error\":\"$err\"" "$work/body" || fail "$*: body $(cat "$work/body"), want $err"
  fi
}
