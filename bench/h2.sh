#!/usr/bin/env bash
# bench/h2.sh — h2load against a TLS HTTP/2 origin, direct and through boundary with interception on (transparent
# capture: h2load connects to the synthetic address policy DNS hands out, so every stream is terminated, decided,
# and relayed over boundary's own HTTP/2 session to the origin). Cases and routes are interleaved in every round;
# the table shows medians of RUNS rounds: req/s, p99 request time (from h2load's per-request log) and the ratio.
# Everything stays on 127.0.0.1 and is killed on exit. Needs h2load (nghttp2-client), dig, openssl, node.
#
# Usage: bench/h2.sh                         (defaults: RUNS=5 DURATION=8 WARMUP=2)
#        CASES="c1m100" RUNS=3 bench/h2.sh
# Environment (all optional):
#   RUNS, DURATION (s), WARMUP (s)   rounds, measured seconds per run, unrecorded warm-up per run
#   CASES     subset of: c16m10 (16 connections x 10 streams) c1m100 (one connection, 100 concurrent streams)
#   ROUTES    subset of: direct boundary codec-floor node-floor tls-floor nghttpx (default: all; nghttpx where installed).
#             codec-floor is bench/h2/codec-floor.mjs: boundary's own HTTP/2 code (BOUNDARY_DIST) on both sides, each
#             stream's head read and checked and relayed, and nothing else (no policy, chain, events, metrics, audit),
#             pinned like boundary: what an HTTP/2-inspecting proxy in Node costs at least. node-floor
#             is bench/h2/bare-proxy.mjs: node:http2 on both sides and nothing else (no policy, events, metrics), pinned like
#             boundary: what node:http2 costs. tls-floor is bench/h2/tls-relay.mjs: TLS terminated and re-encrypted, no
#             HTTP/2 parsed at all, pinned like boundary: the least any TLS-intercepting proxy in Node can cost. nghttpx (Debian: nghttp2-proxy) is the peer: nghttp2's own TLS-terminating
#             HTTP/2 proxy, one worker pinned like boundary, re-encrypting to the same origin over HTTP/2.
#   BUILD     1 (default) runs tsc first; 0 uses dist/ as it is.  BOUNDARY_DIST: run boundary from there instead.
#   BOUNDARY_REF  a committed state to compare with (bench/build-ref.sh): a second boundary, route boundary-ref,
#             measured in the same rounds, interleaved (before/after figures for a change). A directory instead of
#             a commit is run as a built dist/ as it is (an uncommitted variant: a copy of dist/ made before an edit).
#   H2LOAD_ARGS  extra h2load arguments for every run, e.g. "--rps=300" (requests per second per connection): a
#             fixed load both builds keep up with, so what each allocates per request is compared in the same conditions.
#   PIN       auto (default) | 0: with 2 cores h2load and the origin share cpu 0 and boundary gets cpu 1. Each run also
#             reports how long the pinned server waited for its core (ms per second): other work on that core.
#   FRESH     1 (default): every proxy (boundary, boundary-ref, the floors, nghttpx) is started anew before each round,
#             so rounds are independent samples: two copies of one build, each process living through every round,
#             measured 20-30 % apart in every round of a run (docs/benchmarks.md#seventh-pass-where-boundarys-cpu-above-the-codec-floor-goes-and-the-second-upstream-session).
#             0: each proxy serves every round (the origin always does).
#   LOG_PIPE  1: each boundary's stdout (its audit log) is a FIFO that cat, pinned with the load, empties into its log
#             file, as a container runtime reads a container's stdout (cat's CPU is not counted as boundary's); default
#             0: the file itself
#   KEEP_TMP  1: keep the temp dir (each boundary's log, h2load output) for inspection; a log holds what was written
#             since its route's last run began (trim_log in bench/boundary-run.sh)
#   BOUNDARY_NODE_FLAGS  extra node flags for boundary, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
#   FLOOR_NODE_FLAGS     the same for the codec-floor, node-floor and tls-floor proxies.
#   HOLD      N: once every route is up, log each one's pid and address and keep everything running N seconds instead
#             of measuring (bench/h2-pair.sh loads two routes at once this way)
#   PROXY_NODE  the node binary boundary and the floor run on (default: node on PATH), e.g. the image's Node 22 from
#               test/harness/image-node.ts's cache: /tmp/boundary-node-22/node_modules/node/bin/node
set -euo pipefail
# shellcheck source=bench/boundary-run.sh
source "$(dirname "${BASH_SOURCE[0]}")/boundary-run.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-5}
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CASES=${CASES:-"c16m10 c1m100"}
BOUNDARY_REF=${BOUNDARY_REF:-}
ROUTES=${ROUTES:-"direct boundary${BOUNDARY_REF:+ boundary-ref} codec-floor node-floor tls-floor$(command -v nghttpx >/dev/null && echo ' nghttpx' || true)"}
BUILD=${BUILD:-1}
PIN=${PIN:-auto}
BOUNDARY_DIST=${BOUNDARY_DIST:-$ROOT/dist}
OUT_DIR=${OUT_DIR:-$ROOT/bench/out}
BOUNDARY_NODE_FLAGS=${BOUNDARY_NODE_FLAGS:-}
FLOOR_NODE_FLAGS=${FLOOR_NODE_FLAGS:-}
PROXY_NODE=${PROXY_NODE:-node}
KEEP_TMP=${KEEP_TMP:-0}
FRESH=${FRESH:-1}
H2LOAD_ARGS=${H2LOAD_ARGS:-}
HOST=origin.bench.test
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

log() { printf '[h2 bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
for t in h2load dig openssl node; do command -v "$t" >/dev/null || die "missing $t (Debian: nghttp2-client dnsutils openssl nodejs)"; done
for v in RUNS DURATION; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done

PIN_LOAD=() PIN_PROXY=()
if [[ $PIN == auto ]] && command -v taskset >/dev/null && (($(nproc) >= 2)); then
  PIN_LOAD=(taskset -c 0) PIN_PROXY=(taskset -c 1)
fi

WORK=$(mktemp -d /tmp/boundary-h2-bench.XXXXXX)
PIDS=()
cleanup() {
  local status=$?
  trap - EXIT
  local p i
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  # boundary drains on SIGTERM (and writes a CPU profile when asked): bounded wait.
  for p in "${PIDS[@]}"; do for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  wait 2>/dev/null || true
  if ((KEEP_TMP)); then log "temp dir kept: $WORK"; else rm -rf "$WORK"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_for() { local i; for ((i = 0; i < 100; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
free_ports() {
  node -e 'const net=require("node:net");const s=Array.from({length:+process.argv[1]},()=>net.createServer());
    Promise.all(s.map((x)=>new Promise((r)=>x.listen(0,"127.0.0.1",()=>r(x.address().port))))).then((p)=>{console.log(p.join(" "));s.forEach((x)=>x.close())})' "$1"
}

if ((BUILD)); then (cd "$ROOT" && npx tsc -p tsconfig.json) || die "tsc failed"; fi

mkdir -p "$WORK/pki" "$OUT_DIR"
(
  cd "$WORK/pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=boundary h2 bench CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout origin.key -out origin.csr -subj "/CN=$HOST" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$HOST" >origin.ext
  openssl x509 -req -in origin.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 2 -extfile origin.ext -out origin.pem 2>/dev/null
) || die "openssl could not make the certificates"
printf '127.0.0.1 %s\n' "$HOST" >"$WORK/hosts"

"${PIN_LOAD[@]}" node "$ROOT/bench/h2/origin.mjs" --ready "$WORK/origin.json" --cert "$WORK/pki/origin.pem" --key "$WORK/pki/origin.key" &
PIDS+=($!)
declare -A SERVER_PID=([direct]=$!)
wait_for test -s "$WORK/origin.json" || die "origin did not start"
ORIGIN_PORT=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1])).port' "$WORK/origin.json")
declare -A PORT=()
# start_floor ROUTE: one of the floor or peer proxies on a port of its own, ready; its pid in SERVER_PID.
start_floor() {
  local route=$1 port
  read -r port < <(free_ports 1)
  case $route in
    node-floor)
      # shellcheck disable=SC2086
      "${PIN_PROXY[@]}" "$PROXY_NODE" $FLOOR_NODE_FLAGS "$ROOT/bench/h2/bare-proxy.mjs" --listen "127.0.0.1:$port" --origin "https://127.0.0.1:$ORIGIN_PORT" \
        --servername "$HOST" --ca "$WORK/pki/ca.pem" --cert "$WORK/pki/origin.pem" --key "$WORK/pki/origin.key" & ;;
    tls-floor)
      # shellcheck disable=SC2086
      "${PIN_PROXY[@]}" "$PROXY_NODE" $FLOOR_NODE_FLAGS "$ROOT/bench/h2/tls-relay.mjs" --listen "127.0.0.1:$port" --origin "127.0.0.1:$ORIGIN_PORT" \
        --servername "$HOST" --ca "$WORK/pki/ca.pem" --cert "$WORK/pki/origin.pem" --key "$WORK/pki/origin.key" & ;;
    codec-floor)
      # boundary's own HTTP/2 code, from the build under test.
      [[ -f $BOUNDARY_DIST/http2/server-session.js ]] || die "no build in $BOUNDARY_DIST for codec-floor (BUILD=1 makes one)"
      # shellcheck disable=SC2086
      "${PIN_PROXY[@]}" "$PROXY_NODE" $FLOOR_NODE_FLAGS "$ROOT/bench/h2/codec-floor.mjs" --dist "$BOUNDARY_DIST" --listen "127.0.0.1:$port" \
        --origin "127.0.0.1:$ORIGIN_PORT" --servername "$HOST" --ca "$WORK/pki/ca.pem" --cert "$WORK/pki/origin.pem" --key "$WORK/pki/origin.key" & ;;
    nghttpx)
      command -v nghttpx >/dev/null || die "missing nghttpx (Debian: nghttp2-proxy)"
      # No config file, no OCSP fetch, no access log: a bare TLS-terminating HTTP/2 relay with backend verification on.
      "${PIN_PROXY[@]}" nghttpx --conf=/dev/null --no-ocsp --workers=1 --frontend="127.0.0.1,$port" \
        --backend="127.0.0.1,$ORIGIN_PORT;;proto=h2;tls;sni=$HOST" --cacert="$WORK/pki/ca.pem" --errorlog-file="$WORK/nghttpx.err" \
        "$WORK/pki/origin.key" "$WORK/pki/origin.pem" & ;;
  esac
  PIDS+=($!)
  SERVER_PID[$route]=$!
  PORT[$route]=$port
  wait_for curl -sfk --http2 --connect-to "$HOST:$ORIGIN_PORT:127.0.0.1:$port" "https://$HOST:$ORIGIN_PORT/" || die "$route did not start"
}
for route in node-floor tls-floor codec-floor nghttpx; do [[ " $ROUTES " == *" $route "* ]] && start_floor "$route"; done

cat >"$WORK/policy.yaml" <<POLICY
version: 1
network_policies:
  bench:
    endpoints:
      - host: $HOST
        port: $ORIGIN_PORT
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
POLICY
declare -A DNS_PORT=()
# start_boundary ROUTE DIST CIDR: one boundary on its own ports and synthetic range, ready and asked for its address.
start_boundary() {
  local route=$1 dist=$2 cidr=$3 port admin dns sink
  read -r port admin dns sink < <(free_ports 4)
  # shellcheck disable=SC2086
  (cd "$ROOT" && exec_logged "$WORK/$route.log" "${PIN_PROXY[@]}" "$PROXY_NODE" $BOUNDARY_NODE_FLAGS "$(entry_of "$dist")" run --policy "$WORK/policy.yaml" \
    --proxy-listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" --dns-listen "127.0.0.1:$dns" \
    --synthetic-cidr "$cidr" --hosts "$WORK/hosts" --upstream-dns "127.0.0.1:$sink" --upstream-ca "$WORK/pki/ca.pem" \
    --unsafe-allow-loopback-upstream --state-dir "$WORK/state-$route" --log-format json) 2>"$WORK/$route.err" &
  PIDS+=($!)
  SERVER_PID[$route]=$!
  DNS_PORT[$route]=$dns
  wait_for curl -sf "http://127.0.0.1:$admin/readyz" || die "$route not ready: $(tail -3 "$WORK/$route.err")"
  local synthetic
  synthetic=$(dig @127.0.0.1 -p "$dns" +short "$HOST" A)
  [[ -n $synthetic ]] || die "policy DNS gave no synthetic address for $HOST"
  log "$route ($dist): capture $synthetic:$ORIGIN_PORT (interception on)"
}
start_boundary boundary "$BOUNDARY_DIST" 127.78.0.0/16
if [[ -n $BOUNDARY_REF ]]; then
  if [[ -d $BOUNDARY_REF ]]; then REF_DIST=$BOUNDARY_REF; else REF_DIST=$("$ROOT/bench/build-ref.sh" "$BOUNDARY_REF" "$WORK/tsc.log"); fi
  start_boundary boundary-ref "$REF_DIST" 127.79.0.0/16
fi
log "origin :$ORIGIN_PORT, rounds=$RUNS duration=${DURATION}s"

declare -A C_ARGS=([c16m10]="-c 16 -m 10" [c1m100]="-c 1 -m 100")
RESULTS="$WORK/results.tsv"
: >"$RESULTS"
# CPU ticks (user + system) a process used so far.
# With its children: nghttpx serves from a worker process it forks.
cpu_ticks() {
  local f p sum=0
  for p in "$1" $(pgrep -P "$1"); do
    read -r -a f < <(sed 's/.*) //' "/proc/$p/stat") && sum=$((sum + f[11] + f[12]))
  done
  echo "$sum"
}
CLK_TCK=$(getconf CLK_TCK)
# Nanoseconds the server's threads (and its children's) spent runnable but waiting for a CPU (/proc/.../schedstat,
# second field). On a shared host another process pinned to the same core makes a fixed-rate run fall short of its
# rate with a long p99 while the server's own CPU per request stays low: this tells such a starved round from a stall.
run_queue_ns() {
  local p t w sum=0
  for p in "$1" $(pgrep -P "$1"); do
    for t in /proc/"$p"/task/*/schedstat; do read -r _ w _ 2>/dev/null <"$t" && sum=$((sum + w)); done
  done
  echo "$sum"
}
# One h2load run; prints "req/s p99_ms failed cpu_us_per_request wait_ms_per_s" (CPU of the server under test: the
# origin for direct, boundary or the floor proxy otherwise; robust to other load on the host, unlike req/s; and the
# time it waited for its core, per second of the run).
measure() {
  local route=$1 kase=$2 connect
  case $route in
    direct) connect="127.0.0.1:$ORIGIN_PORT" ;;
    node-floor | tls-floor | codec-floor | nghttpx) connect="127.0.0.1:${PORT[$route]}" ;;
    # A synthetic mapping lives as long as its DNS answer (30 s): ask again, as a workload would, before each run.
    *) connect="$(dig @127.0.0.1 -p "${DNS_PORT[$route]}" +short "$HOST" A):$ORIGIN_PORT" ;;
  esac
  local pid=${SERVER_PID[$route]} before waited started
  trim_log "$WORK/$route.log" >/dev/null
  before=$(cpu_ticks "$pid") waited=$(run_queue_ns "$pid") started=$(date +%s%N)
  rm -f "$WORK/req.log"
  # shellcheck disable=SC2086
  "${PIN_LOAD[@]}" h2load ${C_ARGS[$kase]} $H2LOAD_ARGS -t 1 -D "$DURATION" --warm-up-time="$WARMUP" --connect-to="$connect" \
    --log-file="$WORK/req.log" "https://$HOST:$ORIGIN_PORT/" >"$WORK/h2load.out" 2>&1 || true
  cat "$WORK/h2load.out" >>"$WORK/h2load-all.out"
  local rps ok failed p99
  rps=$(sed -nE 's/^finished in .*, ([0-9.]+) req\/s.*/\1/p' "$WORK/h2load.out")
  read -r ok failed < <(sed -nE 's/^requests: .* ([0-9]+) succeeded, ([0-9]+) failed.*/\1 \2/p' "$WORK/h2load.out")
  p99=$(awk '{print $3}' "$WORK/req.log" | sort -n | awk '{v[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.2f", v[i]/1000}')
  local ticks=$(($(cpu_ticks "$pid") - before)) finished queued
  queued=$(awk -v w="$(($(run_queue_ns "$pid") - waited))" -v t="$(($(date +%s%N) - started))" 'BEGIN { printf "%.0f", (t > 0 ? w / t * 1000 : 0) }')
  finished=$(sed -nE 's/^requests: .* ([0-9]+) done,.*/\1/p' "$WORK/h2load.out")
  # Warm-up requests used CPU too: per request done over the whole run.
  echo "${rps:-0} ${p99:-0} ${failed:-0} $(awk -v t="$ticks" -v hz="$CLK_TCK" -v n="${finished:-0}" -v w="$WARMUP" -v d="$DURATION" -v r="${rps:-0}" 'BEGIN { all = n + r * w; printf "%.1f", (all > 0 ? t / hz * 1e6 / all : 0) }') $queued"
}
# stop_route ROUTE: SIGTERM, then a bounded wait until it has gone (boundary drains, and may write a profile).
stop_route() {
  local pid=${SERVER_PID[$1]} i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
start_route() {
  case $1 in
    boundary) start_boundary boundary "$BOUNDARY_DIST" 127.78.0.0/16 ;;
    boundary-ref) start_boundary boundary-ref "$REF_DIST" 127.79.0.0/16 ;;
    *) start_floor "$1" ;;
  esac
}
read -r -a ROUTE_LIST <<<"$ROUTES"
if ((${HOLD:-0} > 0)); then
  for route in "${ROUTE_LIST[@]}"; do
    [[ $route == direct ]] && continue
    log "hold $route pid=${SERVER_PID[$route]} port=${PORT[$route]:-} dns=${DNS_PORT[$route]:-}"
  done
  log "holding ${HOLD}s: origin $ORIGIN_PORT, dir $WORK"
  # In the background and among PIDS, so that a TERM runs the cleanup at once and the cleanup ends the sleep.
  sleep "$HOLD" &
  PIDS+=($!)
  wait $!
  exit 0
fi
for ((r = 1; r <= RUNS; r++)); do
  if ((FRESH && r > 1)); then
    # Each round's proxies are new processes: a process's own state (its heap's sizing, where its code landed) leans
    # every round it serves the same way, so rounds of long-lived processes are not independent samples.
    for route in "${ROUTE_LIST[@]}"; do
      [[ $route == direct ]] && continue
      stop_route "$route"
      start_route "$route"
    done
  fi
  # Every other round runs the routes in reverse, so no route always follows the same one (boundary-ref included).
  order=("${ROUTE_LIST[@]}")
  if ((r % 2 == 0)); then for ((i = ${#ROUTE_LIST[@]} - 1, j = 0; i >= 0; i--, j++)); do order[j]=${ROUTE_LIST[i]}; done; fi
  for kase in $CASES; do
    for route in "${order[@]}"; do
      read -r rps p99 failed cpu queued < <(measure "$route" "$kase")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$kase" "$route" "$rps" "$p99" "$failed" "$cpu" "$queued" >>"$RESULTS"
      log "round $r $kase $route: $rps req/s, p99 $p99 ms, $failed failed, $cpu µs CPU/request, waited for a CPU $queued ms/s"
    done
  done
done

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
cp "$RESULTS" "$OUT_DIR/h2-$STAMP.tsv"
node - "$RESULTS" "$RUNS" "$DURATION" <<'REPORT'
const rows = require('node:fs').readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => l.split('\t'));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const cases = [...new Set(rows.map((r) => r[1]))];
console.log(`\nh2load, medians of ${process.argv[3]} interleaved rounds x ${process.argv[4]} s. req/s ratio: route / direct;`);
console.log('cpu ratio: the origin\'s CPU per request over the route\'s (one core\'s capacity ratio); failed counts requests in flight when the run ended;');
console.log('wait: ms per second of the run the server was runnable but not running (another process on its core).\n');
console.log('| case | route | req/s | p99 ms | failed | cpu µs/req | wait ms/s | req/s ratio | cpu ratio | per-round req/s ratios |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---|');
for (const c of cases) {
  const of = (route, i) => rows.filter((r) => r[1] === c && r[2] === route).map((r) => Number(r[i]));
  const d = of('direct', 3);
  const dCpu = median(of('direct', 6));
  for (const route of [...new Set(rows.map((r) => r[2]))]) {
    const own = of(route, 3);
    const rps = median(own), p99 = median(of(route, 4)), failed = of(route, 5).reduce((a, x) => a + x, 0);
    const vs = route !== 'direct' && d.length > 0;
    const ratio = vs ? `${(rps / median(d)).toFixed(2)}x` : '';
    const per = vs ? own.map((x, i) => (x / d[i]).toFixed(2)).join(' ') : '';
    const cpu = median(of(route, 6));
    const cpuRatio = vs ? `${(dCpu / cpu).toFixed(2)}x` : '';
    console.log(`| ${c} | ${route} | ${rps.toFixed(0)} | ${p99.toFixed(2)} | ${failed} | ${cpu.toFixed(1)} | ${median(of(route, 7)).toFixed(0)} | ${ratio} | ${cpuRatio} | ${per} |`);
  }
}
// BOUNDARY_REF: the change against the reference, round by round (both ran in the same rounds, one after the other).
for (const c of cases) {
  const of = (route, i) => rows.filter((r) => r[1] === c && r[2] === route).map((r) => Number(r[i]));
  const ref = of('boundary-ref', 6);
  if (ref.length === 0) continue;
  const cpu = of('boundary', 6), rps = of('boundary', 3), refRps = of('boundary-ref', 3);
  const change = (a, b) => `${((median(a) / median(b) - 1) * 100).toFixed(1)}%`;
  console.log(`\n${c}: boundary vs boundary-ref: cpu µs/req ${median(cpu).toFixed(1)} vs ${median(ref).toFixed(1)} (${change(cpu, ref)}; per round ${cpu.map((x, i) => (x / ref[i]).toFixed(2)).join(' ')}),` +
    ` req/s ${median(rps).toFixed(0)} vs ${median(refRps).toFixed(0)} (${change(rps, refRps)}; per round ${rps.map((x, i) => (x / refRps[i]).toFixed(2)).join(' ')})`);
}
// codec-floor: what boundary costs above its own HTTP/2 code and TLS, round by round.
for (const c of cases) {
  const of = (route, i) => rows.filter((r) => r[1] === c && r[2] === route).map((r) => Number(r[i]));
  const floor = of('codec-floor', 6);
  if (floor.length === 0) continue;
  for (const route of ['boundary', 'boundary-ref']) {
    const cpu = of(route, 6);
    if (cpu.length === 0) continue;
    const per = cpu.map((x, i) => x / floor[i]);
    console.log(`\n${c}: ${route} / codec-floor, cpu µs/req: ${median(cpu).toFixed(1)} / ${median(floor).toFixed(1)}; per round ${per.map((x) => x.toFixed(2)).join(' ')} (median ${median(per).toFixed(2)})`);
  }
}
REPORT
log "raw results: $OUT_DIR/h2-$STAMP.tsv"
