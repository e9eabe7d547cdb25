#!/usr/bin/env bash
# Policy DNS benchmark: dnsperf against boundary's DNS server, a bare Node UDP responder (the Node floor) and dnsmasq
# answering the same names from a hosts file, interleaved in one run so all see the same machine. Loopback only,
# bounded in time. Two load shapes:
#   paced       CLIENTS x OUTSTANDING (4 x 200): the shape of earlier READMEs, with latency at a fixed rate
#   saturating  SAT_CLIENTS x SAT_OUTSTANDING (8 x 10000, "unlimited outstanding"): issue 16's one-core shape
# Servers (SERVERS, default all):
#   boundary            production form (bench/dns-server.ts 'ocsf'): metrics, aggregated OCSF events, real sink
#   boundary-per-query  the same with one OCSF line per query (no aggregation), as before issue 16
#   boundary-off        no metrics, events dropped: boundary minus this is what the audit trail costs
#   node-floor          bench/dns-floor.ts: copy the query, append one answer, send after the loop turn (as boundary
#                       does); no DNS work at all
#   node-floor-each     not in the default set: the same floor sending each answer as it is made
#   dnsmasq             --cache-size=10000, hosts file, no upstream (refused names: REFUSED)
#   boundary-ref        not in the default set: `boundary` with src/ as committed at BOUNDARY_REF (e.g. main) and this
#                       tree's bench/ and test/harness/ (the same bench stack), for before/after in the same rounds
#   boundary-ref-workers  not in the default set: `boundary-workers` built the same way from BOUNDARY_REF
#   boundary-cluster    not in the default set: multi-core scaling, reported apart from the one-core ratio.
#                       CLUSTER_WORKERS (2) node:cluster workers of `boundary` sharing one UDP socket
#                       (bench/dns-cluster.ts), on CLUSTER_CPUS (0,1); its CPU is summed over the workers.
#   boundary-workers    not in the default set: `boundary` with --dns-workers' replay workers: DNS_WORKERS (2) threads
#                       on SO_REUSEPORT sockets of the port beside the main thread's, on WORKERS_CPUS (0,1), run by
#                       WORKERS_NODE (Node 22.12+: Node 20's dgram has no reusePort; default the image's Node as
#                       test/harness/image-node.ts installs it). Its CPU is summed over the process's threads.
# NODE_BIN (default node) runs every other Node server: NODE_BIN=$WORKERS_NODE compares all on one Node.
#   bench/dns.sh                                  # 3 rounds x 10 s per case and shape (about 12 minutes)
#   RUNS=1 SECONDS_PER_RUN=3 SHAPES=saturating bench/dns.sh
#   SERVERS="boundary boundary-workers boundary-cluster node-floor dnsmasq" SHAPES=saturating bench/dns.sh
#   BOUNDARY_REF=main SERVERS="boundary boundary-workers boundary-ref-workers" SHAPES=saturating bench/dns.sh
# Each server is pinned to SERVER_CPU (one core), dnsperf to CLIENT_CPU. Prints markdown tables.
set -euo pipefail

RUNS=${RUNS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
LATENCY_SECONDS=${LATENCY_SECONDS:-3}
LATENCY_QPS=${LATENCY_QPS:-10000}
NAMES=${NAMES:-100}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-200}
SAT_CLIENTS=${SAT_CLIENTS:-8}
SAT_OUTSTANDING=${SAT_OUTSTANDING:-10000}
SHAPES=${SHAPES:-paced saturating}
SERVERS=${SERVERS:-boundary boundary-per-query boundary-off node-floor dnsmasq}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLUSTER_WORKERS=${CLUSTER_WORKERS:-2}
CLUSTER_CPUS=${CLUSTER_CPUS:-0,1}
DNS_WORKERS=${DNS_WORKERS:-2}
WORKERS_CPUS=${WORKERS_CPUS:-0,1}
WORKERS_NODE=${WORKERS_NODE:-/tmp/boundary-node-22/node_modules/node/bin/node}
NODE_BIN=${NODE_BIN:-node}
# Where boundary's OCSF lines go (production writes them to stdout, usually a pipe or file).
LOG_FILE=${LOG_FILE:-/dev/null}
# unlimited: boundary's refused and new-name rate limits lifted, so every query takes the full answer path (as each of
# dnsmasq's does); default: the shipped limits (a refusal flood is then answered REFUSED without events).
GUARD=${GUARD:-unlimited}

root=$(cd "$(dirname "$0")/.." && pwd)
pids=()
work=
build=
# Set before the first folder is made: a run that stops at any point leaves none behind.
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf ${work:+"$work"} ${build:+"$build"}
}
trap cleanup EXIT
work=$(mktemp -d /tmp/boundary-dns-bench.XXXXXX)
# The bundles sit under the project, so the modules they load at run time (dns-packet, pino) resolve.
mkdir -p "$root/bench/out"
build=$(mktemp -d "$root/bench/out/dns-bench.XXXXXX")

for tool in dnsperf taskset dig /usr/sbin/dnsmasq; do command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 2; }; done

has() { [[ " $SERVERS " == *" $1 "* ]]; }
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# The same names for every server: allowed names resolve (boundary: synthetic answers, upstream cached;
# dnsmasq: its hosts file); refused names are outside the policy (dnsmasq: not local, no upstream -> REFUSED).
for i in $(seq 0 $((NAMES - 1))); do echo "allowed-$i.bench.test A"; done >"$work/allowed.txt"
for i in $(seq 0 $((NAMES - 1))); do echo "refused-$i.other.test A"; done >"$work/refused.txt"
for i in $(seq 0 $((NAMES - 1))); do echo "198.18.$((i / 256)).$((i % 256)) allowed-$i.bench.test"; done >"$work/hosts"

# Run compiled JavaScript, as production does (no tsx transform in the measured process).
bundle() { # source.ts, out.mjs
  "$root/node_modules/.bin/esbuild" "$1" --bundle --platform=node --format=esm --target=node20 \
    --log-level=warning --outfile="$2" \
    --banner:js="import { createRequire as bannerRequire } from 'node:module'; const require = bannerRequire(import.meta.url);"
}
for entry in dns-server dns-floor dns-cluster; do bundle "$root/bench/$entry.ts" "$build/$entry.mjs"; done
# The replay workers (loaded by dns-server.mjs when asked for) and their thread entry, beside dns-server.mjs where
# src/dns/workers.ts looks for it.
bundle "$root/bench/dns-replay.ts" "$build/dns-replay.mjs"
bundle "$root/src/dns/replay-worker.ts" "$build/replay-worker.js"
if has boundary-workers || has boundary-ref-workers; then
  [ -x "$WORKERS_NODE" ] || { echo "boundary-workers needs WORKERS_NODE, a Node 22.12+ binary (npm install --prefix /tmp/boundary-node-22 node@22)" >&2; exit 2; }
fi
if has boundary-ref || has boundary-ref-workers; then
  [ -n "${BOUNDARY_REF:-}" ] || { echo "boundary-ref needs BOUNDARY_REF" >&2; exit 2; }
  mkdir -p "$build/ref" "$build/ref-bin"
  git -C "$root" archive "$BOUNDARY_REF" src package.json | tar -x -C "$build/ref"
  mkdir -p "$build/ref/test" "$build/ref/bench" && cp "$root"/bench/*.ts "$build/ref/bench/" && cp -r "$root/test/harness" "$build/ref/test/"
  # Apart from this tree's bundles: dns-server.mjs loads the replay workers from beside itself.
  bundle "$build/ref/bench/dns-server.ts" "$build/ref-bin/dns-server.mjs"
  if has boundary-ref-workers; then
    bundle "$build/ref/bench/dns-replay.ts" "$build/ref-bin/dns-replay.mjs"
    bundle "$build/ref/src/dns/replay-worker.ts" "$build/ref-bin/replay-worker.js"
  fi
fi

declare -A port pid
start() { # name, CPUs, then the command
  local name=$1 cpus=$2
  shift 2
  taskset -c "$cpus" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  pid[$name]=$!
}
for server in $SERVERS; do
  port[$server]=$(free_port)
  case $server in
    boundary) start "$server" "$SERVER_CPU" "$NODE_BIN" "$build/dns-server.mjs" "${port[$server]}" "$NAMES" ocsf "$LOG_FILE" "$GUARD" ;;
    boundary-ref) start "$server" "$SERVER_CPU" "$NODE_BIN" "$build/ref-bin/dns-server.mjs" "${port[$server]}" "$NAMES" ocsf "$LOG_FILE" "$GUARD" ;;
    boundary-per-query) start "$server" "$SERVER_CPU" "$NODE_BIN" "$build/dns-server.mjs" "${port[$server]}" "$NAMES" ocsf-per-query "$LOG_FILE" "$GUARD" ;;
    boundary-off) start "$server" "$SERVER_CPU" "$NODE_BIN" "$build/dns-server.mjs" "${port[$server]}" "$NAMES" off /dev/null "$GUARD" ;;
    boundary-cluster)
      start "$server" "$CLUSTER_CPUS" "$NODE_BIN" "$build/dns-cluster.mjs" "$CLUSTER_WORKERS" "${port[$server]}" "$NAMES" ocsf "$LOG_FILE" "$GUARD"
      ;;
    boundary-workers)
      start "$server" "$WORKERS_CPUS" "$WORKERS_NODE" "$build/dns-server.mjs" "${port[$server]}" "$NAMES" ocsf "$LOG_FILE" "$GUARD" "$DNS_WORKERS"
      ;;
    boundary-ref-workers)
      start "$server" "$WORKERS_CPUS" "$WORKERS_NODE" "$build/ref-bin/dns-server.mjs" "${port[$server]}" "$NAMES" ocsf "$LOG_FILE" "$GUARD" "$DNS_WORKERS"
      ;;
    node-floor) start "$server" "$SERVER_CPU" "$NODE_BIN" "$build/dns-floor.mjs" "${port[$server]}" ;;
    node-floor-each) start "$server" "$SERVER_CPU" "$NODE_BIN" "$build/dns-floor.mjs" "${port[$server]}" 4194304 0 each ;;
    dnsmasq)
      start "$server" "$SERVER_CPU" /usr/sbin/dnsmasq --no-daemon --no-resolv --no-hosts --addn-hosts="$work/hosts" \
        --port="${port[$server]}" --listen-address=127.0.0.1 --bind-interfaces --cache-size=10000
      ;;
    *) echo "unknown server $server" >&2; exit 2 ;;
  esac
done
for server in $SERVERS; do
  ok=""
  for _ in $(seq 1 100); do
    if dig +short +tries=1 +time=1 @127.0.0.1 -p "${port[$server]}" allowed-0.bench.test >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || { echo "$server did not start" >&2; cat "$work/$server.err" >&2; exit 1; }
done

# The process and its children (the cluster's workers).
cpu_ticks() { cat "/proc/$1/stat" $(pgrep -P "$1" | sed 's|.*|/proc/&/stat|') 2>/dev/null | awk '{t += $14 + $15} END {print t}'; }
hz=$(getconf CLK_TCK)

# One dnsperf run; appends "qps avg_ms p99_ms lost codes cpu_us_per_query" to $5. -v gives per-query latency
# for the p99. The server's CPU time per answered query is the figure that survives a noisy machine.
measure() {
  local server=$1 clients=$2 outstanding=$3 data=$4 seconds=$5 out=$6 rate=${7:-}
  local args=(-s 127.0.0.1 -p "${port[$server]}" -d "$data" -l "$seconds" -c "$clients" -q "$outstanding" -v)
  [ -n "$rate" ] && args+=(-Q "$rate")
  local before after
  before=$(cpu_ticks "${pid[$server]}")
  taskset -c "$CLIENT_CPU" dnsperf "${args[@]}" >"$work/run.txt" 2>&1 || true
  after=$(cpu_ticks "${pid[$server]}")
  local qps avg lost codes p99 done_q cpu
  qps=$(awk '/Queries per second/ {print $4}' "$work/run.txt")
  avg=$(awk '/Average Latency/ {printf "%.3f", $4 * 1000}' "$work/run.txt")
  lost=$(awk '/Queries lost/ {print $3}' "$work/run.txt")
  done_q=$(awk '/Queries completed/ {print $3}' "$work/run.txt")
  codes=$(awk -F: '/Response codes/ {gsub(/^ +/, "", $2); gsub(/ \([0-9.]+%\)/, "", $2); gsub(/ /, "_", $2); print $2}' "$work/run.txt")
  p99=$(awk '/^> / {print $5}' "$work/run.txt" | sort -n | awk '{a[NR] = $1} END {i = int(NR * 0.99); if (i < 1) i = 1; if (NR) printf "%.3f", a[i] * 1000; else print "n/a"}')
  cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v n="${done_q:-0}" 'BEGIN {if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print "n/a"}')
  echo "${qps:-0} ${avg:-n/a} ${p99} ${lost:-?} ${codes:-none} ${cpu}" >>"$out"
}

shape_args() { # shape -> "clients outstanding"
  if [ "$1" = saturating ]; then echo "$SAT_CLIENTS $SAT_OUTSTANDING"; else echo "$CLIENTS $OUTSTANDING"; fi
}

# Warm-up: JIT, the wire cache and the synthetic mappings (the only upstream queries of the run).
for server in $SERVERS; do
  for set in allowed refused; do measure "$server" "$CLIENTS" "$OUTSTANDING" "$work/$set.txt" 2 "$work/warmup"; done
done

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for run in $(seq 1 "$RUNS"); do
  for shape in $SHAPES; do
    read -r c q < <(shape_args "$shape")
    for set in allowed refused; do
      for server in $SERVERS; do
        measure "$server" "$c" "$q" "$work/$set.txt" "$SECONDS_PER_RUN" "$work/$shape-$server-$set.tput"
        if [ "$shape" = paced ]; then
          measure "$server" "$c" "$q" "$work/$set.txt" "$LATENCY_SECONDS" "$work/$shape-$server-$set.lat" "$LATENCY_QPS"
        fi
      done
    done
  done
  echo "round $run/$RUNS done" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
col() { [ -f "$1" ] || { echo n/a; return; }; awk -v c="$2" '{print $c}' "$1" | grep -v n/a | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a != "n/a" && b != "n/a" && b > 0) printf "%.2fx", a / b}'; }
# Column COL of A over the same column of B, round by round (one line of a .tput file per round).
per_round() { paste -d' ' <(awk -v c="$1" '{print $c}' "$2") <(awk -v c="$1" '{print $c}' "$3") | awk '{if ($2 > 0) printf "%.2f ", $1 / $2}'; }

echo
echo "dnsperf, ${RUNS} interleaved rounds x ${SECONDS_PER_RUN} s per case; each server pinned to CPU ${SERVER_CPU}, dnsperf to CPU ${CLIENT_CPU}; medians."
echo "Node: $("$NODE_BIN" --version)$( (has boundary-workers || has boundary-ref-workers) && echo "; boundary-workers: $("$WORKERS_NODE" --version), ${DNS_WORKERS} workers on CPUs ${WORKERS_CPUS}, which dnsperf shares (a lower bound)")."
echo "qps ratio = server/dnsmasq median qps; CPU ratio = dnsmasq/server CPU time per answered query (the implied one-core"
echo "capacity ratio, robust to other load on the machine). boundary's OCSF lines go to ${LOG_FILE}; rate limits: ${GUARD}."
for shape in $SHAPES; do
  read -r c q < <(shape_args "$shape")
  echo
  echo "**${shape}**: ${c} clients x ${q} outstanding"
  echo
  if [ "$shape" = paced ]; then
    echo "| case | server | qps | qps ratio | CPU µs/query | CPU ratio | avg ms | p99 ms | avg ms @${LATENCY_QPS} | p99 ms @${LATENCY_QPS} | lost | rcodes (last run) |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  else
    echo "| case | server | qps | qps ratio | CPU µs/query | CPU ratio | avg ms | p99 ms | lost | rcodes (last run) |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
  fi
  for set in allowed refused; do
    d=$(col "$work/$shape-dnsmasq-$set.tput" 1)
    dc=$(col "$work/$shape-dnsmasq-$set.tput" 6)
    for server in $SERVERS; do
      t="$work/$shape-$server-$set.tput"
      l="$work/$shape-$server-$set.lat"
      qps=$(col "$t" 1)
      cpu=$(col "$t" 6)
      row="| $set | $server | $(printf '%.0f' "$qps") | $(ratio "$qps" "$d") | $cpu | $(ratio "$dc" "$cpu") | $(col "$t" 2) | $(col "$t" 3)"
      [ "$shape" = paced ] && row="$row | $(col "$l" 2) | $(col "$l" 3)"
      echo "$row | $(awk '{s += $4} END {print s}' "$t") | $(tail -1 "$t" | awk '{print $5}') |"
    done
  done
  if has boundary && has boundary-off; then
    for set in allowed refused; do
      on=$(col "$work/$shape-boundary-$set.tput" 6)
      off=$(col "$work/$shape-boundary-off-$set.tput" 6)
      line="events + metrics cost ($shape, $set): $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.2f", a - b}') µs/query aggregated"
      if has boundary-per-query; then
        per=$(col "$work/$shape-boundary-per-query-$set.tput" 6)
        line="$line, $(awk -v a="$per" -v b="$off" 'BEGIN {printf "%.2f", a - b}') µs/query one line per query"
      fi
      echo
      echo "$line (CPU µs/query minus boundary-off's)"
    done
  fi
  if has boundary && has boundary-workers; then
    for set in allowed refused; do
      echo "per-round boundary-workers/boundary qps ($shape, $set): $(per_round 1 "$work/$shape-boundary-workers-$set.tput" "$work/$shape-boundary-$set.tput")"
      echo "per-round boundary-workers/boundary CPU µs per query ($shape, $set): $(per_round 6 "$work/$shape-boundary-workers-$set.tput" "$work/$shape-boundary-$set.tput")"
    done
  fi
  if has boundary-workers && has boundary-ref-workers; then
    for set in allowed refused; do
      echo "per-round boundary-workers/boundary-ref-workers CPU µs per query ($shape, $set): $(per_round 6 "$work/$shape-boundary-workers-$set.tput" "$work/$shape-boundary-ref-workers-$set.tput")"
    done
  fi
  # CPU per query of boundary over each other Node server's in the same round (below 1: boundary cheaper).
  for other in boundary-ref node-floor node-floor-each; do
    has boundary && has "$other" || continue
    for set in allowed refused; do
      echo "per-round boundary/$other CPU µs per query ($shape, $set): $(per_round 6 "$work/$shape-boundary-$set.tput" "$work/$shape-$other-$set.tput")"
    done
  done
  if has boundary && has dnsmasq; then
    for set in allowed refused; do
      echo "per-round boundary/dnsmasq qps ($shape, $set): $(per_round 1 "$work/$shape-boundary-$set.tput" "$work/$shape-dnsmasq-$set.tput")"
    done
  fi
done
for server in $SERVERS; do
  case $server in boundary*)
    kill "${pid[$server]}" 2>/dev/null || true
    wait "${pid[$server]}" 2>/dev/null || true
    echo "$server: $(cat "$work/$server.err")"
    ;;
  esac
done
