#!/usr/bin/env bash
# Compiles a committed state of boundary for the benchmarks' BOUNDARY_REF: `git archive REF src tsconfig.json
# package.json` into bench/out/build-<sha>/ (inside the project, so node_modules resolves; package.json so it
# compiles and runs as ESM whatever bench/out holds), once per sha. Prints the dist directory on stdout.
#   bench/build-ref.sh REF [TSC_LOG]
# tsc errors of files a later commit fixed are tolerated (dist is written anyway); they go to TSC_LOG.
set -euo pipefail

ref=${1:?usage: bench/build-ref.sh REF [TSC_LOG]}
root=$(cd "$(dirname "$0")/.." && pwd)
tsc_log=${2:-/dev/null}
sha=$(git -C "$root" rev-parse --short "$ref") || { echo "BOUNDARY_REF: unknown ref $ref" >&2; exit 2; }
snap="$root/bench/out/build-$sha"
if [[ ! -f $snap/dist/main.js && ! -f $snap/dist/app/main.js ]]; then
  echo "building boundary $ref ($sha) into $snap" >&2
  rm -rf "$snap" && mkdir -p "$snap"
  git -C "$root" archive "$sha" src tsconfig.json package.json | tar -x -C "$snap"
  "$root/node_modules/.bin/tsc" -p "$snap/tsconfig.json" >"$tsc_log" 2>&1 || echo "tsc reported errors for $sha (see $tsc_log)" >&2
fi
echo "$snap/dist"
