#!/usr/bin/env bash
# The cluster port under attack (issue 12): two matchd nodes on loopback
# (deploy/cluster-local.sh: mutual TLS with certificates from
# deploy/cluster-certs.sh, the port bound to 127.0.0.1).
#   (i)   a 32-byte BASP handshake header with payload length 0,
#   (ii)  a header announcing a 4 GiB payload,
#   (iii) 1 MiB of random bytes
#         -> the node stays up: /healthz answers, RSS below 300 MB;
#   (iv)  a CAF client without TLS, one without a certificate and one with a
#         certificate of another CA -> refused;
#   (v)   a user on node 1 and a user on node 2 match (events cross nodes
#         over TLS);
#   (vi)  a client with a valid certificate forges a match for a waiting
#         user -> not delivered, the user still waits;
#   and the port is not reachable on a non-loopback address of this machine.
#   (vii) client handshake headers of length 0 and 4 GiB, 32 zero bytes
#         -> the node stays up, RSS below 300 MB.
# MATCHD_CLUSTER_INSECURE=true runs the same against plaintext nodes, whose
# port is guarded by actors/basp_guard.hpp (without the guard, (i) and
# (vii) take node 1 down); (iv) needs TLS and is skipped.
#   cluster_tls_test.sh MATCHCTL ROGUE_PEER
set -euo pipefail
matchctl=$1 rogue=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(mktemp -d /tmp/mm_tls.XXXXXX)
cluster="$root/deploy/cluster-local.sh"
fail() { echo "FAIL: $*"; exit 1; }
trap '"$cluster" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
export MATCHD_LOG_LEVEL=warn
"$cluster" start "$dir" 2 >/dev/null
secret=$(cat "$dir/secret")
url1=$(sed -n 1p "$dir/urls") url2=$(sed -n 2p "$dir/urls")
cport1=$(cat "$dir/node1.cport")
pid1=$(cat "$dir/node1.pid")
certs="$dir/certs"
# Rogues' certificates: another CA's, the cluster CA's (valid), a new CA's.
"$root/deploy/cluster-certs.sh" "$dir/other-ca" rogue >/dev/null
"$root/deploy/cluster-certs.sh" "$certs" node-9 >/dev/null
"$root/deploy/cluster-certs.sh" "$dir/new-ca" node-8 >/dev/null

call() { # METHOD URL USER [BODY] -> the body on stdout
  local token
  token=$("$matchctl" --secret "$secret" token "$3")
  curl -sS --max-time 20 -X "$1" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' ${4:+--data "$4"} "$2"
}
field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
state_of() { call GET "$1/v1/users/$2/tickets/$3" "$2" | field state; }

# The node is up and small: /healthz answers, RSS below 300 MB.
check_node1() { # WHAT
  sleep 0.3
  kill -0 "$pid1" 2>/dev/null || fail "$1: node 1 died ($(tail -n 3 "$dir/node1.log"))"
  curl -fsS --max-time 5 "$url1/healthz" >/dev/null || fail "$1: /healthz does not answer"
  local rss
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid1/status")
  [ "$rss" -lt 307200 ] || fail "$1: node 1 RSS ${rss} kB"
  echo "ok: $1 (node 1 up, RSS ${rss} kB)"
}

# Sends bytes (hex, or "random:N") to the cluster port, reads until closed
# (at most HOLD s, default 3: the connection stays open meanwhile).
send_raw() { # HEX|random:N [HOLD]
  python3 - "$cport1" "$1" "${2:-3}" <<'PY'
import os, socket, sys
port, what, hold = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
data = os.urandom(int(what[7:])) if what.startswith("random:") else bytes.fromhex(what)
s = socket.create_connection(("127.0.0.1", port), timeout=hold)
try:
    s.sendall(data)
    while s.recv(65536):
        pass
except OSError:
    pass
s.close()
PY
}

# While the sender SENDER runs (its connection open), node 1's RSS stays
# below 300 MB.
watch_rss() { # SENDER WHAT
  local rss
  while kill -0 "$1" 2>/dev/null; do
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid1/status" 2>/dev/null || echo 0)
    [ "${rss:-0}" -lt 307200 ] || fail "$2 node 1 RSS ${rss} kB while the header's connection is open"
    sleep 0.2
  done
  wait "$1" || true
}

# ATTACKS="ii iv" runs only those of (i)-(iv), (vi) (default: all).
want() { [ -z "${ATTACKS:-}" ] || [[ " $ATTACKS " == *" $1 "* ]]; }

# The BASP header of CAF 0.17: operation, 2 padding bytes, flags, payload
# length (u32), operation data (u64), source and destination actor (u64),
# big endian. Operation 0 is the server handshake; CAF takes it as valid
# when its operation data (the BASP version) is not 0, and then reads a
# payload of the announced length (0: it dereferences a null payload).
header() { # PAYLOAD_LEN_HEX8 [OPERATION_HEX2]
  printf '%s000000%s%016x%016x%016x' "${2:-00}" "$1" 1 0 0
}

# -- the bind address ---------------------------------------------------------
ss -ltn | grep -q "127.0.0.1:$cport1 " || fail "cluster port not bound to 127.0.0.1: $(ss -ltn | grep ":$cport1 ")"
other=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^127\.' | grep -v ':' | head -n 1 || true)
if [ -n "$other" ]; then
  if python3 -c "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)" "$other" "$cport1" 2>/dev/null; then
    fail "cluster port reachable on $other"
  fi
  echo "ok: the cluster port is bound to 127.0.0.1, not reachable on $other"
else
  echo "ok: the cluster port is bound to 127.0.0.1 (no non-loopback address to try)"
fi

# -- (v) a match across the two nodes -----------------------------------------
# "default": the one queue a node serves without --queues.
q=default a="ua$$" b="ub$$"
r=$(call POST "$url1/v1/users/$a/tickets" "$a" "{\"queue\":\"$q\",\"ticket\":\"ta\"}")
[ "$(field state <<<"$r")" = queued ] || fail "A's join: $r"
call POST "$url2/v1/users/$b/tickets" "$b" "{\"queue\":\"$q\",\"ticket\":\"tb\"}" >/dev/null
for _ in $(seq 100); do
  sa=$(state_of "$url1" "$a" ta) sb=$(state_of "$url2" "$b" tb)
  [ "$sa" = matched ] && [ "$sb" = matched ] && break
  sleep 0.1
done
[ "$sa" = matched ] && [ "$sb" = matched ] || fail "no match across nodes: A $sa, B $sb"
echo "ok: (v) a user on node 1 and one on node 2 matched"

# -- (i)-(iii) garbage on the cluster port ------------------------------------
if want i; then
  send_raw "$(header 00000000)"
  check_node1 "(i) a BASP header with payload length 0"
fi
if want ii; then
  # While the connection is open (up to 10 s; TLS closes it at once) the
  # node's RSS is watched.
  send_raw "$(header ffffffff)$(printf '%02x' $(seq 1 64))" 10 &
  watch_rss $! "(ii)"
  check_node1 "(ii) a BASP header announcing a 4 GiB payload"
fi
if want iii; then
  send_raw random:1048576
  check_node1 "(iii) 1 MiB of random bytes"
fi
if want vii; then
  # The client handshake (operation 1), which a plaintext port reads first:
  # empty, then announcing 4 GiB; then 32 zero bytes after a valid-looking
  # client handshake's header.
  send_raw "$(header 00000000 01)"
  check_node1 "(vii) a client handshake header with payload length 0"
  send_raw "$(header ffffffff 01)$(printf '%02x' $(seq 1 64))" 5 &
  watch_rss $! "(vii)"
  check_node1 "(vii) a client handshake header announcing a 4 GiB payload"
  send_raw "$(printf '%064d' 0)"
  check_node1 "(vii) 32 zero bytes"
fi

# -- (iv) rogue CAF clients ---------------------------------------------------
refused() { # WHAT ARGS...
  local what=$1
  shift
  set +e
  timeout 30 "$rogue" "$@" >"$dir/rogue.out" 2>&1
  local rc=$?
  set -e
  [ "$rc" = 3 ] || fail "$what: not refused (exit $rc: $(cat "$dir/rogue.out"))"
  echo "ok: (iv) $what: refused ($(tr '\n' ' ' <"$dir/rogue.out"))"
}
want iv && refused "a plaintext client" plain 127.0.0.1 "$cport1"
if want iv && [ "${MATCHD_CLUSTER_INSECURE:-false}" != true ]; then
  refused "a TLS client without a certificate" connect 127.0.0.1 "$cport1"
  refused "a TLS client with another CA's certificate" connect 127.0.0.1 \
    "$cport1" "$dir/other-ca/rogue.crt" "$dir/other-ca/rogue.key" "$dir/other-ca/ca.crt"
  timeout 30 "$rogue" connect 127.0.0.1 "$cport1" "$certs/node-9.crt" \
    "$certs/node-9.key" "$certs/ca-bundle.crt" >/dev/null \
    || fail "a client with a valid certificate cannot connect"
  echo "ok: a client with a certificate of the cluster's CA connects"
fi
check_node1 "(iv) after the rogue clients"

# -- rotation: a bundle of two CAs, read again for new connections ------------
if [ "${MATCHD_CLUSTER_INSECURE:-false}" != true ]; then
  refused "a certificate of a CA not (yet) in the bundle" connect 127.0.0.1 \
    "$cport1" "$dir/new-ca/node-8.crt" "$dir/new-ca/node-8.key" "$certs/ca-bundle.crt"
  cat "$certs/ca.crt" "$dir/new-ca/ca.crt" >"$certs/ca-bundle.crt.new"
  mv -f "$certs/ca-bundle.crt.new" "$certs/ca-bundle.crt" # node 1 not restarted
  for who in "$dir/new-ca/node-8" "$certs/node-9"; do
    timeout 30 "$rogue" connect 127.0.0.1 "$cport1" "$who.crt" "$who.key" \
      "$certs/ca-bundle.crt" >/dev/null \
      || fail "rotation: $who not accepted with a bundle of both CAs"
  done
  echo "ok: a bundle of the old and the new CA accepts certificates of both (no restart)"
fi

# -- named start-up errors ------------------------------------------------------
start_err() { # EXPECTED CERT KEY CA
  local out rc
  set +e
  out=$(timeout 20 env -u MATCHD_CLUSTER_INSECURE "${MATCHD_BIN:-$root/build/bin/matchd}" --secret 0123456789abcdef-x \
    --redis 127.0.0.1:1 --postgres dbname=x --listen 127.0.0.1:0 \
    --cluster-port 1 --cluster-cert "$2" --cluster-key "$3" --cluster-ca "$4" 2>&1)
  rc=$?
  set -e
  [ "$rc" = 2 ] && grep -q "$1" <<<"$out" || fail "start-up check: want '$1' (exit 2), got exit $rc: $out"
  echo "ok: refused to start: $(grep -o "$1.*" <<<"$out" | head -c 160)"
}
start_err "cluster-cert '/nonexistent.crt': cannot read" /nonexistent.crt "$certs/node-9.key" "$certs/ca.crt"
start_err "cluster-key '$dir/new-ca/node-8.key': does not match" "$certs/node-9.crt" "$dir/new-ca/node-8.key" "$certs/ca.crt"
start_err "not accepted by the CA bundle" "$dir/other-ca/rogue.crt" "$dir/other-ca/rogue.key" "$certs/ca.crt"

# -- (vi) a forged match from a client with a valid certificate ---------------
if want vi; then
c="uc$$"
r=$(call POST "$url1/v1/users/$c/tickets" "$c" "{\"queue\":\"$q\",\"ticket\":\"tc\"}")
[ "$(field state <<<"$r")" = queued ] || fail "C's join: $r"
if [ "${MATCHD_CLUSTER_INSECURE:-false}" = true ]; then
  out=$(timeout 30 "$rogue" forge-plain 127.0.0.1 "$cport1" "$c" 2>&1 || true)
else
  out=$(timeout 30 "$rogue" forge 127.0.0.1 "$cport1" "$certs/node-9.crt" \
    "$certs/node-9.key" "$certs/ca-bundle.crt" "$c" 2>&1) || fail "forge: $out"
fi
echo "forged match.created for C: $out"
grep -q "reached=0 kept=0" <<<"$out" || fail "(vi) the forged event was taken: $out"
sleep 0.3
[ "$(state_of "$url1" "$c" tc)" = queued ] || fail "(vi) C no longer waits: $(state_of "$url1" "$c" tc)"
echo "ok: (vi) a forged match from a client with a valid certificate is not delivered"
fi
check_node1 "the end"
echo "PASS"
