#!/usr/bin/env bash
# Policy DNS benchmark: dnsperf against boundary's DNS server and against dnsmasq answering the same names
# from a hosts file, interleaved in one run so both see the same machine. Loopback only, bounded in time.
#   bench/dns.sh                       # 5 rounds x 10 s per case (about 5 minutes)
#   RUNS=3 SECONDS_PER_RUN=5 bench/dns.sh
# Servers are pinned to SERVER_CPU (one core), dnsperf to CLIENT_CPU. Prints a markdown table.
set -euo pipefail

RUNS=${RUNS:-5}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
LATENCY_SECONDS=${LATENCY_SECONDS:-3}
LATENCY_QPS=${LATENCY_QPS:-10000}
NAMES=${NAMES:-100}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-200}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LOG_MODE=${LOG_MODE:-count}

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/boundary-dns-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

for tool in dnsperf taskset /usr/sbin/dnsmasq; do command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 2; }; done

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# The same names for both servers: allowed names resolve (boundary: synthetic answers, upstream cached;
# dnsmasq: its hosts file); refused names are outside the policy (dnsmasq: not local, no upstream -> REFUSED).
for i in $(seq 0 $((NAMES - 1))); do echo "allowed-$i.bench.test A"; done >"$work/allowed.txt"
for i in $(seq 0 $((NAMES - 1))); do echo "refused-$i.other.test A"; done >"$work/refused.txt"
for i in $(seq 0 $((NAMES - 1))); do echo "198.18.$((i / 256)).$((i % 256)) allowed-$i.bench.test"; done >"$work/hosts"

# Run compiled JavaScript, as production does (no tsx transform in the measured process).
"$root/node_modules/.bin/esbuild" "$root/bench/dns-server.ts" --bundle --platform=node --format=esm --target=node20 \
  --log-level=warning --outfile="$work/dns-server.mjs" \
  --banner:js="import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);"

boundary_port=$(free_port)
taskset -c "$SERVER_CPU" node "$work/dns-server.mjs" "$boundary_port" "$NAMES" "$LOG_MODE" >"$work/boundary.out" 2>"$work/boundary.err" &
pids+=($!)
boundary_pid=$!
dnsmasq_port=$(free_port)
taskset -c "$SERVER_CPU" /usr/sbin/dnsmasq --no-daemon --no-resolv --no-hosts --addn-hosts="$work/hosts" \
  --port="$dnsmasq_port" --listen-address=127.0.0.1 --bind-interfaces --cache-size=10000 >"$work/dnsmasq.out" 2>&1 &
pids+=($!)
dnsmasq_pid=$!
for _ in $(seq 1 100); do grep -q ready "$work/boundary.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$work/boundary.out" || { echo "boundary DNS did not start" >&2; cat "$work/boundary.err" >&2; exit 1; }
for _ in $(seq 1 50); do dig +short +tries=1 +time=1 @127.0.0.1 -p "$dnsmasq_port" allowed-0.bench.test >/dev/null 2>&1 && break; sleep 0.1; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# One dnsperf run; appends "qps avg_ms p99_ms lost codes cpu_us_per_query" to $5. -v gives per-query latency
# for the p99. The server's CPU time per answered query is the figure that survives a noisy machine.
measure() {
  local pid=$1 port=$2 data=$3 seconds=$4 out=$5 rate=${6:-}
  local args=(-s 127.0.0.1 -p "$port" -d "$data" -l "$seconds" -c "$CLIENTS" -q "$OUTSTANDING" -v)
  [ -n "$rate" ] && args+=(-Q "$rate")
  local before after
  before=$(cpu_ticks "$pid")
  taskset -c "$CLIENT_CPU" dnsperf "${args[@]}" >"$work/run.txt" 2>&1 || true
  after=$(cpu_ticks "$pid")
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

# Warm-up: JIT, the wire cache and the synthetic mappings (the only upstream queries of the run).
measure "$boundary_pid" "$boundary_port" "$work/allowed.txt" 2 "$work/warmup"
measure "$boundary_pid" "$boundary_port" "$work/refused.txt" 2 "$work/warmup"
measure "$dnsmasq_pid" "$dnsmasq_port" "$work/allowed.txt" 2 "$work/warmup"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for run in $(seq 1 "$RUNS"); do
  for set in allowed refused; do
    for server in boundary dnsmasq; do
      port=$boundary_port pid=$boundary_pid
      [ "$server" = dnsmasq ] && port=$dnsmasq_port pid=$dnsmasq_pid
      measure "$pid" "$port" "$work/$set.txt" "$SECONDS_PER_RUN" "$work/$server-$set.tput"
      measure "$pid" "$port" "$work/$set.txt" "$LATENCY_SECONDS" "$work/$server-$set.lat" "$LATENCY_QPS"
    done
  done
  echo "round $run/$RUNS done" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
col() { awk -v c="$2" '{print $c}' "$1" | grep -v n/a | median; }

echo
echo "qps ratio = boundary/dnsmasq median qps; CPU ratio = dnsmasq/boundary CPU time per answered query (implied one-core capacity ratio, robust to other load on the machine)."
echo "dnsperf ${CLIENTS} clients x ${OUTSTANDING} outstanding, ${RUNS} x ${SECONDS_PER_RUN} s per case; servers pinned to CPU ${SERVER_CPU}, dnsperf to CPU ${CLIENT_CPU}; medians."
echo "Latency at a fixed ${LATENCY_QPS} qps (${RUNS} x ${LATENCY_SECONDS} s) shows per-query cost without queueing; under saturation latency is mostly queueing."
echo
echo "| case | server | qps | CPU µs/query | avg ms (sat.) | p99 ms (sat.) | avg ms @${LATENCY_QPS} | p99 ms @${LATENCY_QPS} | lost | rcodes (last run) | qps ratio | CPU ratio |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"
for set in allowed refused; do
  b=$(col "$work/boundary-$set.tput" 1)
  d=$(col "$work/dnsmasq-$set.tput" 1)
  bc=$(col "$work/boundary-$set.tput" 6)
  dc=$(col "$work/dnsmasq-$set.tput" 6)
  for server in boundary dnsmasq; do
    t="$work/$server-$set.tput"
    l="$work/$server-$set.lat"
    ratio="" cpu_ratio=""
    if [ "$server" = boundary ]; then
      ratio=$(awk -v b="$b" -v d="$d" 'BEGIN {if (d > 0) printf "%.2fx", b / d}')
      # Implied single-core capacity ratio: dnsmasq's CPU per query over boundary's.
      cpu_ratio=$(awk -v b="$bc" -v d="$dc" 'BEGIN {if (b > 0) printf "%.2fx", d / b}')
    fi
    printf '| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$set" "$server" "$(col "$t" 1)" "$(col "$t" 6)" "$(col "$t" 2)" \
      "$(col "$t" 3)" "$(col "$l" 2)" "$(col "$l" 3)" "$(awk '{s += $4} END {print s}' "$t")" "$(tail -1 "$t" | awk '{print $5}')" "$ratio" "$cpu_ratio"
  done
done
echo
echo "per-run boundary/dnsmasq qps (allowed): $(paste -d' ' <(awk '{print $1}' "$work/boundary-allowed.tput") <(awk '{print $1}' "$work/dnsmasq-allowed.tput") | awk '{printf "%.2f ", $1 / $2}')"
echo "per-run boundary/dnsmasq qps (refused): $(paste -d' ' <(awk '{print $1}' "$work/boundary-refused.tput") <(awk '{print $1}' "$work/dnsmasq-refused.tput") | awk '{printf "%.2f ", $1 / $2}')"
kill "${pids[0]}" 2>/dev/null || true
wait "${pids[0]}" 2>/dev/null || true
echo "boundary server: $(cat "$work/boundary.err")"
