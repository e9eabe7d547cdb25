#!/usr/bin/env bash
# bench/memory.sh — what one sandbox's boundary costs in memory: a real `node dist/app/main.js run` on loopback,
# read from /proc/<pid>/status (VmRSS, RssAnon, RssFile) and its admin /metrics (heap). Phases, each on a
# fresh boundary: idle after start; COUNT idle CONNECT tunnels to a TCP origin; COUNT inspected keep-alive
# connections (CONNECT + TLS terminated by boundary + one request, then idle); DNS_COUNT live policy-DNS
# mappings (unique names under a wildcard). Per-item figures are (loaded - idle) / items, medians of RUNS.
# Also the floor: `node -e 'setInterval(...)'` and node with net/tls/http/crypto loaded, in the same run, and the peers
# (squid, tinyproxy, dnsmasq) idle beside it. Every idle process is also watched for IDLE_CPU_MS once settled: the CPU
# its threads use and how often they wake while nothing asks anything of them.
# Each idle process runs beside a second copy of itself (sidecars of one image on a node share the pages of node and
# its libraries), so its own pages (Private_* of smaps_rollup) are what one more sandbox costs; PSS is printed too.
# As root, the idle boundary runs in a memory cgroup of its own, and what is charged to it (and the working set
# Kubernetes reports) is printed; the cgroup is removed after.
# boundary runs as the image ships it: the tsc build bundled by scripts/bundle.ts, with the image's malloc settings.
# Clients and origin are separate processes (bench/memory/*.mjs). Nothing leaves 127.0.0.1.
#
# Usage: bench/memory.sh                                   (RUNS=3 COUNT=10000 or what the fd limit allows)
#        RUNS=1 COUNT=2000 PHASES="idle tunnel" bench/memory.sh
#        BOUNDARY_NODE=/path/to/node22 PHASES=idle bench/memory.sh   (the image's Node major, floors included)
# Environment (all optional):
#   RUNS         repetitions of every phase (default 3)
#   COUNT        tunnels / inspected connections held (default 10000, lowered to fit `ulimit -n`: boundary holds
#                two sockets per item, so COUNT <= (hard limit - 200) / 2)
#   DNS_COUNT    live DNS mappings (default 500: the default /15 pool hands out 512 addresses per epoch window)
#   PHASES       subset of: idle tunnel inspected dns closed (default: all; closed: COUNT tunnels opened and closed,
#                200 at a time; what each leaves behind once the memory reducer has run)
#   SETTLE_MIN_WAIT_MS  wait before sampling, so V8's memory reducer has run (default 15000)
#   BUILD        1 (default) compiles the working tree into a temp build under bench/out/; 0 uses dist/ (bundled too)
#   BOUNDARY_DIST  run this build directory as it is (must sit under the project so node_modules resolves)
#   BOUNDARY_REF   measure a committed state: `git archive REF src tsconfig.json package.json` compiled into bench/out/build-<sha>/
#   BUNDLE       1 (default) bundles the build it runs as the image does (scripts/bundle.ts); 0 runs tsc's output
#   BOUNDARY_NODE  the node binary for boundary and the floors (default: node on PATH)
#   BOUNDARY_NODE_FLAGS  node flags for boundary only (the Dockerfile's are not applied unless given here)
#   MALLOC_ARENA_MAX  default 2 (the image's setting)
#   MALLOC_TRIM_THRESHOLD_  default 131072 (the image's setting); empty: unset, glibc's own dynamic threshold
#   PEERS        peers measured idle, each once (default "squid tinyproxy dnsmasq"; those not installed are skipped)
#   IDLE_CPU_MS  how long an idle process is watched for its CPU and wakeups (default 20000)
# Output: a table on stdout; raw samples in bench/out/memory-<timestamp>.json.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-3}
BUILD=${BUILD:-1}
BOUNDARY_REF=${BOUNDARY_REF:-}
BOUNDARY_DIST=${BOUNDARY_DIST:-}
BUNDLE=${BUNDLE:-1}
BOUNDARY_NODE=${BOUNDARY_NODE:-node}
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_-131072}
if [[ -n $MALLOC_TRIM_THRESHOLD_ ]]; then export MALLOC_TRIM_THRESHOLD_; else unset MALLOC_TRIM_THRESHOLD_; fi
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

log() { printf '[memory %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
for t in node "$BOUNDARY_NODE" openssl; do command -v "$t" >/dev/null || die "missing $t"; done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer (got '$RUNS')"

# 10,000 held items are 20,000 sockets in boundary (client + upstream side) plus its own handful.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fd_limit=$(ulimit -n)
fit=$(((fd_limit - 200) / 2))
COUNT=${COUNT:-$((fit < 10000 ? fit : 10000))}
((COUNT <= fit)) || die "COUNT=$COUNT needs ulimit -n >= $((2 * COUNT + 200)) (have $fd_limit)"
((COUNT == 10000)) || log "COUNT=$COUNT (ulimit -n is $fd_limit; 10000 would need $((2 * 10000 + 200)))"

WORK=$(mktemp -d /tmp/boundary-memory.XXXXXX)
# The peers' files live apart: measure.mjs starts from an empty WORK.
PEER_DIR=$(mktemp -d /tmp/boundary-memory-peers.XXXXXX)
trap 'rm -rf "$WORK" "$PEER_DIR"' EXIT

# 1 when the build is bundled before it runs: every build but a BOUNDARY_DIST, which runs as it is.
bundle_it=$BUNDLE
if [[ -n $BOUNDARY_REF ]]; then
  BOUNDARY_DIST=$("$ROOT/bench/build-ref.sh" "$BOUNDARY_REF" "$WORK/tsc.log") || die "BOUNDARY_REF: cannot build $BOUNDARY_REF"
elif [[ -z $BOUNDARY_DIST ]]; then
  if ((BUILD)); then
    # A private build of the working tree: others' dist/ is left alone; errors in files mid-edit are tolerated.
    snap="$ROOT/bench/out/memory-build"
    rm -rf "$snap" && mkdir -p "$snap"
    cp -r "$ROOT/src" "$ROOT/tsconfig.json" "$ROOT/package.json" "$snap/"
    log "building the working tree into $snap"
    "$ROOT/node_modules/.bin/tsc" -p "$snap/tsconfig.json" >"$WORK/tsc.log" 2>&1 || log "tsc reported $(grep -c 'error TS' "$WORK/tsc.log") error(s); running it anyway"
    BOUNDARY_DIST="$snap/dist"
  else
    BOUNDARY_DIST="$ROOT/dist"
  fi
else
  bundle_it=0
fi
[[ -f $BOUNDARY_DIST/app/main.js || -f $BOUNDARY_DIST/main.js ]] || die "no $BOUNDARY_DIST/app/main.js"
if ((bundle_it)); then
  # Beside the build it bundles, laid out as the image's /app: node_modules resolves, ../../package.json is there.
  # dist/'s bundle goes under bench/out/ instead, as the others do.
  bundled="$(dirname "$BOUNDARY_DIST")/bundle"
  [[ $BOUNDARY_DIST != "$ROOT/dist" ]] || bundled="$ROOT/bench/out/memory-dist/bundle"
  rm -rf "$bundled" && mkdir -p "$bundled"
  cp "$ROOT/package.json" "$bundled/"
  bundler="$ROOT/scripts/bundle.ts"
  if [[ -n $BOUNDARY_REF ]] && git -C "$ROOT" cat-file -e "$BOUNDARY_REF:scripts/bundle.ts" 2>/dev/null; then
    # A committed state is bundled as its own image was, by its own scripts/bundle.ts.
    bundler="$(dirname "$BOUNDARY_DIST")/scripts/bundle.ts"
    mkdir -p "$(dirname "$bundler")" && git -C "$ROOT" show "$BOUNDARY_REF:scripts/bundle.ts" >"$bundler"
  fi
  log "bundling $BOUNDARY_DIST into $bundled/dist with $bundler"
  node --import tsx "$bundler" "$BOUNDARY_DIST" "$bundled/dist" || die "bundling $BOUNDARY_DIST failed"
  BOUNDARY_DIST="$bundled/dist"
fi

# Peers, started idle by measure.mjs beside the floors, with the proxy and DNS benches' settings (no traffic reaches them).
source "$ROOT/bench/squid-base.sh"
PEERS=${PEERS-squid tinyproxy dnsmasq}
free_port() { node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }
# squid and tinyproxy drop root for their own users, which must reach their files.
chmod 711 "$PEER_DIR"
printf '127.0.0.1 origin.bench.test\n' >"$PEER_DIR/hosts"
# Each peer also gets a neighbour, a second copy with its own port and files (measure.mjs: PEER_NEIGHBOURS).
peer_line() { # peer binary dir: prints the peer's command line, tab-separated, with a port of its own
  local port bin=$2 d=$3
  mkdir -p "$d" && chmod 777 "$d"
  port=$(free_port)
  case $1 in
    squid)
      { squid_base_conf "$d" "$port" "$PEER_DIR/hosts"; echo 'http_access deny all'; } >"$d/squid.conf"
      printf '%s\t-N\t-f\t%s' "$bin" "$d/squid.conf" ;;
    tinyproxy)
      printf 'User nobody\nGroup nogroup\nPort %s\nListen 127.0.0.1\nTimeout 600\nLogFile "%s/tinyproxy.log"\nPidFile "%s/tinyproxy.pid"\nMaxClients 1024\nAllow 127.0.0.1\n' \
        "$port" "$d" "$d" >"$d/tinyproxy.conf"
      touch "$d/tinyproxy.log" && chmod 666 "$d/tinyproxy.log"
      printf '%s\t-d\t-c\t%s' "$bin" "$d/tinyproxy.conf" ;;
    dnsmasq)
      printf '%s\t--no-daemon\t--no-resolv\t--no-hosts\t--addn-hosts=%s\t--port=%s\t--listen-address=127.0.0.1\t--bind-interfaces\t--cache-size=10000' \
        "$bin" "$PEER_DIR/hosts" "$port" ;;
  esac
}
PEER_COMMANDS="" PEER_NEIGHBOURS=""
for peer in $PEERS; do
  case $peer in
    squid) bin=$(command -v squid || echo /usr/sbin/squid) ;;
    tinyproxy) bin=$(command -v tinyproxy || echo /usr/bin/tinyproxy) ;;
    dnsmasq) bin=/usr/sbin/dnsmasq ;;
    *) die "unknown peer $peer (squid, tinyproxy, dnsmasq)" ;;
  esac
  if [[ ! -x $bin ]]; then
    log "$peer not installed: not measured"
    continue
  fi
  PEER_COMMANDS+="$peer"$'\t'"$(peer_line "$peer" "$bin" "$PEER_DIR/$peer")"$'\n'
  PEER_NEIGHBOURS+="$peer"$'\t'"$(peer_line "$peer" "$bin" "$PEER_DIR/$peer-neighbour")"$'\n'
done

mkdir -p "$ROOT/bench/out"
cd "$ROOT"
PEER_COMMANDS=$PEER_COMMANDS PEER_NEIGHBOURS=$PEER_NEIGHBOURS ROOT=$ROOT WORK=$WORK RUNS=$RUNS COUNT=$COUNT BOUNDARY_DIST=$BOUNDARY_DIST OUT_FILE="$ROOT/bench/out/memory-$STAMP.json" \
  "$BOUNDARY_NODE" "$ROOT/bench/memory/measure.mjs"
