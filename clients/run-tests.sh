#!/usr/bin/env bash
# Runs the clients' checks end to end: installs the Python and npm dependencies (PyPI and npm
# only), builds the coordinator binary, checks the generated code for drift from proto/, then
# runs the Python and the TypeScript conformance suites against live coordinators.
#
#   bash clients/run-tests.sh
#
# Honours CARGO_TARGET_DIR. CRONSTABLE_BIN, when set, names a prebuilt binary to test instead.
set -euo pipefail
clients="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$clients")"
venv="${CRONSTABLE_CLIENTS_VENV:-$clients/.venv}"

# The lonely-gossip conformance setup makes its TLS certificates with openssl.
command -v openssl >/dev/null || { echo "run-tests.sh: openssl is missing (apt-get install openssl)" >&2; exit 1; }

# CRONSTABLE_CLIENTS_READY=1: the caller ran setup.sh already (tests/run.sh, beside the build).
if [ -z "${CRONSTABLE_CLIENTS_READY:-}" ]; then
  echo "==> clients: installing dependencies"
  "$clients/setup.sh"
fi

if [ -z "${CRONSTABLE_BIN:-}" ]; then
  echo "==> clients: cargo build -p cronstable-coordinator"
  (cd "$root" && cargo build --quiet -p cronstable-coordinator --bin cronstable)
  target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
  export CRONSTABLE_BIN="$target_dir/debug/cronstable"
fi
if [ ! -x "$CRONSTABLE_BIN" ]; then
  echo "run-tests.sh: the coordinator binary $CRONSTABLE_BIN is missing or not executable" >&2
  exit 1
fi
echo "==> clients: testing against $CRONSTABLE_BIN"

echo "==> clients: drift check (clients/check.sh)"
"$clients/check.sh"

echo "==> clients: lint (ruff, prettier; tsc type-checks in the TypeScript build)"
(cd "$clients/python" && "$venv/bin/ruff" check --quiet . && "$venv/bin/ruff" format --check --quiet .)
(cd "$clients/typescript" && npm run lint --silent)

echo "==> clients: Python conformance suite (pytest)"
(cd "$clients/python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider)

echo "==> clients: TypeScript conformance suite (node --test)"
(cd "$clients/typescript" && npm test --silent)
