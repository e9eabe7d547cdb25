#!/usr/bin/env bash
# bench/upstream-proxy.sh — the added cost of the corporate upstream proxy hop (docs/running.md#corporate-upstream-proxy):
# the same boundary build run twice, once dialling the origin directly and once through a local squid
# (--upstream-proxy), measured in interleaved rounds: (a) wrk through the forward proxy over one connection
# (http-1: the p50 difference is the latency the hop adds to a request), (b) the same with CONNS connections
# (throughput; boundary's upstream pool reuses its tunnels, so the hop is squid relaying bytes), (c) CONNECT + TLS with a new tunnel per
# request (bench/proxy/connect-load.mjs --keepalive 0: every request pays the extra connection and CONNECT round
# trip). Besides req/s and p50 it reports the CPU time boundary and squid used per request (from /proc, robust
# on a shared host where req/s is not). The hop includes squid's own cost. Prints medians and ratios; nothing leaves 127.0.0.1; everything started
# here is killed on exit.
#
# Usage: bench/upstream-proxy.sh                   (defaults: RUNS=5 DURATION=8 WARMUP=2)
# Environment: RUNS, DURATION (s), WARMUP (s), CONNS (wrk connections, 32), CONCURRENCY (CONNECT client, 16),
#   BUILD (1: npx tsc first), BOUNDARY_DIST (default dist/), KEEP_TMP (1: keep the temp dir)

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE="$ROOT/bench/proxy"
RUNS=${RUNS:-5}
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-32}
CONCURRENCY=${CONCURRENCY:-16}
BUILD=${BUILD:-1}
BOUNDARY_DIST=${BOUNDARY_DIST:-$ROOT/dist}
KEEP_TMP=${KEEP_TMP:-0}
ORIGIN_HOST=origin.bench.test
SQUID_BIN=${SQUID_BIN:-/usr/sbin/squid}

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
for t in wrk node openssl curl "$SQUID_BIN"; do command -v "$t" >/dev/null || die "missing $t"; done

WORK=$(mktemp -d /tmp/boundary-bench-upstream-proxy.XXXXXX)
chmod 755 "$WORK"
declare -A PID_OF=()
cleanup() {
  for name in "${!PID_OF[@]}"; do kill "${PID_OF[$name]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ $KEEP_TMP == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

wait_until() {
  local tries=$1
  shift
  for ((i = 0; i < tries; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
free_ports() {
  node -e '
    const net = require("node:net");
    const servers = Array.from({ length: Number(process.argv[1]) }, () => net.createServer());
    Promise.all(servers.map((s) => new Promise((r) => s.listen(0, "127.0.0.1", () => r(s.address().port)))))
      .then((ports) => { console.log(ports.join(" ")); servers.forEach((s) => s.close()); });' "$1"
}

if [[ $BUILD == 1 ]]; then (cd "$ROOT" && npx tsc -p tsconfig.json) || die "build failed"; fi
ENTRY="$BOUNDARY_DIST/app/main.js"

mkdir -p "$WORK/pki"
(
  cd "$WORK/pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=boundary bench throwaway CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout origin.key -out origin.csr -subj "/CN=$ORIGIN_HOST" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$ORIGIN_HOST" >origin.ext
  openssl x509 -req -in origin.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 2 -extfile origin.ext -out origin.pem 2>/dev/null
) || die "openssl failed"
chmod 644 "$WORK"/pki/*
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$ORIGIN_HOST" >"$WORK/hosts"

node "$HERE/origin.mjs" --ready "$WORK/origin.json" --http 1 --https 1 --cert "$WORK/pki/origin.pem" --key "$WORK/pki/origin.key" >"$WORK/origin.log" 2>&1 &
PID_OF[origin]=$!
wait_until 100 test -s "$WORK/origin.json" || die "origin did not start"
read -r HTTP_PORT TLS_PORT < <(node -e 'const o = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8")); console.log([...o.http, ...o.https].join(" "));' "$WORK/origin.json")
read -r SQUID_PORT D_PORT D_ADMIN D_DNS P_PORT P_ADMIN P_DNS DNS_SINK < <(free_ports 8)

mkdir -p "$WORK/squid" && chmod 777 "$WORK/squid"
cat >"$WORK/squid/squid.conf" <<EOF
http_port 127.0.0.1:$SQUID_PORT
pid_filename $WORK/squid/squid.pid
coredump_dir $WORK/squid
cache_log $WORK/squid/cache.log
access_log none
cache_store_log none
logfile_rotate 0
netdb_filename none
cache deny all
cache_mem 0 MB
hosts_file $WORK/hosts
dns_nameservers 127.0.0.1
pinger_enable off
shutdown_lifetime 0 seconds
acl bench_client src 127.0.0.1/32
acl bench_ports port $HTTP_PORT $TLS_PORT
acl CONNECT method CONNECT
http_access allow CONNECT bench_client bench_ports
http_access deny all
EOF
"$SQUID_BIN" -N -f "$WORK/squid/squid.conf" >"$WORK/squid/stdout.log" 2>&1 &
PID_OF[squid]=$!
wait_until 200 grep -q 'Accepting HTTP Socket' "$WORK/squid/cache.log" || die "squid did not start"

cat >"$WORK/policy.yaml" <<EOF
version: 1
network_policies:
  bench:
    endpoints:
      - { host: $ORIGIN_HOST, port: $HTTP_PORT }
      - { host: $ORIGIN_HOST, port: $TLS_PORT }
    binaries: [{ path: "/**" }]
EOF

# $1 name, $2 proxy port, $3 admin port, $4 dns port, then extra flags.
start_boundary() {
  local name=$1 port=$2 admin=$3 dns=$4
  shift 4
  mkdir -p "$WORK/$name"
  (cd "$ROOT" && exec node "$ENTRY" run --policy "$WORK/policy.yaml" --proxy-listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --dns-listen "127.0.0.1:$dns" --capture off --binary-identity endpoint-only --hosts "$WORK/hosts" --upstream-dns "127.0.0.1:$DNS_SINK" \
    --unsafe-allow-loopback-upstream --state-dir "$WORK/$name/state" --log-format json "$@") >"$WORK/$name/boundary.log" 2>"$WORK/$name/stderr.log" &
  PID_OF[$name]=$!
  wait_until 300 curl -sf --max-time 1 "http://127.0.0.1:$admin/healthz" || die "$name did not start: $(tail -c 300 "$WORK/$name/stderr.log")"
}
start_boundary direct "$D_PORT" "$D_ADMIN" "$D_DNS"
start_boundary via-squid "$P_PORT" "$P_ADMIN" "$P_DNS" --upstream-proxy "http://127.0.0.1:$SQUID_PORT"
# Both must reach the origin before anything is measured.
for p in "$D_PORT" "$P_PORT"; do
  curl -sf --max-time 5 -x "http://127.0.0.1:$p" "http://$ORIGIN_HOST:$HTTP_PORT/" >/dev/null || die "no answer through 127.0.0.1:$p"
done

# "req/s p50_ms" of one wrk run (bench/proxy/absolute.lua prints a WRKJSON line) or one connect-load run.
run_wrk() {
  BENCH_PATH="http://$ORIGIN_HOST:$HTTP_PORT/" wrk -t1 -c"${3:-$CONNS}" -d"$2"s -s "$HERE/absolute.lua" "http://127.0.0.1:$1/" 2>/dev/null |
    sed -n 's/^WRKJSON //p' | node -e '
      let t = ""; process.stdin.on("data", (c) => (t += c)).on("end", () => { const o = JSON.parse(t); console.log(`${o.requests / (o.duration_us / 1e6)} ${o.p50_us / 1000} ${o.requests}`); });'
}
run_connect() {
  timeout $(($2 + 30)) node "$HERE/connect-load.mjs" --target "$ORIGIN_HOST:$TLS_PORT" --proxy "127.0.0.1:$1" --ca "$WORK/pki/ca.pem" \
    --keepalive 0 --concurrency "$CONCURRENCY" --duration "$2" 2>/dev/null | grep '^{' | node -e '
      let t = ""; process.stdin.on("data", (c) => (t += c)).on("end", () => { const o = JSON.parse(t); console.log(`${o.rps} ${o.p50_ms} ${o.requests}`); });'
}

# CPU seconds (user + system) a process has used so far.
CLK_TCK=$(getconf CLK_TCK)
cpu_of() { awk -v hz="$CLK_TCK" '{ printf "%.4f\n", ($14 + $15) / hz }' "/proc/$1/stat"; }

# One measured run: "req/s p50_ms boundary_cpu_us_per_request squid_cpu_us_per_request".
measure() {
  local c=$1 b=$2 port=$D_PORT pid out b0 b1 s0 s1
  [[ $b == via-squid ]] && port=$P_PORT
  pid=${PID_OF[$b]}
  case $c in
    http-1) run_wrk "$port" "$WARMUP" 1 >/dev/null ;;
    http) run_wrk "$port" "$WARMUP" >/dev/null ;;
    connect) run_connect "$port" "$WARMUP" >/dev/null ;;
  esac
  b0=$(cpu_of "$pid"); s0=$(cpu_of "${PID_OF[squid]}")
  case $c in
    http-1) out=$(run_wrk "$port" "$DURATION" 1) ;;
    http) out=$(run_wrk "$port" "$DURATION") ;;
    connect) out=$(run_connect "$port" "$DURATION") ;;
  esac
  b1=$(cpu_of "$pid"); s1=$(cpu_of "${PID_OF[squid]}")
  awk -v o="$out" -v b0="$b0" -v b1="$b1" -v s0="$s0" -v s1="$s1" 'BEGIN {
    split(o, f, " "); n = f[3] > 0 ? f[3] : 1
    printf "%s %s %.1f %.1f\n", f[1], f[2], (b1 - b0) * 1e6 / n, (s1 - s0) * 1e6 / n }'
}

declare -A RESULTS=()
for ((round = 1; round <= RUNS; round++)); do
  for c in http-1 http connect; do
    for b in direct via-squid; do
      out=$(measure "$c" "$b")
      RESULTS[$c/$b]+="$out;"
      log "round $round $c $b: req/s p50_ms boundary_cpu_us/req squid_cpu_us/req = $out"
    done
  done
done

median() { tr ';' '\n' | awk 'NF' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
column_of() { echo "${RESULTS[$1]}" | tr ';' '\n' | awk -v k="$2" 'NF {print $k}' | tr '\n' ';' | median; }
printf '\n| case | direct req/s | via squid req/s | ratio | direct p50 | via squid p50 | p50 added | boundary CPU/req direct | via squid | squid CPU/req |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for c in http-1 http connect; do
  awk -v c="$c" -v dr="$(column_of "$c/direct" 1)" -v pr="$(column_of "$c/via-squid" 1)" -v dl="$(column_of "$c/direct" 2)" \
    -v pl="$(column_of "$c/via-squid" 2)" -v dc="$(column_of "$c/direct" 3)" -v pc="$(column_of "$c/via-squid" 3)" -v sc="$(column_of "$c/via-squid" 4)" 'BEGIN {
    printf "| %s | %.0f | %.0f | %.2fx | %.3f ms | %.3f ms | %.3f ms | %.0f µs | %.0f µs | %.0f µs |\n", c, dr, pr, pr / dr, dl, pl, pl - dl, dc, pc, sc }'
done
