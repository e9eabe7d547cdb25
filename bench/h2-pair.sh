#!/usr/bin/env bash
# bench/h2-pair.sh — HTTP/2 CPU per request of two routes of bench/h2.sh measured at the same time, as
# bench/proxy-pair.sh does for forward HTTP: h2.sh starts the origin and the two routes (pinned to the proxy core) and
# holds; each window then runs one h2load against each route at once (both on the load core, with the origin) and
# reads each route's CPU time over that window. Host noise falls on both alike, where bench/h2.sh's rounds, one route
# after the other, see whatever the host did in each (docs/benchmarks.md#ninth-pass-both-routes-loaded-at-once). Each
# set starts both routes anew, so that one process's own lean (its heap's sizing, where its code landed) is not every
# window's.
# Loopback only; everything stops at the end.
#
# Usage: BOUNDARY_REF=<sha|dist dir> bench/h2-pair.sh [WINDOWS] [SECONDS] [SETS]   (defaults 5 windows of 5 s, 2 sets)
#        PAIR="boundary codec-floor" bench/h2-pair.sh     boundary against its codec floor (no BOUNDARY_REF needed)
# Environment: PAIR (two routes of bench/h2.sh other than direct, default "boundary boundary-ref"), CASE (c16m10, the default, or
# c1m100), IDLE (seconds both sit idle after each start before any load, default 0: a sidecar's usual life before its
# traffic), WARM (seconds of unmeasured load on both after that, default 10; 0: none), BUILD (0, the default: dist/ as it is),
# BOUNDARY_DIST, PROXY_NODE, LOG_PIPE, as bench/h2.sh takes them. PERF=<dir>: both routes run with --perf-basic-prof, the first set's
# windows are recorded with `perf record -g` into <dir>/perf.data, and bench/perf-split.mjs's tables of where each
# route's CPU per request went (kernel, TLS, GC and node's C++ included) are printed at the end and kept in <dir>/split.md.
# Prints per window each route's CPU µs per request and requests, and first / second; then the median ratio.
set -euo pipefail

WINDOWS=${1:-5}
SECS=${2:-5}
SETS=${3:-2}
WARM=${WARM:-10}
IDLE=${IDLE:-0}
PAIR=${PAIR:-"boundary boundary-ref"}
PERF=${PERF:-}
V8_LOGS=
CASE=${CASE:-c16m10}
read -r A B <<<"$PAIR"
[[ -n ${B:-} ]] || { echo "PAIR must name two routes" >&2; exit 1; }
[[ $PAIR != *boundary-ref* || -n ${BOUNDARY_REF:-} ]] || { echo "BOUNDARY_REF is required for boundary-ref" >&2; exit 1; }
case $CASE in
  c16m10) LOAD=(-c 16 -m 10) ;;
  c1m100) LOAD=(-c 1 -m 100) ;;
  *) echo "CASE is c16m10 or c1m100" >&2; exit 1 ;;
esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/boundary-run.sh
source "$HERE/boundary-run.sh"
if [[ -n $PERF ]]; then
  command -v perf >/dev/null || { echo "PERF needs perf on PATH (Debian: linux-perf)" >&2; exit 1; }
  mkdir -p "$PERF"
  # --perf-basic-prof also opens V8's log, by default in the working directory: it goes to a folder removed at exit.
  V8_LOGS=$(mktemp -d)
  PROF_FLAGS="--perf-basic-prof --logfile=$V8_LOGS/v8-%p.log"
  export BOUNDARY_NODE_FLAGS="${BOUNDARY_NODE_FLAGS:-} $PROF_FLAGS" FLOOR_NODE_FLAGS="${FLOOR_NODE_FLAGS:-} $PROF_FLAGS"
fi
HOST=origin.bench.test
LOG=$(mktemp)
RATIOS=$(mktemp)
BENCH=
RECORDER=
MAPS=()
# perf writes its file out on SIGINT.
stop_recorder() {
  if [[ -n $RECORDER ]]; then
    kill -INT "$RECORDER" 2>/dev/null || true
    wait "$RECORDER" 2>/dev/null || true
  fi
  RECORDER=
}
stop() {
  stop_recorder
  if [[ -n $BENCH ]]; then
    kill "$BENCH" 2>/dev/null || true
    wait "$BENCH" 2>/dev/null || true
  fi
  BENCH=
}
# The perf maps --perf-basic-prof leaves in /tmp go once the tables are made (or on any exit).
trap 'stop; rm -f "$LOG" "$LOG".* "$RATIOS" "${MAPS[@]}"; rm -rf ${V8_LOGS:+"$V8_LOGS"}' EXIT

field() { sed -n "s/.*hold $1 .*$2=\\([0-9]*\\).*/\\1/p" "$LOG" | tail -1; }
# CPU ticks (user + system) of a process and its children so far: nghttpx serves from a worker it forks.
ticks() {
  local f p sum=0
  for p in "$1" $(pgrep -P "$1"); do read -r -a f < <(sed 's/.*) //' "/proc/$p/stat") && sum=$((sum + f[11] + f[12])); done
  echo "$sum"
}
# Where h2load connects for a route: a floor's own port, or the synthetic address boundary's policy DNS hands out
# (asked before each window: a mapping lives as long as its answer).
target() {
  local port dns
  port=$(field "$1" port) dns=$(field "$1" dns)
  if [[ -n $dns ]]; then echo "$(dig @127.0.0.1 -p "$dns" +short "$HOST" A):$ORIGIN"; else echo "127.0.0.1:$port"; fi
}
# Requests done by one h2load run of $2 s against $1 (load core 0, as bench/h2.sh pins it).
load() {
  taskset -c 0 h2load "${LOAD[@]}" -t 1 -D "$2" --connect-to="$1" "https://$HOST:$ORIGIN/" 2>&1 |
    sed -nE 's/^requests: .* ([0-9]+) done,.*/\1/p'
}
hz=$(getconf CLK_TCK)
for set in $(seq "$SETS"); do
  : >"$LOG"
  # h2.sh starts boundary-ref whenever BOUNDARY_REF is set: only when the pair names it.
  REF=
  [[ $PAIR == *boundary-ref* ]] && REF=$BOUNDARY_REF
  BUILD=${BUILD:-0} RUNS=1 CASES="$CASE" ROUTES="$PAIR" BOUNDARY_REF="$REF" HOLD=100000 "$HERE/h2.sh" >"$LOG" 2>&1 &
  BENCH=$!
  for _ in $(seq 180); do grep -q holding "$LOG" && break; kill -0 "$BENCH" 2>/dev/null || break; sleep 1; done
  grep -q holding "$LOG" || { cat "$LOG"; exit 1; }
  ORIGIN=$(sed -n 's/.*holding [0-9]*s: origin \([0-9]*\),.*/\1/p' "$LOG")
  WORK=$(sed -n 's/.*holding [0-9]*s: origin [0-9]*, dir \(.*\)/\1/p' "$LOG")
  pa=$(field "$A" pid) pb=$(field "$B" pid)
  sleep "$IDLE"
  # Warm-up: the first seconds of a new process cost more (code not yet optimised, heap still growing).
  if ((WARM > 0)); then
    load "$(target "$A")" "$WARM" >/dev/null &
    ja=$!
    load "$(target "$B")" "$WARM" >/dev/null &
    wait "$ja" $!
  fi
  if [[ -n $PERF && $set == 1 ]]; then
    MAPS=("/tmp/perf-$pa.map" "/tmp/perf-$pb.map")
    perf record -g -F 999 -p "$pa,$pb" -o "$PERF/perf.data" >"$PERF/record.log" 2>&1 &
    RECORDER=$!
  fi
  for w in $(seq "$WINDOWS"); do
    for route in "$A" "$B"; do trim_log "$WORK/$route.log" >/dev/null; done
    ta=$(target "$A") tb=$(target "$B")
    a0=$(ticks "$pa") b0=$(ticks "$pb")
    load "$ta" "$SECS" >"$LOG.a" &
    ja=$!
    load "$tb" "$SECS" >"$LOG.b" &
    wait "$ja" $!
    a1=$(ticks "$pa") b1=$(ticks "$pb")
    awk -v s="$set" -v w="$w" -v da=$((a1 - a0)) -v db=$((b1 - b0)) -v ra="$(cat "$LOG.a")" -v rb="$(cat "$LOG.b")" -v hz="$hz" \
      -v A="$A" -v B="$B" 'BEGIN {
      a = da * 1e6 / hz / ra; b = db * 1e6 / hz / rb
      printf "set %d window %d: %s %.1f µs/req (%d) %s %.1f (%d) ratio %.3f\n", s, w, A, a, ra, B, b, rb, a / b }' | tee -a "$RATIOS"
  done
  if [[ -n $RECORDER ]]; then
    stop_recorder
    # Each route's CPU per request over the recorded windows, for the tables' scale.
    median() { sed -n "s/^set 1 window .*: $A \([0-9.]*\) µs\/req ([0-9]*) $B \([0-9.]*\) .*/\\$1/p" "$RATIOS" | sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
    node "$HERE/perf-split.mjs" "$PERF/perf.data" "$pa=$A:$(median 1)" "$pb=$B:$(median 2)" | tee "$PERF/split.md"
    rm -f "${MAPS[@]}"
  fi
  stop
done
sed -n 's/.* ratio //p' "$RATIOS" | sort -n | awk -v A="$A" -v B="$B" -v c="$CASE" '{ v[NR] = $1 } END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "%s: %s / %s, CPU per request: median %.3f over %d windows (%.3f-%.3f)\n", c, A, B, m, NR, v[1], v[NR] }'
