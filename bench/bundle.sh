#!/usr/bin/env bash
# bench/bundle.sh — what the image's bundle saves against tsc's output (issue 33). Compiles the working tree with tsc
# into bench/out/bundle/tsc/, bundles it with scripts/bundle.ts (as the Dockerfile does) into bench/out/bundle/image/,
# checks that each build runs (test/harness/check-build.ts: health, an allowed and a denied request, the identity and policy
# parse workers, proto/ of a middleware service, package.json), then starts each `run --policy policies/default.yaml`
# in interleaved rounds and prints idle VmRSS, RssAnon, RssFile, heap in use and the time to /readyz
# (bench/bundle/measure.mjs). Nothing leaves 127.0.0.1.
#
# Usage: bench/bundle.sh                       (ROUNDS=5; about 9 minutes)
#        ROUNDS=3 MEASURE=0 bench/bundle.sh     (build and check only)
# Environment (all optional):
#   ROUNDS         starts of each build (default 5), one round = each build once, order rotating
#   SAMPLE_AT_S    seconds after the spawn the memory is read, a list (default "18 45": the issue's reading, and one
#                  after V8's memory reducer has run even on a start slowed down by load)
#   CHECK          1 (default) runs test/harness/check-build.ts on each build first; 0 skips it
#   MEASURE        1 (default) measures; 0 only builds (and checks)
#   BOUNDARY_NODE  the node binary that runs the builds (default: node on PATH; the image runs Node 22)
#   MALLOC_ARENA_MAX  default 2 (the image's setting)
# Output: a table on stdout; raw samples in bench/out/bundle-<timestamp>.json. Each build is laid out as the image
# is (<build>/dist/app/main.js, <build>/proto, <build>/package.json).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/bench/out/bundle"
CHECK=${CHECK:-1}
MEASURE=${MEASURE:-1}
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

log() { printf '[bundle %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

# A build directory shaped like the image's /app: package.json (ESM, version) and proto/ beside dist/.
layout() {
  rm -rf "$1" && mkdir -p "$1"
  cp "$ROOT/package.json" "$1/"
  ln -s "$ROOT/proto" "$1/proto"
}

# A private tsc build of the working tree: others' dist/ is left alone.
layout "$OUT/tsc"
cp -r "$ROOT/src" "$ROOT/tsconfig.json" "$OUT/tsc/"
log "tsc into $OUT/tsc/dist"
"$ROOT/node_modules/.bin/tsc" -p "$OUT/tsc/tsconfig.json" >"$OUT/tsc.log" 2>&1 || die "tsc failed (see $OUT/tsc.log)"

layout "$OUT/image"
log "scripts/bundle.ts into $OUT/image/dist"
node --import tsx "$ROOT/scripts/bundle.ts" "$OUT/tsc/dist" "$OUT/image/dist" || die "bundling failed"
for build in tsc image; do
  log "$build: $(find "$OUT/$build/dist" -name '*.js' | wc -l) .js files, $(find "$OUT/$build/dist" -name '*.js' -print0 | du -ch --files0-from=- | tail -1 | cut -f1)"
done

if ((CHECK)); then
  for build in tsc image; do
    log "checking $build"
    (cd "$ROOT" && node --import tsx test/harness/check-build.ts "$OUT/$build/dist") || die "$build does not run (see above)"
  done
fi

if ((MEASURE)); then
  WORK=$(mktemp -d /tmp/boundary-bundle.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  ROOT=$ROOT WORK=$WORK BUILDS="tsc=$OUT/tsc/dist image=$OUT/image/dist" OUT_FILE="$ROOT/bench/out/bundle-$STAMP.json" \
    "${BOUNDARY_NODE:-node}" "$ROOT/bench/bundle/measure.mjs"
fi
