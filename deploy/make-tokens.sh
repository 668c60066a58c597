#!/bin/sh
# Makes the two bearer tokens every shipped deployment reads from files: DIR/api (the gRPC
# API's api.authToken, which the shim and cronstable-gate send) and DIR/web (the HTTP API's
# web.authToken: the dashboard's sign-in, Prometheus' scrape, curl). 32 random bytes each, hex.
# An existing token is kept, so running it again changes nothing.
#
#   deploy/make-tokens.sh deploy/compose/tokens      # the docker compose demos
#   deploy/make-tokens.sh deploy/kubernetes/tokens   # the kustomize base's secretGenerator
#
# The directories are git-ignored. Rotate a token by writing a new one and sending SIGHUP to
# the coordinator (the shim re-reads its file every 5 s).
set -eu
dir=${1:?usage: make-tokens.sh DIR}
mkdir -p "$dir"
for name in api web; do
    if [ ! -s "$dir/$name" ]; then
        (umask 077 && openssl rand -hex 32 >"$dir/$name")
        # The containers run as uid 10001, which must read the file through its mount.
        chmod 0644 "$dir/$name"
    fi
done
echo "tokens in $dir/api and $dir/web"
