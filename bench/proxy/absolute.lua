-- wrk script for bench/proxy.sh: sends every request with the request line and Host the bench asks for
-- (BENCH_PATH, e.g. an absolute-form http://origin.bench.test:PORT/ for a forward proxy; BENCH_HOST), and at
-- the end prints one WRKJSON line with counts and latency percentiles (microseconds) for the bench to parse.
local path = os.getenv("BENCH_PATH")
local host = os.getenv("BENCH_HOST")
wrk.method = "GET"
if path and path ~= "" then wrk.path = path end
if host and host ~= "" then wrk.headers["Host"] = host end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"status_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
