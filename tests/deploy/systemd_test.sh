#!/usr/bin/env bash
# The systemd units as deploy/install.sh installs them (issue 14):
#   - install.sh --destdir stages the documented layout with its modes;
#   - `systemd-analyze verify` of matchd.service and matchd@node-1.service in
#     that root says nothing (any warning fails: verify itself exits 0 on an
#     unknown key or a bad value);
#   - `systemd-analyze security --offline=yes` rates both at exposure <= 3.0.
# No systemd needs to run (none does on the project's machines).
# Usage: systemd_test.sh SOURCE_DIR MATCHD
set -euo pipefail
src=${1:?source dir}
matchd=${2:?matchd binary}
max_exposure=3.0
work=$(mktemp -d /tmp/systemd_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }

root="$work/root"
bash "$src/deploy/install.sh" --destdir "$root" --binary "$matchd" >"$work/install.log"
mode() { stat -c %a "$root/$1"; }
[ "$(mode usr/local/bin/matchd)" = 755 ] || no "matchd mode $(mode usr/local/bin/matchd)"
[ "$(mode etc/matchd)" = 750 ] || no "/etc/matchd mode $(mode etc/matchd)"
[ "$(mode etc/matchd/matchd.toml)" = 640 ] || no "matchd.toml mode $(mode etc/matchd/matchd.toml)"
[ "$(mode etc/matchd/secret.env)" = 600 ] || no "secret.env mode $(mode etc/matchd/secret.env)"
grep -Eq '^MATCHD_SECRET=[0-9a-f]{64}$' "$root/etc/matchd/secret.env" || no "secret.env content"
# The unit reads what install.sh put there, as the user install.sh makes.
unit="$root/etc/systemd/system/matchd.service"
grep -qx 'ExecStart=/usr/local/bin/matchd --config /etc/matchd/matchd.toml' "$unit" \
  || no "ExecStart does not name the installed config"
grep -qx 'EnvironmentFile=/etc/matchd/secret.env' "$unit" || no "EnvironmentFile"
grep -qx 'User=matchd' "$unit" || no "User=matchd"
grep -qx 'Group=matchd' "$unit" || no "Group=matchd"
grep -q 'getent passwd matchd' "$src/deploy/install.sh" || no "install.sh makes no user matchd"
if grep -q '^DynamicUser=yes' "$unit"; then
  no "DynamicUser=yes cannot read a root:matchd 0640 config"
fi
grep -qx 'Type=notify' "$unit" || no "Type=notify"
grep -q '^WatchdogSec=' "$unit" || no "WatchdogSec"
# A second run keeps the config and the secret.
secret=$(cat "$root/etc/matchd/secret.env")
bash "$src/deploy/install.sh" --destdir "$root" --binary "$matchd" >/dev/null
[ "$(cat "$root/etc/matchd/secret.env")" = "$secret" ] || no "a second install replaced the secret"

# verify needs the units those reference (sysinit.target, ...) in the root.
mkdir -p "$root/lib/systemd"
cp -a /lib/systemd/system "$root/lib/systemd/"
for u in matchd.service matchd@node-1.service; do
  if ! out=$(systemd-analyze verify --root="$root" --man=no "$u" 2>&1) || [ -n "$out" ]; then
    no "systemd-analyze verify $u: $out"
  fi
done

for u in matchd.service matchd@.service; do
  out=$(systemd-analyze security --offline=yes --no-pager "$src/deploy/$u" 2>&1 | tail -n 1)
  score=$(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
  if [ -z "$score" ]; then
    no "systemd-analyze security $u: no score: $out"
  elif ! awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s <= m) }'; then
    no "$u: exposure $score > $max_exposure"
  else
    echo "$u: exposure $score (<= $max_exposure)"
  fi
done

[ "$fail" = 0 ] && echo "systemd units: install layout, verify and security all pass"
exit "$fail"
