#!/usr/bin/env bash
# Certificates for the mutual TLS between matchd nodes (docs/cluster.md,
# "Security"), made with the openssl CLI:
#
#   deploy/cluster-certs.sh DIR NODE...
#
# DIR/ca.key, DIR/ca.crt      the cluster's CA (made once: an existing CA in
#                             DIR is reused, so the script also adds nodes and
#                             renews node certificates)
# DIR/ca-bundle.crt           the CAs a node trusts (--cluster-ca); made from
#                             ca.crt when missing, never overwritten (rotation
#                             edits it: docs/cluster.md)
# DIR/NODE.key, DIR/NODE.crt  one key and certificate per node (--cluster-key,
#                             --cluster-cert); an existing pair is replaced
#
# NODE is "name" or "name=host" (host: the address the node is reached at,
# written into the certificate's subjectAltName with 127.0.0.1 and
# localhost; default: the name). Keys are EC P-256, mode 0600. Validity:
# CA_DAYS (default 3650) and NODE_DAYS (default 825) days. The CA key signs
# nodes only: keep it off the nodes.
set -euo pipefail
dir=${1:?usage: cluster-certs.sh DIR NODE...}
shift
[ $# -ge 1 ] || { echo "usage: cluster-certs.sh DIR NODE..." >&2; exit 2; }
ca_days=${CA_DAYS:-3650}
node_days=${NODE_DAYS:-825}
umask 077
mkdir -p "$dir"

ip_or_dns() { # HOST -> a subjectAltName entry
  if [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ || $1 == *:* ]]; then
    echo "IP:$1"
  else
    echo "DNS:$1"
  fi
}

if [ ! -f "$dir/ca.key" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key"
  openssl req -x509 -new -key "$dir/ca.key" -sha256 -days "$ca_days" \
    -subj "/CN=matchd cluster CA $(date -u +%Y%m%d%H%M%S)" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/ca.crt" 2>/dev/null
fi
[ -f "$dir/ca-bundle.crt" ] || cp "$dir/ca.crt" "$dir/ca-bundle.crt"
chmod 0644 "$dir/ca.crt" "$dir/ca-bundle.crt"

for spec in "$@"; do
  name=${spec%%=*}
  host=$name
  [[ $spec == *=* ]] && host=${spec#*=}
  if ! [[ $name =~ ^[A-Za-z0-9._@:-]{1,64}$ ]]; then
    echo "cluster-certs.sh: bad node name '$name'" >&2
    exit 2
  fi
  san="$(ip_or_dns "$host"),IP:127.0.0.1,DNS:localhost"
  [ "$host" = "$name" ] || san="$san,$(ip_or_dns "$name")"
  ext=$(mktemp)
  trap 'rm -f "$ext"' EXIT
  cat >"$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EXT
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key.new"
  openssl req -new -key "$dir/$name.key.new" -subj "/CN=$name" \
    -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" \
    -CAkey "$dir/ca.key" -CAcreateserial -sha256 -days "$node_days" \
    -extfile "$ext" -out "$dir/$name.crt.new" 2>/dev/null
  rm -f "$dir/$name.csr" "$ext"
  chmod 0600 "$dir/$name.key.new"
  chmod 0644 "$dir/$name.crt.new"
  # Replaced by rename: a node that opens them meanwhile reads a whole file.
  mv -f "$dir/$name.key.new" "$dir/$name.key"
  mv -f "$dir/$name.crt.new" "$dir/$name.crt"
  echo "$dir/$name.crt ($san)"
done
