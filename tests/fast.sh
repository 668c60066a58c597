#!/usr/bin/env bash
# The fast tier: every pure, table, property, unit and simulation test of every crate but the
# integration tier (`tests/`). No root, no etcd, no network namespace, no browser: it runs on a
# machine with only the Rust toolchain, in under a minute once built (BENCHMARKS.md).
#
# cargo-nextest runs each test in its own process, four at a time: most of the slow ones wait
# on a real clock (the filesystem and Kubernetes lease suites), not on the CPU. Without
# nextest, plain `cargo test` runs the same tests, one binary after another.
set -euo pipefail
cd "$(dirname "$0")/.."
if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --exclude cronstable-tests --test-threads 4 "$@"
fi
exec cargo test --workspace --exclude cronstable-tests "$@"
