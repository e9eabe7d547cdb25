#!/usr/bin/env bash
# bench/soak.sh — the long form of the issue-15 soak (test/soak/soak.test.ts, which `npm test` runs short): one
# real `boundary run` child, steady allowed traffic from curl, node:http, a WebSocket and policy DNS, an idle
# baseline, then SOAK_SECONDS of the hostile mix (zero-byte sockets, slowloris, huge heads, endless chunked bodies,
# idle and denied tunnels, WebSocket floods, a dnsperf flood, policy reloads, credential rotation) at the same time,
# and SIGTERM at the end. Prints the figures table; the full report (RSS series included) lands in
# bench/out/soak-<timestamp>.json and the TAP log beside it. Loopback only; the test's own teardown ends every
# process it started, on failure too.
#
# Usage: bench/soak.sh                    (SOAK_SECONDS=600: about 13 minutes with the 120 s baseline)
#        SOAK_SECONDS=120 bench/soak.sh   (quicker; below 300 s the p99 bound is the short form's, not 2x)
# Needs curl and dnsperf on PATH. Exit status is the test's: 0 when every figure is within its bound.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOAK_SECONDS=${SOAK_SECONDS:-600}
OUT_DIR=${OUT_DIR:-$ROOT/bench/out}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
REPORT="$OUT_DIR/soak-$STAMP.json"
LOG="$OUT_DIR/soak-$STAMP.tap"

# Nothing here may go through (or to) a proxy from the environment.
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in curl dnsperf; do
  command -v "$tool" >/dev/null || { log "error: $tool is not on PATH"; exit 1; }
done
mkdir -p "$OUT_DIR"
log "hostile phase ${SOAK_SECONDS} s; report $REPORT"

status=0
# The test sets its own timeout from SOAK_SECONDS; --test-timeout is the outer bound (phases plus 15 minutes).
(cd "$ROOT" && SOAK_SECONDS="$SOAK_SECONDS" SOAK_REPORT="$REPORT" node --import tsx --test \
  --test-timeout=$(((SOAK_SECONDS * 2 + 900) * 1000)) --test-reporter=tap test/soak/soak.test.ts) >"$LOG" 2>&1 || status=$?

# The figures are the test's diagnostics: indented `# ` lines before node:test's own summary.
sed -n 's/^ \{4,\}# //p' "$LOG"
if [ "$status" -ne 0 ]; then
  log "soak failed (exit $status); the assertion is in $LOG"
  grep -m 5 -E "^ +error: " "$LOG" >&2 || true
fi
exit "$status"
