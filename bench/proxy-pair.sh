#!/usr/bin/env bash
# bench/proxy-pair.sh — forward HTTP CPU per request of two boundary builds measured at the same time: bench/proxy.sh
# starts the origin, `boundary` (the working tree's dist/, or BOUNDARY_DIST) and `boundary-ref` (BOUNDARY_REF's build),
# both pinned to the proxy core, and holds; then each window runs one wrk against each of them at once (both on the
# load core) and reads each one's CPU time over that window. Host noise then falls on both builds alike, which the
# interleaved rounds of bench/proxy.sh cannot promise on a shared host. Loopback only; everything stops at the end.
#
# Usage: BOUNDARY_REF=<sha> bench/proxy-pair.sh [WINDOWS] [SECONDS]     (defaults 10 windows of 5 s)
#        BOUNDARY_DIST=bench/out/build-<sha>/dist BOUNDARY_REF=<sha> bench/proxy-pair.sh   (two commits)
#        BOUNDARY_REF=$(node bench/parts-off.mjs event) bench/proxy-pair.sh   (a built directory as the ref: what the
#        decision event costs)
# An A/A check: BOUNDARY_DIST set to BOUNDARY_REF's own build (ratios about 1.00).
# PAIR_HOST=denied.bench.test: every request is one the bench's policy denies (403 and a denial event), instead of
# an allowed GET to the origin.
# IDLE=N: both sit idle N seconds after start before any load (a sidecar's usual life before its traffic; default 0).
# Prints per window: each build's CPU µs per request and requests, and boundary / ref; then the median ratio.
set -euo pipefail

WINDOWS=${1:-10}
PAIR_HOST=${PAIR_HOST:-origin.bench.test}
SECS=${2:-5}
: "${BOUNDARY_REF:?BOUNDARY_REF is required}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/boundary-run.sh
source "$HERE/boundary-run.sh"
LOG=$(mktemp)
BUILD=${BUILD:-0} RUNS=1 DURATION=1 WARMUP=0 CASES=http PROXIES="boundary boundary-ref" HOLD=100000 "$HERE/proxy.sh" >"$LOG" 2>&1 &
BENCH=$!
stop() {
  local s
  s=$(pgrep -P "$BENCH" -x sleep || true)
  kill "$BENCH" 2>/dev/null || true
  [[ -n $s ]] && kill "$s" 2>/dev/null
  wait "$BENCH" 2>/dev/null || true
  rm -f "$LOG" "$LOG.a" "$LOG.b" "$LOG.r"
}
trap stop EXIT
for _ in $(seq 180); do grep -q holding "$LOG" && break; sleep 1; done
grep -q holding "$LOG" || { cat "$LOG"; exit 1; }
origin=$(sed -n 's/.*origin http=\([0-9]*\),.*/\1/p' "$LOG" | head -1)
dir=$(sed -n 's/.* dir \(\/tmp\/boundary-bench[^ ;]*\).*/\1/p' "$LOG" | head -1)
pid_of() { pgrep -f -- "--state-dir $dir/$1/state" | tail -1; }
port_of() { tr '\0' ' ' <"/proc/$1/cmdline" | sed -n 's/.*--proxy-listen 127.0.0.1:\([0-9]*\).*/\1/p'; }
pa=$(pid_of boundary) pb=$(pid_of boundary-ref)
porta=$(port_of "$pa") portb=$(port_of "$pb")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Requests served by one wrk run of $2 s through the proxy on port $1 (load core 0, as bench/proxy.sh pins it).
load() {
  BENCH_PATH="http://$PAIR_HOST:$origin/" BENCH_HOST="$PAIR_HOST:$origin" taskset -c 0 \
    wrk -t1 -c32 -d"$2s" --timeout 5s -s "$HERE/proxy/absolute.lua" "http://127.0.0.1:$1/" 2>&1 |
    sed -n 's/^WRKJSON {"requests":\([0-9]*\),.*/\1/p'
}
sleep "${IDLE:-0}"
load "$porta" 3 >/dev/null & load "$portb" 3 >/dev/null & wait %2 %3
hz=$(getconf CLK_TCK)
for w in $(seq "$WINDOWS"); do
  for build in boundary boundary-ref; do trim_log "$dir/$build/boundary.log" >/dev/null; done
  a0=$(ticks "$pa") b0=$(ticks "$pb")
  load "$porta" "$SECS" >"$LOG.a" & load "$portb" "$SECS" >"$LOG.b" & wait %2 %3
  a1=$(ticks "$pa") b1=$(ticks "$pb")
  awk -v w="$w" -v da=$((a1 - a0)) -v db=$((b1 - b0)) -v ra="$(cat "$LOG.a")" -v rb="$(cat "$LOG.b")" -v hz="$hz" 'BEGIN {
    a = da * 1e6 / hz / ra; b = db * 1e6 / hz / rb
    printf "window %d: boundary %.1f µs/req (%d) ref %.1f (%d) ratio %.3f\n", w, a, ra, b, rb, a / b }' | tee -a "$LOG.r"
done
sed -n 's/.* ratio //p' "$LOG.r" | sort -n | awk '{ v[NR] = $1 } END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "boundary / boundary-ref, CPU per request: median %.3f over %d windows (%.3f-%.3f)\n", m, NR, v[1], v[NR] }'
