#!/usr/bin/env bash
# Runs every cronstable test: unit, table and property tests of every crate, and the
# cross-process integration tests (real binaries on loopback sockets).
#
# System packages the build needs are installed when this runs as root (Debian/Ubuntu);
# otherwise a missing one is named and the script stops.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkg() { # command package
  if ! command -v "$1" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "==> installing $2 (provides $1)"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
    else
      echo "error: '$1' is missing; install the '$2' package (e.g. sudo apt-get install $2)" >&2
      exit 1
    fi
  fi
}

need_pkg protoc protobuf-compiler

echo "==> cargo test --workspace"
cargo test --workspace --all-targets
echo "==> doc tests"
cargo test --workspace --doc
