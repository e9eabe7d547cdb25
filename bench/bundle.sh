#!/usr/bin/env bash
# bench/bundle.sh — what an esbuild bundle of boundary would save of idle memory (issue 33). Compiles the working
# tree with tsc into bench/out/bundle/tsc/, bundles its dist/app/main.js with esbuild into bench/out/bundle/plain/
# (and minified into bench/out/bundle/min/), checks that each build runs (bench/bundle/check.ts: health, an allowed
# and a denied request, the identity and policy parse workers, proto/ of a middleware service, package.json), then
# starts each `run --policy policies/default.yaml` in interleaved rounds and prints idle VmRSS, RssAnon, RssFile and
# heap in use (bench/bundle/measure.mjs). Nothing leaves 127.0.0.1.
#
# Usage: bench/bundle.sh                       (ROUNDS=5; about 13 minutes)
#        ROUNDS=3 MEASURE=0 bench/bundle.sh     (build and check only)
# Environment (all optional):
#   ROUNDS         starts of each build (default 5), one round = each build once, order rotating
#   SAMPLE_AT_S    seconds after the spawn the memory is read, a list (default "18 45": the issue's reading, and one
#                  after V8's memory reducer has run even on a start slowed down by load)
#   CHECK          1 (default) runs bench/bundle/check.ts on each build first; 0 skips it
#   MEASURE        1 (default) measures; 0 only builds (and checks)
#   MALLOC_ARENA_MAX  default 2 (the image's setting)
# Output: a table on stdout; raw samples in bench/out/bundle-<timestamp>.json. Each build is laid out as the image
# is (<build>/dist/app/main.js, <build>/proto, <build>/package.json), so BOUNDARY_DIST=bench/out/bundle/min/dist
# runs the minified bundle in bench/memory.sh and bench/proxy.sh.
#
# How the bundle is made: entry points dist/app/main.js and the two worker files (policy/parse-worker.js,
# identity/proc-worker.js), --splitting so each dynamic import() stays a lazily loaded chunk, --packages=external so
# dependencies load from node_modules as before, --entry-names=[name] so main.js, the workers and every chunk sit
# in one directory: the workers are found as ./<name>.js next to the code that starts them, and ../../proto and
# ../../package.json (src/middleware/proto.ts, src/app/version.ts) resolve from dist/app/ as they do from dist/<folder>/.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/bench/out/bundle"
CHECK=${CHECK:-1}
MEASURE=${MEASURE:-1}
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
ESBUILD="$ROOT/node_modules/.bin/esbuild"

log() { printf '[bundle %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
[[ -x $ESBUILD ]] || die "no $ESBUILD (npm install)"
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

for variant in plain min; do
  layout "$OUT/$variant"
  flags=()
  [[ $variant == min ]] && flags=(--minify)
  log "esbuild ${flags[*]} into $OUT/$variant/dist/app"
  (cd "$OUT/tsc" && "$ESBUILD" dist/app/main.js dist/policy/parse-worker.js dist/identity/proc-worker.js --bundle --platform=node \
    --format=esm --splitting --packages=external --outdir="$OUT/$variant/dist/app" --entry-names='[name]' --chunk-names='chunk-[hash]' \
    --metafile="$OUT/$variant/meta.json" --log-level=warning "${flags[@]}")
done
for build in tsc plain min; do
  log "$build: $(find "$OUT/$build/dist" -name '*.js' | wc -l) .js files, $(find "$OUT/$build/dist" -name '*.js' -print0 | du -ch --files0-from=- | tail -1 | cut -f1)"
done

if ((CHECK)); then
  for build in tsc plain min; do
    log "checking $build"
    (cd "$ROOT" && node --import tsx bench/bundle/check.ts "$OUT/$build/dist") || die "$build does not run (see above)"
  done
fi

if ((MEASURE)); then
  WORK=$(mktemp -d /tmp/boundary-bundle.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  ROOT=$ROOT WORK=$WORK BUILDS="tsc=$OUT/tsc/dist plain=$OUT/plain/dist min=$OUT/min/dist" OUT_FILE="$ROOT/bench/out/bundle-$STAMP.json" \
    node "$ROOT/bench/bundle/measure.mjs"
fi
