// Micro-benchmark behind docs/events.md#why-two-layers: the JSON audit line of one forward-HTTP event written
// three ways to a buffered /dev/null destination: line templates over the fragment renderer (audit-line.ts),
// the fragment renderer alone (ocsf-json.ts), and JSON.stringify(toOcsf()). Runs the source through tsx:
//   node --import tsx bench/proxy/ocsf-layers.mjs [N=200000] [RUNS=5]
// Prints the median ns of CPU per event over RUNS interleaved runs, for an allow and a deny event.

import { openSync } from 'node:fs';

const src = new URL('../../src/', import.meta.url);
const load = (path) => import(new URL(path, src).href);
const { beginOutcome, outcomeEvent } = await load('chain/events.ts');
const { createEventUids, uidText } = await load('telemetry/event-uid.ts');
const { toOcsf, toShorthand } = await load('telemetry/ocsf.ts');
const { createOcsfJsonRenderers } = await load('telemetry/ocsf-json.ts');
const { createAuditLineWriter } = await load('telemetry/audit-line.ts');
const { createLogger, createRawLineWriter } = await load('telemetry/logger.ts');
const { createBufferedDestination } = await load('telemetry/log-destination.ts');
const { auditLevel, createAuditSink } = await load('telemetry/audit.ts');

const N = Number(process.argv[2] ?? 200_000);
const RUNS = Number(process.argv[3] ?? 5);
/** Events per event-loop turn, so the destination drains as it does under load. */
const BATCH = 50;
const devNull = openSync('/dev/null', 'w');

function outcome(verdict) {
  const o = beginOutcome('forward', 'http', { remoteAddress: '127.0.0.1', remotePort: 51234 });
  o.method = 'GET';
  o.host = 'origin.bench.test';
  o.port = 8080;
  o.path = verdict === 'allow' ? '/' : '/admin';
  o.generation = 1;
  o.policyHash = '53516fa386ec2de54484a0ac874820e776ed956d371d8d8bf021fa6f65698d2f';
  o.policy = verdict === 'allow' ? 'bench-origin' : undefined;
  o.engine = 'policy';
  o.extra = { rule: undefined, endpoint: verdict === 'allow' ? 'bench_origin/0' : undefined, identity: undefined };
  o.verdict = verdict;
  o.reason = verdict === 'allow' ? 'allowed' : 'no-rule-matched';
  o.detail = verdict === 'allow' ? 'endpoint origin.bench.test:8080 of policy bench-origin' : 'no policy allows origin.bench.test:8080';
  o.status = verdict === 'allow' ? 200 : 403;
  return o;
}

function rawWriter() {
  return createRawLineWriter(createLogger({ format: 'json', destination: createBufferedDestination(devNull) }), 'ocsf');
}

/** name -> (event) => void, each on its own destination. */
function variants() {
  const templated = createAuditLineWriter(rawWriter(), undefined);
  const fragRaw = rawWriter();
  const renderers = createOcsfJsonRenderers();
  const strRaw = rawWriter();
  // The sink's own uids: bytes for the line writer, their text where an object keeps one.
  const uid = createEventUids();
  return {
    'templates + fragments (now)': (event) => templated(event, Date.now(), uid(), auditLevel(event)),
    'fragments only': (event) =>
      fragRaw.write(`${fragRaw.fieldPrefix}${renderers.render(event, { time: Date.now(), uid: uidText(uid()) })},"msg":${JSON.stringify(toShorthand(event))}${fragRaw.end}`, auditLevel(event)),
    'JSON.stringify(toOcsf())': (event) =>
      strRaw.write(`${strRaw.fieldPrefix}${JSON.stringify(toOcsf(event, { time: Date.now(), uid: uidText(uid()) }))},"msg":${JSON.stringify(toShorthand(event))}${strRaw.end}`, auditLevel(event)),
  };
}

async function cpuPerEvent(fn, o) {
  const start = process.cpuUsage();
  for (let i = 0; i < N; i += BATCH) {
    for (let j = 0; j < BATCH; j++) fn(outcomeEvent(o));
    await new Promise((resolve) => setImmediate(resolve));
  }
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / N;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`OCSF JSON line, ${N} events x ${RUNS} interleaved runs, median ns CPU/event (node ${process.version})`);
for (const verdict of ['allow', 'deny']) {
  const o = outcome(verdict);
  const ways = variants();
  const sink = createAuditSink({ logger: createLogger({ format: 'json', destination: createBufferedDestination(devNull) }), now: Date.now, format: 'json' });
  ways['whole sink.emit (reference)'] = (event) => sink.emit(event);
  const ns = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  for (const fn of Object.values(ways)) await cpuPerEvent(fn, o); // warm-up
  for (let r = 0; r < RUNS; r++) for (const [k, fn] of Object.entries(ways)) ns[k].push(await cpuPerEvent(fn, o));
  console.log(`${verdict}:`);
  for (const [k, xs] of Object.entries(ns)) console.log(`  ${median(xs).toFixed(0).padStart(6)}  ${k}   [${xs.map((x) => x.toFixed(0)).join(' ')}]`);
}
