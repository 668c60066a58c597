#!/usr/bin/env bash
# Fails when the committed client code has drifted from proto/: regenerates both clients in
# place with the pinned generators and asks git whether anything under the generated paths
# changed or appeared. Run clients/setup.sh first.
set -euo pipefail
clients="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$clients")"
generated=(clients/python/src/cronstable/_proto clients/typescript/src/gen)

"$clients/generate.sh" all >/dev/null
cd "$root"
if ! git diff --quiet --exit-code -- "${generated[@]}" \
   || [ -n "$(git status --porcelain --untracked-files=all -- "${generated[@]}")" ]; then
  echo "check.sh: the generated client code differs from what proto/ gives:" >&2
  git status --short --untracked-files=all -- "${generated[@]}" >&2
  git diff --stat -- "${generated[@]}" >&2
  echo "check.sh: run clients/generate.sh and commit the result" >&2
  exit 1
fi
echo "check.sh: generated client code matches proto/"
