#!/usr/bin/env bash
# bench/bulk.sh — a large download through a passthrough CONNECT tunnel: curl fetches BYTES (default 256 MiB) of
# plain HTTP from a loopback origin directly, through boundary (an L4 endpoint: CONNECT relayed without
# inspection), through a second boundary build (BOUNDARY_REF, the before of a change), through node-floor
# (bench/bulk/bare-tunnel.mjs: a bare Node CONNECT relay, the floor of any Node relay) and through squid, every
# route once per round in a rotating order, RUNS rounds. Prints medians of MB/s, the median per-round ratio to
# direct, the proxy's CPU per GiB, and the share of the time the load's core (curl and the origin) was busy: at 100 %
# it is the load, not the relay, that sets the pace. The proxy is pinned to one core, curl and the origin to the other.
# Nothing leaves 127.0.0.1; everything started here is killed on exit.
#
# Usage: bench/bulk.sh                                   (RUNS=7 BYTES=268435456)
#        BOUNDARY_REF=main RUNS=5 bench/bulk.sh           (the working tree against main, same rounds)
# Environment (all optional):
#   RUNS          rounds (default 7)
#   BYTES         size of the download (default 268435456)
#   ROUTES        subset of: direct boundary boundary-ref node-floor node-floor-onread squid (default: all that can
#                 run but node-floor-onread). node-floor-onread: the bare relay reading the upstream socket into one
#                 reused buffer of ONREAD_BYTES (default 1 MiB, net's `onread`), each chunk written to the client
#                 before the next read; with ONREAD_COPY=1 each chunk is copied into a buffer of its own first.
#                 socat (not in the default set): a relay written in C (read/write of SOCAT_BUFFER bytes, default
#                 1 MiB), listening for the origin's bytes only (no CONNECT: curl is pointed at it with
#                 --connect-to): the floor of any userspace relay that copies, on this host
#   BUILD         1 (default) compiles the working tree into bench/out/bulk-build; 0 uses dist/
#   BOUNDARY_REF  a committed state for the boundary-ref route, built by bench/build-ref.sh
#   BOUNDARY_NODE_FLAGS  node flags for both boundary builds
#   PROXY_NODE    the node binary both boundary builds and the Node relays run on (default: node on PATH), e.g. the
#                 image's Node 22 from `npm install --prefix /tmp/boundary-node-22 node@22`; the origin stays on node
#   PIN           1 (default): proxy on cpu 1, curl and origin on cpu 0; 0: no pinning
set -euo pipefail
# shellcheck source=bench/squid-base.sh
source "$(dirname "${BASH_SOURCE[0]}")/squid-base.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-7}
BYTES=${BYTES:-268435456}
BUILD=${BUILD:-1}
BOUNDARY_REF=${BOUNDARY_REF:-}
BOUNDARY_NODE_FLAGS=${BOUNDARY_NODE_FLAGS:-}
PROXY_NODE=${PROXY_NODE:-node}
ONREAD_BYTES=${ONREAD_BYTES:-1048576}
SOCAT_BUFFER=${SOCAT_BUFFER:-1048576}
ORIGIN_HOST=origin.bench.test
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

log() { printf '[bulk %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
for t in node curl; do command -v "$t" >/dev/null || die "missing $t"; done
[[ $RUNS =~ ^[1-9][0-9]*$ && $BYTES =~ ^[1-9][0-9]*$ ]] || die "RUNS and BYTES must be positive integers"
SQUID_BIN=$(command -v squid || echo /usr/sbin/squid)
ROUTES=${ROUTES:-"direct boundary ${BOUNDARY_REF:+boundary-ref} node-floor squid"}
if [[ " $ROUTES " == *" squid "* && ! -x $SQUID_BIN ]]; then
  log "squid not found (apt-get install squid); its row is skipped"
  ROUTES=${ROUTES//squid/}
fi

LOAD_CPU=0 PIN_LOAD=() PIN_PROXY=()
if [[ ${PIN:-1} == 1 ]] && command -v taskset >/dev/null && (($(nproc) >= 2)); then PIN_LOAD=(taskset -c "$LOAD_CPU") PIN_PROXY=(taskset -c 1); fi

WORK=$(mktemp -d /tmp/boundary-bulk.XXXXXX)
chmod 755 "$WORK"
declare -A PID_OF=() PORT_OF=()
cleanup() {
  local pid
  for pid in "${PID_OF[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_until() {
  local i
  for ((i = 0; i < 300; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
free_ports() {
  node -e 'const net = require("node:net");
    const s = Array.from({ length: Number(process.argv[1]) }, () => net.createServer());
    Promise.all(s.map((x) => new Promise((r) => x.listen(0, "127.0.0.1", () => r(x.address().port)))))
      .then((p) => { console.log(p.join(" ")); s.forEach((x) => x.close()); });' "$1"
}
# CPU ticks (user + system, all threads) of a process.
cpu_ticks() { local s; s=$(cat "/proc/$1/stat"); s=${s##*) }; read -r -a f <<<"$s"; echo $((f[11] + f[12])); }
# CPU ticks of a process's waited-for children (cutime + cstime): a forking server's finished connections.
cpu_ticks_children() { local s; s=$(cat "/proc/$1/stat"); s=${s##*) }; read -r -a f <<<"$s"; echo $((f[13] + f[14])); }
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------------------------------------- origin
"${PIN_LOAD[@]}" node "$ROOT/bench/bulk/origin.mjs" --ready "$WORK/origin.json" >"$WORK/origin.log" 2>&1 &
PID_OF[origin]=$!
wait_until test -s "$WORK/origin.json" || die "origin did not start: $(cat "$WORK/origin.log")"
ORIGIN_PORT=$(node -e 'console.log(JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8")).port)' "$WORK/origin.json")
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$ORIGIN_HOST" >"$WORK/hosts"
read -r B_PORT B_ADMIN B_DNS R_PORT R_ADMIN R_DNS SQUID_PORT FLOOR_PORT DNS_SINK FLOOR_ONREAD_PORT SOCAT_PORT < <(free_ports 11)

# -------------------------------------------------------------------------------------------- boundary
cat >"$WORK/policy.yaml" <<YAML
version: 1
network_policies:
  bench_origin:
    name: bench-origin
    endpoints:
      - host: $ORIGIN_HOST
        port: $ORIGIN_PORT
    binaries:
      - path: "/**"
YAML
start_boundary() { # name dist port admin dns
  local name=$1 dist=$2 d="$WORK/$1"
  mkdir -p "$d/state"
  # shellcheck disable=SC2086
  (cd "$ROOT" && exec "${PIN_PROXY[@]}" "$PROXY_NODE" $BOUNDARY_NODE_FLAGS "$dist/app/main.js" run --policy "$WORK/policy.yaml" \
    --proxy-listen "127.0.0.1:$3" --admin-listen "127.0.0.1:$4" --dns-listen "127.0.0.1:$5" --capture off \
    --hosts "$WORK/hosts" --upstream-dns "127.0.0.1:$DNS_SINK" --unsafe-allow-loopback-upstream \
    --state-dir "$d/state" --log-format json) >"$d/out.log" 2>"$d/err.log" &
  PID_OF[$name]=$!
  PORT_OF[$name]=$3
  wait_until curl -sf --max-time 1 "http://127.0.0.1:$4/healthz" || die "$name did not start: $(tail -c 300 "$d/err.log")"
}
if [[ " $ROUTES " == *" boundary "* ]]; then
  if ((BUILD)); then
    snap="$ROOT/bench/out/bulk-build"
    rm -rf "$snap" && mkdir -p "$snap" && cp -r "$ROOT/src" "$ROOT/tsconfig.json" "$ROOT/package.json" "$snap/"
    log "building the working tree into $snap"
    "$ROOT/node_modules/.bin/tsc" -p "$snap/tsconfig.json" >"$WORK/tsc.log" 2>&1 || log "tsc reported errors; running it anyway"
    dist="$snap/dist"
  else
    dist="$ROOT/dist"
  fi
  start_boundary boundary "$dist" "$B_PORT" "$B_ADMIN" "$B_DNS"
fi
if [[ " $ROUTES " == *" boundary-ref "* ]]; then
  start_boundary boundary-ref "$("$ROOT/bench/build-ref.sh" "$BOUNDARY_REF" "$WORK/tsc-ref.log")" "$R_PORT" "$R_ADMIN" "$R_DNS"
fi

if [[ " $ROUTES " == *" node-floor "* ]]; then
  "${PIN_PROXY[@]}" "$PROXY_NODE" "$ROOT/bench/bulk/bare-tunnel.mjs" --listen "$FLOOR_PORT" --hosts "$WORK/hosts" >"$WORK/floor.log" 2>&1 &
  PID_OF[node-floor]=$!
  PORT_OF[node-floor]=$FLOOR_PORT
  wait_until bash -c "exec 3<>/dev/tcp/127.0.0.1/$FLOOR_PORT" || die "node-floor did not start: $(cat "$WORK/floor.log")"
fi
if [[ " $ROUTES " == *" node-floor-onread "* ]]; then
  "${PIN_PROXY[@]}" "$PROXY_NODE" "$ROOT/bench/bulk/bare-tunnel.mjs" --listen "$FLOOR_ONREAD_PORT" --hosts "$WORK/hosts" \
    --onread "$ONREAD_BYTES" $([[ ${ONREAD_COPY:-0} == 1 ]] && echo --onread-copy) >"$WORK/floor-onread.log" 2>&1 &
  PID_OF[node-floor-onread]=$!
  PORT_OF[node-floor-onread]=$FLOOR_ONREAD_PORT
  wait_until bash -c "exec 3<>/dev/tcp/127.0.0.1/$FLOOR_ONREAD_PORT" || die "node-floor-onread did not start: $(cat "$WORK/floor-onread.log")"
fi

if [[ " $ROUTES " == *" socat "* ]]; then
  command -v socat >/dev/null || die "socat route: missing socat (apt-get install socat)"
  "${PIN_PROXY[@]}" socat -b "$SOCAT_BUFFER" "TCP-LISTEN:$SOCAT_PORT,bind=127.0.0.1,reuseaddr,fork" "TCP:127.0.0.1:$ORIGIN_PORT" >"$WORK/socat.log" 2>&1 &
  PID_OF[socat]=$!
  PORT_OF[socat]=$SOCAT_PORT
  wait_until bash -c "exec 3<>/dev/tcp/127.0.0.1/$SOCAT_PORT" || die "socat did not start: $(cat "$WORK/socat.log")"
fi

# ----------------------------------------------------------------------------------------------- squid
if [[ " $ROUTES " == *" squid "* ]]; then
  mkdir -p "$WORK/squid" && chmod 777 "$WORK/squid"
  {
    squid_base_conf "$WORK/squid" "$SQUID_PORT" "$WORK/hosts"
    cat <<CONF
acl bench_host dstdomain $ORIGIN_HOST
acl bench_port port $ORIGIN_PORT
acl CONNECT method CONNECT
http_access allow CONNECT bench_host bench_port
http_access deny all
CONF
  } >"$WORK/squid/squid.conf"
  "${PIN_PROXY[@]}" "$SQUID_BIN" -N -f "$WORK/squid/squid.conf" >"$WORK/squid/stdout.log" 2>&1 &
  PID_OF[squid]=$!
  PORT_OF[squid]=$SQUID_PORT
  wait_until curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$SQUID_PORT/" || die "squid did not start"
fi

# ------------------------------------------------------------------------------------------- measuring
# Busy and idle ticks of the load's core (curl and the origin): a route that leaves it idle is the one that waits.
load_core_ticks() {
  if ((${#PIN_LOAD[@]} == 0)); then echo "0 0"; return; fi
  awk -v cpu="cpu$LOAD_CPU" '$1 == cpu { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat
}
# One download: prints "bytes_per_second proxy_cpu_ticks load_core_busy_share"; fails unless every byte arrived.
fetch() {
  local route=$1 before=0 out core_busy core_idle
  local url="http://$ORIGIN_HOST:$ORIGIN_PORT/bulk/$BYTES" args=()
  if [[ $route == direct ]]; then
    url="http://127.0.0.1:$ORIGIN_PORT/bulk/$BYTES"
  elif [[ $route == socat ]]; then
    # socat forks a child per connection: its CPU is the children's, read from the parent's cumulative ticks.
    args=(--connect-to "$ORIGIN_HOST:$ORIGIN_PORT:127.0.0.1:$SOCAT_PORT")
    before=$(cpu_ticks_children "${PID_OF[$route]}")
  else
    args=(--proxytunnel --proxy "http://127.0.0.1:${PORT_OF[$route]}")
    before=$(cpu_ticks "${PID_OF[$route]}")
  fi
  read -r core_busy core_idle < <(load_core_ticks)
  out=$("${PIN_LOAD[@]}" curl -sS -o /dev/null --max-time 120 -w '%{size_download} %{speed_download}' "${args[@]}" "$url")
  read -r size speed <<<"$out"
  ((size == BYTES)) || die "$route: $size of $BYTES bytes"
  local busy idle share=NaN
  read -r busy idle < <(load_core_ticks)
  busy=$((busy - core_busy)) idle=$((idle - core_idle))
  ((busy + idle > 0)) && share=$(awk -v b="$busy" -v i="$idle" 'BEGIN { printf "%.3f", b / (b + i) }')
  local ticks=0
  if [[ $route == socat ]]; then
    # The child is counted once the parent has reaped it, a moment after curl's end.
    for ((wait = 0; wait < 40; wait++)); do
      ticks=$(($(cpu_ticks_children "${PID_OF[$route]}") - before))
      ((ticks > 0)) && break
      sleep 0.05
    done
  elif [[ $route != direct ]]; then
    ticks=$(($(cpu_ticks "${PID_OF[$route]}") - before))
  fi
  echo "${speed%.*} $ticks $share"
}

read -r -a routes <<<"$ROUTES"
for r in "${routes[@]}"; do fetch "$r" >/dev/null; done # warm-up: first connection, JIT
results="$WORK/results"
for ((round = 0; round < RUNS; round++)); do
  for ((i = 0; i < ${#routes[@]}; i++)); do
    r=${routes[$(((i + round) % ${#routes[@]}))]}
    echo "$round $r $(fetch "$r")" >>"$results"
  done
  log "round $((round + 1))/$RUNS done"
done

node - "$results" "$BYTES" "$CLK_TCK" "${routes[@]}" <<'JS'
const [file, bytes, tck, ...routes] = process.argv.slice(2);
const rows = require('node:fs').readFileSync(file, 'utf8').trim().split('\n').map((l) => l.split(' '));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const speed = (round, route) => Number(rows.find((r) => r[0] === round && r[1] === route)?.[2]);
const rounds = [...new Set(rows.map((r) => r[0]))];
console.log(`download of ${bytes} bytes, ${rounds.length} interleaved rounds (medians)`);
console.log('route              MB/s   ratio to direct (per round)                proxy CPU ms/GiB  load core busy');
for (const route of routes) {
  const mine = rows.filter((r) => r[1] === route);
  const mbs = median(mine.map((r) => Number(r[2]) / 1e6));
  const ratios = rounds.map((k) => speed(k, route) / speed(k, 'direct'));
  const cpu = route === 'direct' ? '' : (median(mine.map((r) => (Number(r[3]) * 1000) / Number(tck))) / (Number(bytes) / 2 ** 30)).toFixed(0);
  const busy = median(mine.map((r) => Number(r[4])));
  console.log(`${route.padEnd(18)} ${mbs.toFixed(0).padStart(5)}  ${median(ratios).toFixed(3)}x (${ratios.map((x) => x.toFixed(2)).join(' ')})`.padEnd(77) +
    cpu.padEnd(18) + (Number.isFinite(busy) ? `${(100 * busy).toFixed(0)} %` : '-'));
}
JS
