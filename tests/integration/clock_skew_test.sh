#!/usr/bin/env bash
# Nodes whose wall clocks are off by +-10 minutes (faketime) see no change in
# deadlines or order, on Redis and on the embedded store (problem 7 of docs/design.md).
#   clock_skew_test.sh PROBE REDIS_DIR
set -euo pipefail
probe=$1
port=$(cat "$2/port")
q="skew-$$-$RANDOM"
fail() { echo "FAIL: $*" >&2; exit 1; }
ms() { "$@" | tail -n 1; }

# The shift must really apply, or this test could not fail.
base=$(ms "$probe" now)
ahead=$(ms faketime -f '+10m' "$probe" now)
behind=$(ms faketime -f '-10m' "$probe" now)
(( ahead - base > 590000 )) || fail "faketime +10m did not shift the clock"
(( base - behind > 590000 )) || fail "faketime -10m did not shift the clock"

# Three nodes enqueue one after another: true, +10 min, -10 min.
d1=$(ms "$probe" redis "$port" enqueue "$q" u1 t1)
d2=$(ms faketime -f '+10m' "$probe" redis "$port" enqueue "$q" u2 t2)
d3=$(ms faketime -f '-10m' "$probe" redis "$port" enqueue "$q" u3 t3)
for d in "$d2" "$d3"; do
  diff=$(( d - d1 )); diff=${diff#-}
  (( diff < 5000 )) || fail "deadline moved with a node's clock: $d1 vs $d"
done
(( d1 <= d2 && d2 <= d3 )) || fail "deadlines out of order: $d1 $d2 $d3"

# Claims from skewed nodes take them oldest first and see none as stale.
r1=$(ms faketime -f '+10m' "$probe" redis "$port" claim "$q" c1 tc1)
r2=$(ms faketime -f '-10m' "$probe" redis "$port" claim "$q" c2 tc2)
r3=$(ms "$probe" redis "$port" claim "$q" c3 tc3)
[ "$r1 | $r2 | $r3" = "matched u1 | matched u2 | matched u3" ] \
  || fail "order changed with node clocks: $r1 | $r2 | $r3"

# The embedded store uses its injected clock only.
e0=$(ms "$probe" embedded)
e1=$(ms faketime -f '+10m' "$probe" embedded)
e2=$(ms faketime -f '-10m' "$probe" embedded)
[ "$e0" = "1700000060000 1700000060000 a" ] || fail "embedded: $e0"
[ "$e1" = "$e0" ] && [ "$e2" = "$e0" ] || fail "embedded moved: $e0 / $e1 / $e2"
echo "clock skew: 1 passed, 0 failed"
