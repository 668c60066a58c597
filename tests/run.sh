#!/usr/bin/env bash
# Runs every cronstable test: the fast tier (unit, table, property and simulation tests of
# every crate), the integration tier (real binaries on loopback sockets, a real etcd, Chromium)
# and the root-only lab tests (network namespaces, the partition runs), then the doc tests and
# the Python and TypeScript clients' conformance suites. README, Development, has the tiers.
#
# System packages the build needs are installed when this runs as root (Debian/Ubuntu);
# otherwise a missing one is named and the script stops.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkg() { # command package: install it as root, or name it and stop
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

# protoc is not needed: .cargo/config.toml sets PROTOC to tools/protoc, which runs a protoc on
# PATH if there is one and otherwise the one the protoc-bin-vendored crate ships.
# A real etcd for the etcd lease backend's tests (they fail, not skip, without it).
need_pkg etcd etcd-server
need_pkg etcdctl etcd-client
# Network namespaces for the partition tests.
need_pkg ip iproute2
# nsenter and mount: the partition harness cuts a node off the filesystem store in its mount namespace
need_pkg nsenter util-linux
need_pkg mount mount
# chattr: reboot_record_first.rs makes the filesystem store's record stream immutable, which
# even root cannot append to
need_pkg chattr e2fsprogs
# libfaketime: a coordinator whose clock is off (tests/tests/integration/clock_skew.rs).
need_pkg faketime faketime
# Prometheus' own checker for the /metrics exposition.
need_pkg promtool prometheus
# Debian's real cron daemon runs cronstable-gate (tests/tests/integration/gate_cron.rs), and the systemd
# units are checked by systemd-analyze verify (tests/tests/integration/deploy_artifacts.rs).
need_pkg cron cron
need_pkg systemd-analyze systemd
# The dashboard's browser tests drive headless Chromium over WebDriver
# (tests/tests/integration/dashboard_browser.rs).
need_pkg chromium chromium
need_pkg chromedriver chromium-driver

log=$(mktemp)
setup_log=$(mktemp)
# The clients' dependencies (PyPI, npm) come over the network while the Rust side builds and
# runs: started now, waited for before the clients' suites, and never left behind.
# openssl makes the certificates of the clients' gossip case.
need_pkg openssl openssl
bash clients/setup.sh >"$setup_log" 2>&1 &
setup_pid=$!
trap 'kill "$setup_pid" 2>/dev/null || true; rm -f "$log" "$setup_log"' EXIT
# Every test target in one cargo invocation: the integration tests' own `cargo build` of the
# binaries (`binary()` in tests/src/lib.rs) then finds them up to date.
echo "==> cargo test --workspace --all-targets --no-run"
cargo test --workspace --all-targets --no-run
if cargo nextest --version >/dev/null 2>&1; then
  # Each test in a process of its own, five at a time, the partition runs first (profile `ci`
  # in .config/nextest.toml).
  echo "==> cargo nextest run --workspace --profile ci"
  cargo nextest run --workspace --all-targets --profile ci 2>&1 | tee "$log"
else
  echo "==> cargo test --workspace (cargo-nextest is not installed)"
  cargo test --workspace --all-targets 2>&1 | tee "$log"
fi
echo "==> doc tests"
cargo test --workspace --doc 2>&1 | tee -a "$log"
# The Python and TypeScript clients against live coordinators, run on the coordinator binary
# the tests used (building it alone would resolve other features and compile half the tree
# again).
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
echo "==> client conformance suites (clients/run-tests.sh)"
if wait "$setup_pid"; then
  cat "$setup_log"
  ready=1
else
  # run-tests.sh runs setup.sh again and stops with its error.
  cat "$setup_log"
  ready=
fi
CRONSTABLE_CLIENTS_READY="$ready" CRONSTABLE_BIN="$target_dir/debug/cronstable" \
  bash clients/run-tests.sh 2>&1 | tee -a "$log"

# The fuzz targets' seeds and saved crashes were replayed above, on stable, by the
# cronstable-fuzz-checks tests. The fuzzer itself (nightly, sanitizers, minutes of build) runs
# from its own script, off this path: tests/fuzz/run.sh SECONDS.

# One closing line over every runner: nextest's summary (or cargo's result line per binary),
# pytest's "N passed" and node's TAP "# pass N". awk, not grep: a grep that matches nothing
# fails, and under `set -e -o pipefail` that would end the script before its summary.
count() { awk "$1" "$log"; }
nextest=$(count '/tests run: [0-9]+ passed/ { for (i = 1; i < NF; i++) if ($i == "run:") s += $(i + 1) } END { print s + 0 }')
cargo_t=$(count '/^test result: / { s += $4 } END { print s + 0 }')
py=$(count '/^[0-9]+ passed/ { s += $1 } END { print s + 0 }')
node=$(count '/^# pass [0-9]+/ { s += $3 } END { print s + 0 }')
passed=$((nextest + cargo_t + py + node))
failed=$(count '/^test result: |tests run: / { for (i = 2; i <= NF; i++) if ($i ~ /^failed[;,]?$/) s += $(i - 1) } END { print s + 0 }')
echo
echo "summary: $passed passed, $failed failed"
