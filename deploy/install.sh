#!/usr/bin/env bash
# Installs matchd as a systemd service, as docs/matchd.md ("Install as a
# systemd service") describes. Run as root from a clone after
# deploy/build.sh:
#
#   deploy/install.sh                      one node: matchd.service
#   deploy/install.sh --cluster node-1     a cluster node: matchd@node-1
#                                          (deploy/cluster/node-1.toml and
#                                          its TLS files, see docs/cluster.md)
#   options: --binary PATH (default build/bin/matchd)
#            --certs DIR   (with --cluster: deploy/cluster-certs.sh's DIR)
#            --destdir DIR (stage into DIR instead of /: no user is made,
#                          no ownership set, no systemctl; for packaging and
#                          tests/deploy/systemd_test.sh)
#
# What it puts where (nothing existing under /etc/matchd is overwritten):
#   system user and group matchd       no login shell, no home
#   /usr/local/bin/matchd              0755
#   /etc/matchd/                       root:matchd 0750
#   /etc/matchd/matchd.toml            root:matchd 0640 (or NODE.toml)
#   /etc/matchd/secret.env             root:root 0600, MATCHD_SECRET=<random>:
#                                      systemd reads it as root, matchd gets
#                                      the variable; give your application the
#                                      same secret
#   /etc/matchd/cluster/               root:matchd 0750, NODE.key 0640,
#                                      NODE.crt and ca-bundle.crt 0644
#   /etc/systemd/system/matchd.service, matchd@.service   0644
#   /usr/local/share/doc/matchd/       matchd.md, cluster.md
# Then: systemctl enable --now matchd (or matchd@NODE).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
binary="$src/build/bin/matchd"
destdir=""
cluster=""
certs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?}; shift 2 ;;
    --destdir) destdir=${2:?}; shift 2 ;;
    --cluster) cluster=${2:?}; shift 2 ;;
    --certs) certs=${2:?}; shift 2 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || { echo "install.sh: no matchd at $binary (run deploy/build.sh)" >&2; exit 2; }
if [ -n "$cluster" ] && [ ! -f "$src/deploy/cluster/$cluster.toml" ]; then
  echo "install.sh: no deploy/cluster/$cluster.toml" >&2; exit 2
fi

root=${destdir:-}
# owner GROUP PATH...: root:GROUP on a real install; left as is when staging.
owner() {
  local group=$1; shift
  [ -n "$destdir" ] || chown "root:$group" "$@"
}

if [ -z "$destdir" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "install.sh: run as root" >&2; exit 2; }
  getent group matchd >/dev/null || groupadd --system matchd
  getent passwd matchd >/dev/null \
    || useradd --system --gid matchd --no-create-home --home-dir /nonexistent \
         --shell /usr/sbin/nologin matchd
fi

install -d -m 0755 "$root/usr/local/bin" "$root/etc/systemd/system" \
  "$root/usr/local/share/doc/matchd"
install -m 0755 "$binary" "$root/usr/local/bin/matchd"
install -d -m 0750 "$root/etc/matchd"
owner matchd "$root/etc/matchd"

config=matchd.toml
from="$src/deploy/matchd.toml"
if [ -n "$cluster" ]; then
  config="$cluster.toml"
  from="$src/deploy/cluster/$cluster.toml"
fi
if [ ! -e "$root/etc/matchd/$config" ]; then
  install -m 0640 "$from" "$root/etc/matchd/$config"
  owner matchd "$root/etc/matchd/$config"
fi
if [ ! -e "$root/etc/matchd/secret.env" ]; then
  (umask 077; printf 'MATCHD_SECRET=%s\n' \
     "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
     >"$root/etc/matchd/secret.env")
  chmod 0600 "$root/etc/matchd/secret.env"
  owner root "$root/etc/matchd/secret.env"
fi
if [ -n "$cluster" ] && [ -n "$certs" ]; then
  install -d -m 0750 "$root/etc/matchd/cluster"
  owner matchd "$root/etc/matchd/cluster"
  install -m 0644 "$certs/$cluster.crt" "$certs/ca-bundle.crt" "$root/etc/matchd/cluster/"
  install -m 0640 "$certs/$cluster.key" "$root/etc/matchd/cluster/"
  owner matchd "$root/etc/matchd/cluster/$cluster.key"
fi
install -m 0644 "$src/deploy/matchd.service" "$src/deploy/matchd@.service" \
  "$root/etc/systemd/system/"
install -m 0644 "$src/docs/matchd.md" "$src/docs/cluster.md" \
  "$root/usr/local/share/doc/matchd/"

unit=matchd
[ -z "$cluster" ] || unit="matchd@$cluster"
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
echo "installed${destdir:+ into $destdir}; start it with: systemctl enable --now $unit"
