#!/usr/bin/env bash
# Writes a throwaway CA and one gossip node's certificate into DIR, for the conformance
# setup "lonely-gossip" (a node whose cluster.tls must load although no peer ever answers):
#
#   clients/conformance/gossip-certs.sh DIR NODE IP
#
# Creates DIR/ca.pem, DIR/NODE.pem and DIR/NODE-key.pem: EC P-256, the node certificate naming
# NODE and IP, usable as server and client (mTLS). Needs the openssl command.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 DIR NODE IP" >&2; exit 64; }
dir=$1 node=$2 ip=$3
command -v openssl >/dev/null || { echo "$0: openssl is missing (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" 2>/dev/null || { echo "$0: failed: $*" >&2; exit 1; }; }
quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca-key.pem
quiet openssl req -x509 -new -key ca-key.pem -subj "/CN=cronstable-conformance-ca" -days 2 \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem
quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$node-key.pem"
quiet openssl req -new -key "$node-key.pem" -subj "/CN=$node" -out "$node.csr"
printf 'subjectAltName=DNS:%s,IP:%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n' \
  "$node" "$ip" > "$node.ext"
quiet openssl x509 -req -in "$node.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
  -extfile "$node.ext" -out "$node.pem"
rm -f "$node.csr" "$node.ext" ca.srl
