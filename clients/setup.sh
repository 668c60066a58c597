#!/usr/bin/env bash
# Installs what the clients need to be regenerated and tested, from PyPI and npm only:
# a venv at clients/.venv (or $CRONSTABLE_CLIENTS_VENV) with the pinned Python tools and the
# package itself (editable), and clients/typescript/node_modules from package-lock.json.
set -euo pipefail
clients="$(cd "$(dirname "$0")" && pwd)"
venv="${CRONSTABLE_CLIENTS_VENV:-$clients/.venv}"

die() { echo "setup.sh: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 is missing (CPython 3.11 or newer is needed)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "python3 is $(python3 --version 2>&1); the Python client needs 3.11 or newer"
python3 -c 'import venv, ensurepip' 2>/dev/null \
  || die "python3 has no venv/ensurepip module (on Debian: apt-get install python3-venv)"
command -v node >/dev/null || die "node is missing (Node 20 or newer is needed)"
command -v npm >/dev/null || die "npm is missing"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)' \
  || die "node is $(node --version); the TypeScript client needs 20 or newer"

if [ ! -x "$venv/bin/python" ]; then
  echo "==> creating $venv"
  python3 -m venv "$venv"
fi
echo "==> pip install (clients/python/requirements-dev.txt and the package)"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$clients/python/requirements-dev.txt"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -e "$clients/python"

echo "==> npm ci (clients/typescript)"
(cd "$clients/typescript" && npm ci --no-audit --no-fund --loglevel=error)
