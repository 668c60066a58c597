#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 5): the bounded run CI does. Needs a nightly
# toolchain and cargo-fuzz (`cargo install cargo-fuzz`). New inputs go to a scratch corpus
# (FUZZ_CORPUS, default a temporary directory), so tests/fuzz/seeds/ stays as committed; a crash
# stops the run with the input under tests/fuzz/artifacts/TARGET/, which `cargo +nightly fuzz
# run --fuzz-dir tests/fuzz TARGET FILE` replays.
#
# Longer runs: tests/fuzz/run.sh 600 (ten minutes per target), or one target by hand:
#   cargo +nightly fuzz run --fuzz-dir tests/fuzz peer_body -- -max_total_time=3600
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-5}"
corpus="${FUZZ_CORPUS:-$(mktemp -d)}"
targets=(crontab jobfile config peer_body node_stats grpc_requests)

echo "==> cargo +nightly fuzz build (tests/fuzz)"
cargo +nightly fuzz build --fuzz-dir tests/fuzz
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t"
  log="$corpus/$t.log"
  # -rss_limit_mb: a decoder that balloons is a finding too. -timeout: one input may not take
  # more than 10 s (a schedule search that never ends would).
  if ! cargo +nightly fuzz run --fuzz-dir tests/fuzz "$t" "$corpus/$t" "tests/fuzz/seeds/$t" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $t: FAILED (the input is under tests/fuzz/artifacts/$t/)"
    exit 1
  fi
  runs=$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1)
  echo "fuzz: $t: ${runs:-?} inputs in ${seconds} s, no crash"
done
