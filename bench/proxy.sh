#!/usr/bin/env bash
# bench/proxy.sh — one bounded, loopback-only run that compares boundary's proxy with direct access, tinyproxy
# and squid: (a) wrk direct to a local origin, (b) wrk through boundary's forward proxy (absolute-form),
# (c) the same through tinyproxy and squid, (d) CONNECT+TLS with a new tunnel per request and with reused
# tunnels, and on request (e) a large answer, with and without a credential bound. Each case runs RUNS times
# after a warm-up; the table shows medians. Raw results land in bench/out/proxy-<timestamp>.json. Everything
# started here is killed on exit; nothing leaves 127.0.0.1.
#
# Usage: bench/proxy.sh                      (defaults: RUNS=5 DURATION=10 WARMUP=3; about 15 minutes)
#        RUNS=3 DURATION=5 bench/proxy.sh     (quicker)
#        CASES="http" PROXIES="boundary squid" bench/proxy.sh
# Environment (all optional):
#   RUNS, DURATION (s), WARMUP (s)   repetitions per case, measured seconds per run, unrecorded warm-up
#             before the first run of every pair
#   ROUND_WARMUP (s)  unrecorded load before each later run too (default 1): a proxy sits idle while the others
#             are measured, and node's JIT-compiled code cools meanwhile (a sidecar under steady load stays warm)
#   CONNS, WRK_THREADS                wrk connections / threads (default 32 / 1)
#   CONCURRENCY                       in-flight requests of the CONNECT client (default 32)
#   CASES     subset of: http http-l7 tls-new tls-reuse large large-cred   (default: the first four)
#             large = GET of a LARGE_BYTES answer through the forward proxy (direct, boundary, tinyproxy, squid);
#             large-cred = the same on an endpoint a credential is bound to (boundary only), so boundary scans
#             the answer for echoed secrets (docs/credentials.md#echoed-secrets); `large` must not pay for it
#   LARGE_BYTES  size of the large answer (default 1048576)
#   PROXIES   subset of: direct boundary boundary-l7 boundary-nometrics node-floor node-floor-raw node-floor-llhttp
#             boundary-ref boundary-ref-l7 tinyproxy squid (default: all but the ref rows). boundary-ref(-l7) =
#             BOUNDARY_REF's build with the same policy and flags as boundary(-l7), pinned like it (see BOUNDARY_REF). node-floor = bench/proxy/bare-forward.mjs, a bare node:http forward
#             proxy (node:http's keep-alive client upstream; no policy, events or metrics): what a plain Node proxy
#             costs; node-floor-raw = the same server with kept-alive raw sockets upstream: the least a proxy on
#             node:http's server can cost; node-floor-llhttp = raw sockets upstream and llhttp driven directly on
#             the workload sockets (no node:http server): the least a Node proxy with node's parser can cost.
#             http case only.
#             boundary-nometrics = the same build and policy in a second process started through
#             bench/proxy/boundary-metrics-off.mjs (no-op metric recorders); http case only. Its row and the
#             "metrics on/off" line show what recording metrics costs (medians of the same interleaved rounds);
#             with it, the boundary row starts through the same entry with metrics on (the two differ only there).
#             boundary-l7 = boundary with an L7 endpoint (protocol: rest, access: full): per-request L7
#             decisions on forward HTTP, TLS interception on CONNECT. `boundary` = plain L4 endpoint
#             (forward HTTP still decided per request; CONNECT is a byte relay).
#   PIN       auto (default) | 0: CPU pinning, see "CPU layout" below; LOAD_CPUS, ORIGIN_CPUS, PROXY_CPUS override
#   BUILD     1 (default) runs `npx tsc -p tsconfig.json` first; 0 uses dist/ as it is
#   BOUNDARY_DIST  run boundary from this build directory instead of dist/ (experiments; must sit under the
#             project so node_modules resolves), e.g. a patched copy in bench/out/
#   BOUNDARY_REF   measure a committed state instead of the working tree: `git archive REF src tsconfig.json package.json`
#             is compiled into bench/out/build-<sha>/ (read-only for the repository) and run from there; a directory
#             instead of a commit is run as a built dist/ as it is (e.g. bench/parts-off.mjs's copies);
#             use it while others are editing src/ — a half-edited working tree can fail the start-up check.
#             With boundary-ref in PROXIES, the `boundary` row stays the working tree and the ref runs beside it
#             as its own row in the same interleaved rounds (a change against its base, same run)
#   PROFILE   1: run boundary under `node --cpu-prof`; profile + summary go to bench/out/ (slows boundary down)
#   BOUNDARY_NODE_FLAGS  extra node flags for boundary only, e.g. "--trace-gc" (output lands in its log;
#             with KEEP_TMP=1 it stays there for inspection)
#   KEEP_TMP  1: keep the temp dir (configs, logs) for inspection
#   LOG_PIPE  1: every boundary's stdout (its audit log) is a FIFO that cat, pinned with the load generator, empties
#             into the log file, as a container runtime reads a container's stdout (cat's CPU is not counted as
#             boundary's); default 0: the file itself (docs/events.md#where-the-lines-go)
#   PROXY_NODE  the node binary boundary, boundary-nometrics and the node floors run on (default: node on PATH), e.g. the
#             image's Node 22 from `npm install --prefix /tmp/boundary-node-22 node@22`; the origin and the bench's own
#             helpers stay on node
#   REF_NODE  the node binary boundary-ref runs on (default: PROXY_NODE): with BOUNDARY_REF naming the same commit, one
#             build on two Node majors, e.g. `BOUNDARY_REF=HEAD REF_NODE=<node 22> bench/proxy-pair.sh`
#   HOLD      N: after start-up, keep everything running N seconds before measuring (debugging by hand)
#
# CPU layout (PIN=auto): each proxy under test gets one dedicated core, the same for all of them, so the
# comparison is per-core efficiency — the way a sidecar with a 1-CPU limit runs. With >= 3 cores: load
# generator on cpu 0, origin on cpu 1, proxy on cpu 2. With 2 cores: load generator and origin share cpu 0,
# proxy on cpu 1 (so "direct" is wrk+origin on one core). tinyproxy (threads) and squid (one process) are
# pinned like node, whose GC/libuv threads then share the proxy's core too.
#
# Reading the table: on a 2-core host the CONNECT rows with a new tunnel per request are bound by cpu 0 (the
# client and the origin both doing full TLS handshakes), not by the proxy; compare the proxies' "cpu µs/req"
# there. "noise cpu%" is host CPU used by processes outside the bench (other users' jobs): when it is high,
# req/s and p99 shift, and "cpu µs/req" / "per-core" ratios are the numbers to trust.
#
# Equivalent allow-lists: every proxy allows only origin.bench.test at the bench ports (tinyproxy: domain
# filter + ConnectPort; it has no hosts-file option, so it is addressed as 127.0.0.1 — the same loopback
# address the others get from the bench hosts file — and its plain-HTTP filter cannot restrict ports).
# Every proxy logs each request to a file in the temp dir (boundary: OCSF JSON audit events).

set -euo pipefail
# shellcheck source=bench/squid-base.sh
source "$(dirname "${BASH_SOURCE[0]}")/squid-base.sh"
# shellcheck source=bench/boundary-run.sh
source "$(dirname "${BASH_SOURCE[0]}")/boundary-run.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE="$ROOT/bench/proxy"
RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
ROUND_WARMUP=${ROUND_WARMUP:-1}
CONNS=${CONNS:-32}
WRK_THREADS=${WRK_THREADS:-1}
CONCURRENCY=${CONCURRENCY:-32}
CASES=${CASES:-"http http-l7 tls-new tls-reuse"}
LARGE_BYTES=${LARGE_BYTES:-1048576}
PROXIES=${PROXIES:-"direct boundary boundary-l7 boundary-nometrics node-floor node-floor-raw node-floor-llhttp tinyproxy squid"}
PIN=${PIN:-auto}
BUILD=${BUILD:-1}
BOUNDARY_DIST=${BOUNDARY_DIST:-$ROOT/dist}
BOUNDARY_REF=${BOUNDARY_REF:-}
PROFILE=${PROFILE:-0}
BOUNDARY_NODE_FLAGS=${BOUNDARY_NODE_FLAGS:-}
PROXY_NODE=${PROXY_NODE:-node}
REF_NODE=${REF_NODE:-$PROXY_NODE}
KEEP_TMP=${KEEP_TMP:-0}
LOG_PIPE=${LOG_PIPE:-0}
OUT_DIR=${OUT_DIR:-$ROOT/bench/out}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
ORIGIN_HOST=origin.bench.test

# Nothing here may go through (or to) a proxy from the environment.
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
has() { [[ " $2 " == *" $1 "* ]]; }

for v in RUNS DURATION CONNS WRK_THREADS CONCURRENCY LARGE_BYTES; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer (got '${!v}')"
done
[[ $WARMUP =~ ^[0-9]+$ && $ROUND_WARMUP =~ ^[0-9]+$ ]] || die "WARMUP and ROUND_WARMUP must be whole numbers of seconds"

# ---------------------------------------------------------------------------------------------- tools
SQUID_BIN=$(command -v squid || echo /usr/sbin/squid)
TINYPROXY_BIN=$(command -v tinyproxy || echo /usr/bin/tinyproxy)
missing_required=()
for t in wrk node openssl curl; do command -v "$t" >/dev/null || missing_required+=("$t"); done
if ((${#missing_required[@]})); then
  die "missing ${missing_required[*]} — on Debian: apt-get install ${missing_required[*]/node/nodejs}"
fi
if has tinyproxy "$PROXIES" && [[ ! -x $TINYPROXY_BIN ]]; then
  log "tinyproxy not found — install it with: apt-get install tinyproxy (its rows are skipped)"
  PROXIES=${PROXIES//tinyproxy/}
fi
if has squid "$PROXIES" && [[ ! -x $SQUID_BIN ]]; then
  log "squid not found — install it with: apt-get install squid (its rows are skipped)"
  PROXIES=${PROXIES//squid/}
fi

NCPU=$(nproc)
if [[ $PIN == auto ]] && command -v taskset >/dev/null && ((NCPU >= 2)); then
  if ((NCPU >= 3)); then D_LOAD=0 D_ORIGIN=1 D_PROXY=2; else D_LOAD=0 D_ORIGIN=0 D_PROXY=1; fi
  LOAD_CPUS=${LOAD_CPUS:-$D_LOAD} ORIGIN_CPUS=${ORIGIN_CPUS:-$D_ORIGIN} PROXY_CPUS=${PROXY_CPUS:-$D_PROXY}
  PINNED=1
else
  PINNED=0 LOAD_CPUS=all ORIGIN_CPUS=all PROXY_CPUS=all
fi
# Command prefixes (arrays, so `timeout`/`&`/`exec` see the real process and $! is its pid).
PIN_LOAD=() PIN_ORIGIN=() PIN_PROXY=()
if ((PINNED)); then
  PIN_LOAD=(taskset -c "$LOAD_CPUS") PIN_ORIGIN=(taskset -c "$ORIGIN_CPUS") PIN_PROXY=(taskset -c "$PROXY_CPUS")
fi

# ----------------------------------------------------------------------------------- temp dir + cleanup
WORK=$(mktemp -d /tmp/boundary-bench.XXXXXX)
chmod 755 "$WORK"
declare -A PID_OF=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  local name pid i
  for name in "${!PID_OF[@]}"; do
    pid=${PID_OF[$name]}
    kill -TERM "$pid" 2>/dev/null || true
  done
  for name in "${!PID_OF[@]}"; do
    pid=${PID_OF[$name]}
    # boundary drains on SIGTERM (and writes its CPU profile); the others stop at once. Bounded wait.
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if ((KEEP_TMP)); then log "temp dir kept: $WORK"; else rm -rf "$WORK"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits (bounded) until a command succeeds; fails if the named process died meanwhile.
wait_until() {
  local what=$1 name=$2 tries=$3
  shift 3
  local i
  for ((i = 0; i < tries; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    if [[ -n $name ]] && ! kill -0 "${PID_OF[$name]}" 2>/dev/null; then
      log "$what: process exited"
      return 1
    fi
    sleep 0.1
  done
  log "$what: not ready after $((tries / 10)) s"
  return 1
}

# N free loopback TCP ports (bound to port 0 by the kernel, then released).
free_ports() {
  node -e '
    const net = require("node:net");
    const n = Number(process.argv[1]);
    const servers = Array.from({ length: n }, () => net.createServer());
    Promise.all(servers.map((s) => new Promise((r) => s.listen(0, "127.0.0.1", () => r(s.address().port)))))
      .then((ports) => { console.log(ports.join(" ")); servers.forEach((s) => s.close()); });' "$1"
}

# CPU ticks (user+system, all threads) used so far by a process and its direct children.
cpu_ticks() {
  local pid=$1 total=0 p stat
  for p in "$pid" $(pgrep -P "$pid" 2>/dev/null || true); do
    stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    stat=${stat##*) }
    read -r -a f <<<"$stat"
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)
# Busy (non-idle, non-iowait) CPU ticks of the whole host, all cores.
host_busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }

# ------------------------------------------------------------------------------------ certificates
log "work dir $WORK; cpus=$NCPU pinned=$PINNED load=$LOAD_CPUS origin=$ORIGIN_CPUS proxy=$PROXY_CPUS"
mkdir -p "$WORK/pki"
(
  cd "$WORK/pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=boundary bench throwaway CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout origin.key -out origin.csr \
    -subj "/CN=$ORIGIN_HOST" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
    "$ORIGIN_HOST" >origin.ext
  openssl x509 -req -in origin.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 2 \
    -extfile origin.ext -out origin.pem 2>/dev/null
) || die "openssl could not create the throwaway certificates"
chmod 644 "$WORK"/pki/*
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$ORIGIN_HOST" >"$WORK/hosts"

# ------------------------------------------------------------------------------------------ origin
# Three plain listeners (L4 endpoint, L7 endpoint, L4 endpoint with a credential bound) and two TLS listeners
# (passthrough, interception).
"${PIN_ORIGIN[@]}" node "$HERE/origin.mjs" --ready "$WORK/origin.json" --http 3 --https 2 --large-bytes "$LARGE_BYTES" \
  --cert "$WORK/pki/origin.pem" --key "$WORK/pki/origin.key" >"$WORK/origin.log" 2>&1 &
PID_OF[origin]=$!
wait_until origin origin 100 test -s "$WORK/origin.json" || die "origin did not start: $(cat "$WORK/origin.log")"
read -r HTTP_PORT HTTP_L7_PORT HTTP_CRED_PORT TLS_PORT TLS_L7_PORT < <(node -e '
  const o = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
  console.log([...o.http, ...o.https].join(" "));' "$WORK/origin.json")
read -r TINY_PORT SQUID_PORT B_PORT B_ADMIN B_DNS DNS_SINK BN_PORT BN_ADMIN BN_DNS FLOOR_PORT FLOOR_RAW_PORT FLOOR_LLHTTP_PORT BR_PORT BR_ADMIN BR_DNS < <(free_ports 15)
log "origin http=$HTTP_PORT,$HTTP_L7_PORT https=$TLS_PORT,$TLS_L7_PORT; proxies tinyproxy=$TINY_PORT squid=$SQUID_PORT boundary=$B_PORT"
origin_served() { curl -s --max-time 2 "http://127.0.0.1:$HTTP_PORT/__stats" | sed -E 's/.*"served":([0-9]+).*/\1/'; }

declare -A STATE=()  # proxy -> "ok" | why it is not measured

# ----------------------------------------------------------------------------------------- tinyproxy
start_tinyproxy() {
  local d="$WORK/tinyproxy"
  mkdir -p "$d" && chmod 777 "$d"
  printf '^127\\.0\\.0\\.1$\n' >"$d/filter"
  cat >"$d/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port $TINY_PORT
Listen 127.0.0.1
Timeout 600
LogFile "$d/tinyproxy.log"
LogLevel Info
PidFile "$d/tinyproxy.pid"
MaxClients 1024
Allow 127.0.0.1
ViaProxyName "tinyproxy"
Filter "$d/filter"
FilterType ere
FilterDefaultDeny Yes
ConnectPort $TLS_PORT
EOF
  touch "$d/tinyproxy.log" && chmod 666 "$d/tinyproxy.log"
  "${PIN_PROXY[@]}" "$TINYPROXY_BIN" -d -c "$d/tinyproxy.conf" >"$d/stdout.log" 2>&1 &
  PID_OF[tinyproxy]=$!
  if wait_until tinyproxy tinyproxy 100 curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$TINY_PORT/"; then
    STATE[tinyproxy]=ok
  else
    STATE[tinyproxy]="tinyproxy: failed to start ($(tail -3 "$d/stdout.log" "$d/tinyproxy.log" | tr '\n' ' '))"
  fi
}

# --------------------------------------------------------------------------------------------- squid
start_squid() {
  local d="$WORK/squid"
  mkdir -p "$d" && chmod 777 "$d"
  {
    squid_base_conf "$d" "$SQUID_PORT" "$WORK/hosts"
    cat <<EOF
acl bench_client src 127.0.0.1/32
acl bench_host dstdomain $ORIGIN_HOST
acl bench_http_port port $HTTP_PORT
acl bench_tls_port port $TLS_PORT
acl CONNECT method CONNECT
http_access allow bench_client bench_host bench_http_port !CONNECT
http_access allow CONNECT bench_client bench_host bench_tls_port
http_access deny all
EOF
  } >"$d/squid.conf"
  "${PIN_PROXY[@]}" "$SQUID_BIN" -N -f "$d/squid.conf" >"$d/stdout.log" 2>&1 &
  PID_OF[squid]=$!
  if wait_until squid squid 200 curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$SQUID_PORT/"; then
    STATE[squid]=ok
  else
    STATE[squid]="squid: failed to start ($(tail -3 "$d/cache.log" "$d/stdout.log" 2>/dev/null | tr '\n' ' '))"
  fi
}

# `boundary run`'s flags for a boundary of the bench: run_flags DIR POLICY PROXY_PORT ADMIN_PORT DNS_PORT sets RUN_FLAGS.
# --upstream-dns points at a closed loopback port: the hosts file answers origin.bench.test, and any other lookup
# must fail on loopback instead of leaving the host.
run_flags() {
  RUN_FLAGS=(--policy "$2" --proxy-listen "127.0.0.1:$3" --admin-listen "127.0.0.1:$4" --dns-listen "127.0.0.1:$5"
    --hosts "$WORK/hosts" --upstream-dns "127.0.0.1:$DNS_SINK" --upstream-ca "$WORK/pki/ca.pem"
    --unsafe-allow-loopback-upstream --state-dir "$1/state" --log-format json)
}

# Waits for the /healthz of the boundary started as NAME and records its state: await_boundary NAME DIR ADMIN_PORT.
await_boundary() {
  if wait_until "$1" "$1" 300 curl -sf --max-time 1 "http://127.0.0.1:$3/healthz"; then
    STATE[$1]=ok
  else
    STATE[$1]="$1: failed to start ($(tail -c 300 "$2/stderr.log" | tr '\n' ' '))"
  fi
}

# ------------------------------------------------------------------------------------------ boundary
# BOUNDARY_REF's dist: a built directory as it is, else the commit compiled by bench/build-ref.sh (tsc's log to $1).
ref_dist() {
  if [[ -d $BOUNDARY_REF ]]; then echo "$BOUNDARY_REF"; else "$ROOT/bench/build-ref.sh" "$BOUNDARY_REF" "$1"; fi
}
# What the results call BOUNDARY_REF: the directory, or the commit's short sha.
ref_name() {
  if [[ -d $BOUNDARY_REF ]]; then echo "$BOUNDARY_REF"; else git -C "$ROOT" rev-parse --short "$BOUNDARY_REF"; fi
}

start_boundary() {
  local d="$WORK/boundary"
  mkdir -p "$d/state"
  if [[ -n $BOUNDARY_REF ]] && ! has boundary-ref "$PROXIES"; then
    BOUNDARY_DIST=$(ref_dist "$d/tsc.log") || die "BOUNDARY_REF: cannot build $BOUNDARY_REF"
    BOUNDARY_SHA=$(ref_name)
  elif ((BUILD)); then
    log "building boundary (npx tsc -p tsconfig.json; errors in files mid-edit are tolerated)"
    (cd "$ROOT" && npx tsc -p tsconfig.json >"$d/tsc.log" 2>&1) || log "tsc reported $(grep -c 'error TS' "$d/tsc.log") error(s); trying dist/ anyway"
  fi
  if ! (cd "$ROOT" && "$PROXY_NODE" "$(entry_of "$BOUNDARY_DIST")" run --help >"$d/help.txt" 2>&1) || ! grep -q -- '--proxy-listen' "$d/help.txt"; then
    STATE[boundary]="boundary: not runnable yet ($(head -c 200 "$d/help.txt" | tr '\n' ' '))"
    return
  fi
  cat >"$d/policy.yaml" <<EOF
version: 1
network_policies:
  bench_origin:
    name: bench-origin
    endpoints:
      # L4 endpoints: forward HTTP is decided per request at L4; CONNECT is relayed without inspection.
      - host: $ORIGIN_HOST
        port: $HTTP_PORT
      - host: $ORIGIN_HOST
        port: $TLS_PORT
      # L7 endpoints: per-request L7 decisions; CONNECT+TLS is terminated with a boundary leaf.
      - host: $ORIGIN_HOST
        port: $HTTP_L7_PORT
        protocol: rest
        enforcement: enforce
        access: full
      - host: $ORIGIN_HOST
        port: $TLS_L7_PORT
        protocol: rest
        enforcement: enforce
        access: full
      # An L4 endpoint like the first, with a credential bound to it (large-cred): answers are scanned.
      - host: $ORIGIN_HOST
        port: $HTTP_CRED_PORT
    binaries:
      - path: "/**"
EOF
  local prof=()
  # Unquoted on purpose: a space-separated list of flags.
  # shellcheck disable=SC2206
  [[ -n $BOUNDARY_NODE_FLAGS ]] && prof=($BOUNDARY_NODE_FLAGS)
  if ((PROFILE)); then
    PROFILE_DIR="$OUT_DIR/proxy-$STAMP-profile"
    mkdir -p "$PROFILE_DIR"
    prof+=(--cpu-prof --cpu-prof-dir "$PROFILE_DIR")
  fi
  # With boundary-nometrics in the run, both rows start through the same entry and differ only in the metrics
  # switch (see bench/proxy/boundary-metrics-off.mjs for why).
  # Only when large-cred is measured, so the other rows keep running without a credentials file.
  local creds=()
  if has large-cred "$CASES"; then
    printf 'providers:\n  bench:\n    env: { BENCH_TOKEN: "bench-secret-0d9a41c7e2f35b68" }\n    endpoints: [{ host: %s, port: %s }]\n' \
      "$ORIGIN_HOST" "$HTTP_CRED_PORT" >"$d/credentials.yaml"
    creds=(--credentials "$d/credentials.yaml")
  fi
  local entry=("$(entry_of "$BOUNDARY_DIST")")
  has boundary-nometrics "$PROXIES" && entry=("$HERE/boundary-metrics-off.mjs" "$BOUNDARY_DIST")
  run_flags "$d" "$d/policy.yaml" "$B_PORT" "$B_ADMIN" "$B_DNS"
  (cd "$ROOT" && BOUNDARY_BENCH_METRICS=on exec_logged "$d/boundary.log" "${PIN_PROXY[@]}" "$PROXY_NODE" "${prof[@]}" "${entry[@]}" run "${RUN_FLAGS[@]}" "${creds[@]}") \
    2>"$d/stderr.log" &
  PID_OF[boundary]=$!
  await_boundary boundary "$d" "$B_ADMIN"
}

# The same build, policy and flags with metrics off (bench/proxy/boundary-metrics-off.mjs), pinned like boundary.
start_boundary_nometrics() {
  local d="$WORK/boundary-nometrics"
  mkdir -p "$d/state"
  if [[ ${STATE[boundary]:-} != ok ]]; then
    STATE[boundary-nometrics]="boundary-nometrics: needs boundary (${STATE[boundary]:-not started})"
    return
  fi
  run_flags "$d" "$WORK/boundary/policy.yaml" "$BN_PORT" "$BN_ADMIN" "$BN_DNS"
  (cd "$ROOT" && exec_logged "$d/boundary.log" "${PIN_PROXY[@]}" "$PROXY_NODE" "$HERE/boundary-metrics-off.mjs" "$BOUNDARY_DIST" run "${RUN_FLAGS[@]}") \
    2>"$d/stderr.log" &
  PID_OF[boundary-nometrics]=$!
  await_boundary boundary-nometrics "$d" "$BN_ADMIN"
}

# BOUNDARY_REF's build beside the working tree's (boundary-ref), same policy and flags, pinned like boundary.
start_boundary_ref() {
  local d="$WORK/boundary-ref"
  mkdir -p "$d/state"
  [[ -n $BOUNDARY_REF ]] || die "boundary-ref needs BOUNDARY_REF"
  if [[ ${STATE[boundary]:-} != ok ]]; then
    STATE[boundary-ref]="boundary-ref: needs boundary (${STATE[boundary]:-not started})"
    return
  fi
  local dist
  dist=$(ref_dist "$d/tsc.log") || die "BOUNDARY_REF: cannot build $BOUNDARY_REF"
  REF_SHA=$(ref_name)
  run_flags "$d" "$WORK/boundary/policy.yaml" "$BR_PORT" "$BR_ADMIN" "$BR_DNS"
  (cd "$ROOT" && exec_logged "$d/boundary.log" "${PIN_PROXY[@]}" "$REF_NODE" "$(entry_of "$dist")" run "${RUN_FLAGS[@]}") 2>"$d/stderr.log" &
  PID_OF[boundary-ref]=$!
  await_boundary boundary-ref "$d" "$BR_ADMIN"
}

# The Node floors (bench/proxy/bare-forward.mjs), pinned like boundary: start_node_floor NAME PORT UPSTREAM SERVER.
start_node_floor() {
  local name=$1 port=$2
  "${PIN_PROXY[@]}" "$PROXY_NODE" "$HERE/bare-forward.mjs" --listen "127.0.0.1:$port" --allow "$ORIGIN_HOST" \
    --origin-ip 127.0.0.1 --upstream "$3" --server "$4" >"$WORK/$name.log" 2>&1 &
  PID_OF[$name]=$!
  if wait_until "$name" "$name" 100 curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
    STATE[$name]=ok
  else
    STATE[$name]="$name: failed to start ($(tail -c 300 "$WORK/$name.log" | tr '\n' ' '))"
  fi
}

if has tinyproxy "$PROXIES"; then start_tinyproxy; fi
if has node-floor "$PROXIES"; then start_node_floor node-floor "$FLOOR_PORT" node node; fi
if has node-floor-raw "$PROXIES"; then start_node_floor node-floor-raw "$FLOOR_RAW_PORT" raw node; fi
if has node-floor-llhttp "$PROXIES"; then start_node_floor node-floor-llhttp "$FLOOR_LLHTTP_PORT" raw llhttp; fi
if has squid "$PROXIES"; then start_squid; fi
if has boundary "$PROXIES" || has boundary-l7 "$PROXIES" || has boundary-nometrics "$PROXIES" || has boundary-ref "$PROXIES" || has boundary-ref-l7 "$PROXIES"; then start_boundary; fi
if has boundary-nometrics "$PROXIES"; then start_boundary_nometrics; fi
if has boundary-ref "$PROXIES" || has boundary-ref-l7 "$PROXIES"; then start_boundary_ref; fi
STATE[boundary-ref-l7]=${STATE[boundary-ref]:-not started}
STATE[direct]=ok
STATE[boundary-l7]=${STATE[boundary]:-not started}
for p in tinyproxy squid boundary boundary-nometrics boundary-ref node-floor node-floor-raw node-floor-llhttp; do
  if [[ -n ${STATE[$p]:-} && ${STATE[$p]} != ok ]]; then log "${STATE[$p]}"; fi
done

# ------------------------------------------------------------------------- per-case request targets
proxy_port() {
  case $1 in
    boundary | boundary-l7) echo "$B_PORT" ;;
    boundary-nometrics) echo "$BN_PORT" ;;
    boundary-ref | boundary-ref-l7) echo "$BR_PORT" ;;
    node-floor) echo "$FLOOR_PORT" ;;
    node-floor-raw) echo "$FLOOR_RAW_PORT" ;;
    node-floor-llhttp) echo "$FLOOR_LLHTTP_PORT" ;;
    tinyproxy) echo "$TINY_PORT" ;;
    squid) echo "$SQUID_PORT" ;;
  esac
}
proxy_pid() {
  case $1 in
    direct) echo "${PID_OF[origin]}" ;;
    boundary | boundary-l7) echo "${PID_OF[boundary]}" ;;
    boundary-ref | boundary-ref-l7) echo "${PID_OF[boundary-ref]}" ;;
    *) echo "${PID_OF[$1]}" ;;
  esac
}
# Which proxies a case applies to.
applies() {
  local c=$1 p=$2
  case $c in
    http-l7) [[ $p == boundary-l7 || $p == boundary-ref-l7 ]] ;;
    http) [[ $p != boundary-l7 && $p != boundary-ref-l7 ]] ;;
    large) [[ $p == direct || $p == boundary || $p == boundary-ref || $p == tinyproxy || $p == squid ]] ;;
    large-cred) [[ $p == boundary ]] ;;
    *) [[ $p != boundary-nometrics && $p != node-floor* ]] ;;
  esac
}
# Name the origin is addressed by through a proxy (tinyproxy cannot use the bench hosts file).
target_host() { if [[ $1 == tinyproxy ]]; then echo 127.0.0.1; else echo "$ORIGIN_HOST"; fi; }

# Sanity: one allowed request through each proxy must reach the origin with 200, and one request to a name
# outside the allow-list must be refused — the allow-lists are live, not just configured.
declare -A CHECK=()
smoke() {
  local p=$1 port code deny tls_code tls_port ca
  port=$(proxy_port "$p")
  local h
  h=$(target_host "$p")
  local http_port=$HTTP_PORT
  [[ $p == boundary-l7 || $p == boundary-ref-l7 ]] && http_port=$HTTP_L7_PORT
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$port" "http://$h:$http_port/") || true
  deny=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$port" "http://denied.bench.test:$http_port/") || true
  tls_port=$TLS_PORT ca=$WORK/pki/ca.pem
  if [[ $p == boundary-l7 ]]; then tls_port=$TLS_L7_PORT ca=$WORK/boundary/state/ca.pem; fi
  if [[ $p == boundary-ref-l7 ]]; then tls_port=$TLS_L7_PORT ca=$WORK/boundary-ref/state/ca.pem; fi
  tls_code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$port" --cacert "$ca" \
    --connect-to "$ORIGIN_HOST:$tls_port:$h:$tls_port" "https://$ORIGIN_HOST:$tls_port/") || true
  CHECK[$p]="allowed-http=$code denied-http=$deny connect-tls=$tls_code"
  log "check $p: ${CHECK[$p]}"
  if [[ $code != 200 ]]; then STATE[$p]="$p: allowed request answered $code, not 200"; fi
}
for p in $PROXIES; do
  [[ $p == direct || ${STATE[$p]:-} != ok ]] || smoke "$p"
done

# HOLD=N keeps everything up for N seconds before measuring (for poking at it by hand); ports are logged above.
if ((${HOLD:-0} > 0)); then
  log "holding ${HOLD}s: origin http $HTTP_PORT/$HTTP_L7_PORT https $TLS_PORT/$TLS_L7_PORT; boundary $B_PORT (admin $B_ADMIN); tinyproxy $TINY_PORT; squid $SQUID_PORT; dir $WORK"
  sleep "$HOLD"
fi

# ------------------------------------------------------------------------------------------ measuring
RESULTS="$WORK/results.ndjson"
: >"$RESULTS"

# One wrk run of the plain-HTTP case; prints a JSON record (or nothing on failure).
measure_http() {
  local c=$1 p=$2 secs=$3 port url path host origin_port=$HTTP_PORT route=""
  [[ $c == http-l7 ]] && origin_port=$HTTP_L7_PORT
  [[ $c == large-cred ]] && origin_port=$HTTP_CRED_PORT
  [[ $c == large* ]] && route=large
  if [[ $p == direct ]]; then
    url="http://127.0.0.1:$origin_port/$route" path="" host="$ORIGIN_HOST:$origin_port"
  else
    port=$(proxy_port "$p")
    host="$(target_host "$p"):$origin_port"
    url="http://127.0.0.1:$port/" path="http://$host/$route"
  fi
  local rec timer=() t
  # CPU seconds wrk used (GNU time when present), so host noise can be told apart from the bench's own load.
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f '%U %S' -o "$WORK/wrk.time")
  rm -f "$WORK/wrk.time"
  rec=$(BENCH_PATH=$path BENCH_HOST=$host timeout $((secs + 30)) "${timer[@]}" "${PIN_LOAD[@]}" \
    wrk -t"$WRK_THREADS" -c"$CONNS" -d"${secs}s" --timeout 5s -s "$HERE/absolute.lua" "$url" 2>&1 |
    sed -n 's/^WRKJSON //p')
  [[ -n $rec ]] || return 0
  t=$(awk '{printf "%.3f", $1 + $2}' "$WORK/wrk.time" 2>/dev/null || true)
  if [[ -n $t ]]; then echo "${rec%\}},\"client_cpu_s\":$t}"; else echo "$rec"; fi
}

# One run of the CONNECT client; prints its JSON record.
measure_tls() {
  local c=$1 p=$2 secs=$3 ka=1 tls_port=$TLS_PORT ca=$WORK/pki/ca.pem args=()
  [[ $c == tls-new ]] && ka=0
  if [[ $p == boundary-l7 ]]; then tls_port=$TLS_L7_PORT ca=$WORK/boundary/state/ca.pem; fi
  if [[ $p == boundary-ref-l7 ]]; then tls_port=$TLS_L7_PORT ca=$WORK/boundary-ref/state/ca.pem; fi
  if [[ $p == direct ]]; then
    args=(--connect-to "127.0.0.1:$tls_port")
  else
    args=(--proxy "127.0.0.1:$(proxy_port "$p")" --tunnel-host "$(target_host "$p")")
  fi
  timeout $((secs + 30)) "${PIN_LOAD[@]}" node "$HERE/connect-load.mjs" --target "$ORIGIN_HOST:$tls_port" "${args[@]}" \
    --ca "$ca" --keepalive "$ka" --concurrency "$CONCURRENCY" --duration "$secs" 2>&1 | grep '^{' || true
}

measure() {
  local c=$1 p=$2 run=$3 secs=$4 pid t0 t1 s0 s1 rec
  local o0 o1 h0 h1
  pid=$(proxy_pid "$p")
  s0=$(origin_served)
  local w0=$EPOCHREALTIME w1
  t0=$(cpu_ticks "$pid") o0=$(cpu_ticks "${PID_OF[origin]}") h0=$(host_busy_ticks)
  if [[ $c == http* || $c == large* ]]; then rec=$(measure_http "$c" "$p" "$secs"); else rec=$(measure_tls "$c" "$p" "$secs"); fi
  t1=$(cpu_ticks "$pid") o1=$(cpu_ticks "${PID_OF[origin]}") h1=$(host_busy_ticks)
  w1=$EPOCHREALTIME
  s1=$(origin_served)
  [[ -n $rec ]] || rec='{"failed":true}'
  local sec='{printf "%.3f", (b-a)/h}'
  printf '{"case":"%s","proxy":"%s","run":%s,"seconds":%s,"server_cpu_s":%s,"origin_cpu_s":%s,"host_busy_cpu_s":%s,"window_s":%s,"loadavg":"%s","origin_served_http":%s,"r":%s}\n' \
    "$c" "$p" "$run" "$secs" "$(awk -v a="$t0" -v b="$t1" -v h="$CLK_TCK" "BEGIN$sec")" \
    "$(awk -v a="$o0" -v b="$o1" -v h="$CLK_TCK" "BEGIN$sec")" "$(awk -v a="$h0" -v b="$h1" -v h="$CLK_TCK" "BEGIN$sec")" "$(awk -v a="$w0" -v b="$w1" 'BEGIN{printf "%.3f", b-a}')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$((${s1:-0} - ${s0:-0}))" "$rec"
}

# Each boundary's log is emptied before each measurement (trim_log); what boundary's own log held is counted here for
# the report's boundary_log_lines and, with PROFILE=1, the requests the profile covers.
BOUNDARY_LOG_LINES=0
BOUNDARY_LOG_SERVED=0
served_lines() { grep -c -E '"class_uid":(4002|4001)' "$1" || true; }
trim_logs() {
  local f
  for f in "$WORK"/*/boundary.log; do
    if [[ $f == "$WORK/boundary/boundary.log" ]]; then
      if ((PROFILE)); then BOUNDARY_LOG_SERVED=$((BOUNDARY_LOG_SERVED + $(served_lines "$f"))); fi
      BOUNDARY_LOG_LINES=$((BOUNDARY_LOG_LINES + $(trim_log "$f")))
    else
      trim_log "$f" >/dev/null
    fi
  done
}

PAIRS=()
for c in $CASES; do
  for p in $PROXIES; do
    applies "$c" "$p" || continue
    PAIRS+=("$c:$p")
  done
done
estimate=$((${#PAIRS[@]} * (RUNS * (DURATION + ROUND_WARMUP + 1) + WARMUP + 1)))
log "measuring ${#PAIRS[@]} case/proxy pairs × $RUNS runs × ${DURATION}s (+${WARMUP}s warm-up each): about $((estimate / 60 + 1)) min"
for ((run = 1; run <= RUNS; run++)); do
  # Runs are interleaved (every pair once per round) so slow drift on the host spreads over all rows.
  for pair in "${PAIRS[@]}"; do
    c=${pair%%:*} p=${pair#*:}
    [[ ${STATE[$p]:-} == ok ]] || continue
    trim_logs
    if ((run == 1 && WARMUP > 0)); then measure "$c" "$p" 0 "$WARMUP" >/dev/null; fi
    if ((run > 1 && ROUND_WARMUP > 0)); then measure "$c" "$p" 0 "$ROUND_WARMUP" >/dev/null; fi
    rec=$(measure "$c" "$p" "$run" "$DURATION")
    echo "$rec" >>"$RESULTS"
    log "run $run/$RUNS $c via $p: $(node -e '
      const x = JSON.parse(process.argv[1]); const r = x.r;
      if (r.failed) { console.log("FAILED"); process.exit(0); }
      const rps = r.rps ?? r.requests / (r.duration_us / 1e6);
      const p99 = r.p99_ms ?? r.p99_us / 1000;
      const bad = (r.non2xx ?? r.status_errors ?? 0) + (r.errors ?? 0) + (r.connect_errors ?? 0) + (r.read_errors ?? 0) + (r.timeouts ?? 0);
      console.log(`${rps.toFixed(0)} req/s p99 ${p99.toFixed(2)} ms server cpu ${(100 * x.server_cpu_s / x.seconds).toFixed(0)}%` + (bad ? ` (${bad} errors/non-2xx)` : ""));' "$rec")"
  done
done

# ------------------------------------------------------------------------------------------- report
mkdir -p "$OUT_DIR"
META="$WORK/meta.json"
node -e '
  const [file, ...kv] = process.argv.slice(1);
  const o = {};
  for (let i = 0; i < kv.length; i += 2) o[kv[i]] = kv[i + 1];
  require("node:fs").writeFileSync(file, JSON.stringify(o));' "$META" \
  stamp "$STAMP" runs "$RUNS" duration_s "$DURATION" warmup_s "$WARMUP" conns "$CONNS" wrk_threads "$WRK_THREADS" \
  concurrency "$CONCURRENCY" cpus "$NCPU" pinned "$PINNED" load_cpus "$LOAD_CPUS" origin_cpus "$ORIGIN_CPUS" \
  proxy_cpus "$PROXY_CPUS" node "$("$PROXY_NODE" --version)" wrk "$(wrk -v 2>&1 | head -1 | cut -c1-40)" \
  tinyproxy "$("$TINYPROXY_BIN" -v 2>/dev/null || echo none)" squid "$("$SQUID_BIN" -v 2>/dev/null | head -1 || echo none)" \
  boundary_commit "${BOUNDARY_SHA:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}$([[ -n ${BOUNDARY_SHA:-} ]] && echo " (ref $BOUNDARY_REF)" || echo ' + working tree')" profile "$PROFILE" \
  boundary_dist "$BOUNDARY_DIST" \
  state_boundary "${STATE[boundary]:-not requested}" state_tinyproxy "${STATE[tinyproxy]:-not requested}" \
  state_squid "${STATE[squid]:-not requested}" state_boundary_nometrics "${STATE[boundary-nometrics]:-not requested}" \
  state_boundary_ref "${STATE[boundary-ref]:-not requested}" boundary_ref_commit "${REF_SHA:-}" \
  check_boundary "${CHECK[boundary]:-}" check_boundary_l7 "${CHECK[boundary-l7]:-}" \
  check_tinyproxy "${CHECK[tinyproxy]:-}" check_squid "${CHECK[squid]:-}" \
  boundary_log_lines "$((BOUNDARY_LOG_LINES + $(cat "$WORK/boundary/boundary.log" 2>/dev/null | wc -l)))"
OUT_FILE="$OUT_DIR/proxy-$STAMP.json"
node "$HERE/report.mjs" "$META" "$RESULTS" "$OUT_FILE"
log "raw results: $OUT_FILE"

if ((PROFILE)) && [[ ${STATE[boundary]:-} == ok ]]; then
  # The profile is written when boundary exits: stop it gracefully now, then summarise.
  kill -TERM "${PID_OF[boundary]}" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do kill -0 "${PID_OF[boundary]}" 2>/dev/null || break; sleep 0.1; done
  unset 'PID_OF[boundary]'
  prof_file=$(ls -t "$PROFILE_DIR"/*.cpuprofile 2>/dev/null | head -1 || true)
  if [[ -n $prof_file ]]; then
    # Requests boundary handled while profiled (warm-ups included): its HTTP + CONNECT audit events, or, when a
    # patched build logs none, the origin's request counter (exact when PROXIES=boundary only).
    served=$((BOUNDARY_LOG_SERVED + $(served_lines "$WORK/boundary/boundary.log")))
    if ((${served:-0} < 100)); then served=$(origin_served); fi
    node "$HERE/profile-summary.mjs" "$prof_file" --requests "${served:-0}" | tee "$PROFILE_DIR/summary.txt"
    log "profile: $prof_file"
  else
    log "no .cpuprofile written (boundary did not exit cleanly?)"
  fi
fi
