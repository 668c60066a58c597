#!/usr/bin/env bash
# Regenerates both clients' protocol code from proto/cronstable/v1/cronstable.proto.
#
#   clients/generate.sh [python|typescript|all]
#
# Both languages use the protoc bundled in the pinned grpcio-tools (clients/python/
# requirements-dev.txt), and the TypeScript side the pinned ts-proto plugin
# (clients/typescript/package-lock.json), so the output is the same on every machine.
# clients/setup.sh installs both; run it first.
set -euo pipefail
clients="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$clients")"
venv="${CRONSTABLE_CLIENTS_VENV:-$clients/.venv}"
python="$venv/bin/python"
what="${1:-all}"

die() { echo "generate.sh: $*" >&2; exit 1; }
[ -x "$python" ] || die "no Python venv at $venv; run clients/setup.sh first"
"$python" -c 'import grpc_tools' 2>/dev/null || die "grpcio-tools is not installed in $venv; run clients/setup.sh"

proto_dir="$root/proto"
proto="cronstable/v1/cronstable.proto"

gen_python() {
  local out="$clients/python/src/cronstable/_proto" tmp
  tmp="$(mktemp -d)"
  (cd "$proto_dir" && "$python" -m grpc_tools.protoc -I . \
      --python_out="$tmp" --pyi_out="$tmp" --grpc_python_out="$tmp" "$proto")
  mkdir -p "$out"
  rm -f "$out"/cronstable_pb2*.py "$out"/cronstable_pb2*.pyi
  cp "$tmp/cronstable/v1/cronstable_pb2.py" "$tmp/cronstable/v1/cronstable_pb2.pyi" "$out/"
  # protoc writes an absolute import (`from cronstable.v1 import ...`) that would collide with
  # this package's own name; the stubs live side by side, so a relative import is right.
  sed 's/^from cronstable\.v1 import cronstable_pb2 as/from . import cronstable_pb2 as/' \
    "$tmp/cronstable/v1/cronstable_pb2_grpc.py" > "$out/cronstable_pb2_grpc.py"
  grep -q '^from \. import cronstable_pb2 as' "$out/cronstable_pb2_grpc.py" \
    || die "the grpc stub's import of cronstable_pb2 was not rewritten; did grpcio-tools change its output?"
  rm -rf "$tmp"
  echo "generated $out"
}

gen_typescript() {
  local ts="$clients/typescript" plugin out
  plugin="$ts/node_modules/.bin/protoc-gen-ts_proto"
  [ -x "$plugin" ] || die "ts-proto is not installed; run clients/setup.sh (npm ci in clients/typescript)"
  out="$ts/src/gen"
  rm -rf "$out"
  mkdir -p "$out"
  (cd "$proto_dir" && "$python" -m grpc_tools.protoc -I . \
      --plugin=protoc-gen-ts_proto="$plugin" --ts_proto_out="$out" \
      --ts_proto_opt=outputServices=grpc-js,env=node,esModuleInterop=true,useExactTypes=false \
      "$proto")
  echo "generated $out"
}

case "$what" in
  python) gen_python ;;
  typescript) gen_typescript ;;
  all) gen_python; gen_typescript ;;
  *) die "unknown target $what (python, typescript or all)" ;;
esac
