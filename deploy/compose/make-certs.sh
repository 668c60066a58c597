#!/bin/sh
# Makes the demo's mTLS files with openssl: a CA dedicated to the demo cluster and one
# certificate per node whose SAN is the node's compose host name (peers dial `nN:8443`, and a
# peer's certificate must name the host it was dialled at).
#
#   ./make-certs.sh 3     # n1..n3, for gossip-3.yaml
#   ./make-certs.sh 10    # n1..n10, for spread-10.yaml
#
# Writes certs/ca.pem, certs/ca-key.pem and certs/nN/{ca.pem,cert.pem,key.pem}. The CA key
# never leaves certs/; keep it out of the containers.
set -eu
count=${1:-3}
cd "$(dirname "$0")"
mkdir -p certs
if [ ! -f certs/ca.pem ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
        -subj "/CN=cronstable-demo-ca" -keyout certs/ca-key.pem -out certs/ca.pem 2>/dev/null
fi
i=1
while [ "$i" -le "$count" ]; do
    node="n$i"
    dir="certs/$node"
    mkdir -p "$dir"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$node" \
        -keyout "$dir/key.pem" -out "$dir/req.pem" 2>/dev/null
    printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n' \
        "$node" >"$dir/ext.cnf"
    openssl x509 -req -in "$dir/req.pem" -CA certs/ca.pem -CAkey certs/ca-key.pem \
        -CAcreateserial -days 825 -extfile "$dir/ext.cnf" -out "$dir/cert.pem" 2>/dev/null
    cp certs/ca.pem "$dir/ca.pem"
    rm -f "$dir/req.pem" "$dir/ext.cnf"
    # The containers run as uid 10001.
    chmod 0644 "$dir/key.pem"
    i=$((i + 1))
done
echo "wrote certs/ for n1..n$count"
