// Micro-benchmark for bench/proxy.sh's profile notes: the cost of one forward-request audit event in boundary,
// stage by stage (outcome -> AuditEvent -> shorthand + OCSF JSON -> line -> buffered fd), using the built dist/
// modules. Writes to /dev/null only; no sockets. Usage: node event-cost.mjs [N=50000] [--pino]
// (build first: npx tsc -p tsconfig.json). BENCH_DIST=<dir> measures another build (say, a copy of dist/ from
// before a change). Prints µs per event for each stage: best and median of ROUNDS rounds.

import { randomUUID } from 'node:crypto';
import { openSync } from 'node:fs';
import { pino } from 'pino';
import { Registry } from 'prom-client';

const dist = process.env.BENCH_DIST === undefined ? new URL('../../dist/', import.meta.url) : new URL(`file://${process.env.BENCH_DIST.replace(/\/?$/, '/')}`);
const events = await import(new URL('chain/events.js', dist).href).catch(() => import(new URL('proxy/events.js', dist).href));
const ocsfModule = await import(new URL('telemetry/ocsf.js', dist).href);
const loggerModule = await import(new URL('telemetry/logger.js', dist).href);
const { createAuditSink } = await import(new URL('telemetry/audit.js', dist).href);
const ocsfJson = await import(new URL('telemetry/ocsf-json.js', dist).href).catch(() => undefined);
const destinationModule = await import(new URL('telemetry/log-destination.js', dist).href).catch(() => undefined);
const { beginOutcome, outcomeEvent, emitOutcome, createProxyMetrics } = events;
const { toOcsf, toShorthand, cleanText } = ocsfModule;
const { createLogger, redactPaths } = loggerModule;

const encodeOld = Buffer.allocUnsafeSlow(65_536);
const N = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 50_000);
const WITH_PINO = process.argv.includes('--pino');
/** --only=TEXT runs just the stages whose label contains TEXT. */
const ONLY = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const ROUNDS = 9;
/** Events per event-loop turn: a few requests' worth. */
const BATCH = 50;
const devNull = openSync('/dev/null', 'w');

/** A forward GET outcome as l7.ts/forward.ts fill it in for an allowed request. */
function outcome() {
  const o = beginOutcome('forward', 'http', { remoteAddress: '127.0.0.1', remotePort: 51234 });
  o.method = 'GET';
  o.host = 'origin.bench.test';
  o.port = 8080;
  o.path = '/';
  o.generation = 1;
  o.policyHash = '53516fa386ec2de54484a0ac874820e776ed956d371d8d8bf021fa6f65698d2f';
  o.policy = 'bench-origin';
  o.engine = 'policy';
  o.extra = { rule: undefined, endpoint: 'bench_origin/0', identity: undefined };
  o.verdict = 'allow';
  o.reason = 'allowed';
  o.detail = 'endpoint origin.bench.test:8080 of policy bench-origin';
  o.status = 200;
  return o;
}

/** The production stdout destination on /dev/null: the build's own when it exports one, else the one
 *  logger.ts built before it did (sonic-boom buffer mode, Buffer.from per line). */
function productionDestination() {
  if (destinationModule !== undefined) return destinationModule.createBufferedDestination(devNull);
  const boom = pino.destination({ dest: devNull, sync: false, contentMode: 'buffer', minLength: 16_384, maxWrite: 65_536, periodicFlush: 200 });
  return { write: (chunk) => boom.write(Buffer.from(chunk)), flush: (cb) => boom.flush(cb) };
}

/**
 * µs of process CPU (user + system, every thread: on the proxy's one pinned core the thread pool's write(2)
 * calls compete with it) per call of `fn`, best and median of ROUNDS rounds. Calls run in batches with an
 * event-loop turn between them, as requests do, so a destination drains instead of buffering a whole round.
 */
async function time(label, fn) {
  if (ONLY !== undefined && !label.includes(ONLY)) return undefined;
  const runs = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < N; i += BATCH) {
      for (let j = i; j < i + BATCH; j++) fn(j);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const used = process.cpuUsage(start);
    runs.push(used.user + used.system);
  }
  runs.sort((a, b) => a - b);
  const best = runs[0] / N;
  const median = runs[Math.floor(ROUNDS / 2)] / N;
  console.log(`${best.toFixed(2).padStart(7)} ${median.toFixed(2).padStart(7)}  ${label}`);
  return best;
}

const o = outcome();
const event = outcomeEvent(o);
const meta = { time: Date.now(), uid: randomUUID() };
const ocsf = toOcsf(event, meta);
const line = toShorthand(event);
const json = JSON.stringify(ocsf);
let sinkSeen = 0;

console.log(`audit event cost, ${N} events, ${ROUNDS} rounds (node ${process.version}, dist ${dist.pathname})`);
console.log(`line: ${json.length + line.length + 40} chars`);
console.log('   best  median  µs CPU/event');
await time('outcomeEvent(o)                     Outcome -> AuditEvent', () => outcomeEvent(o));
await time('toShorthand(event)                  shorthand text (msg)', () => toShorthand(event));
await time('randomUUID()                        OCSF metadata.uid', () => randomUUID());
await time('toOcsf(event, meta)                 OCSF object (subscribers)', () => toOcsf(event, meta));
await time('JSON.stringify(toOcsf(event, meta)) OCSF JSON, the old log path', () => JSON.stringify(toOcsf(event, meta)));
if (ocsfJson !== undefined) {
  const render = ocsfJson.createOcsfJsonRenderer();
  await time('render(event, meta)                 OCSF JSON, hand-built (ocsf-json.ts)', () => render(event, meta));
  const flat = Buffer.allocUnsafeSlow(65_536);
  await time('  + encoded to bytes                (flattening the string tree is per piece)', () => flat.write(render(event, meta), 0));
}
await time('JSON.stringify(toOcsf()) + encoded  the old log path, to bytes', () => Buffer.allocUnsafeSlow(0) && encodeOld.write(JSON.stringify(toOcsf(event, meta)), 0));
await time('cleanText(message)                  one string', () => cleanText(event.message));

const discard = createLogger({ format: 'json', destination: { write: () => true } });
// Older builds (BENCH_DIST) export createLineWriter; newer ones only the raw writer it was built on.
const raw = loggerModule.createRawLineWriter?.(discard, 'ocsf');
const writeLine =
  loggerModule.createLineWriter?.(discard, 'ocsf') ?? ((json, msg) => raw.write(`${raw.fieldPrefix}${json},"msg":${JSON.stringify(msg)}${raw.end}`));
await time('writeLine(json, msg)                line assembly only (destination discards)', () => writeLine(json, line));
const production = productionDestination();
const fullLine = `{"level":30,"time":${meta.time},"ocsf":${json},"msg":${JSON.stringify(line)}}\n`;
await time('destination.write(line)             stdout destination on /dev/null', () => production.write(fullLine));

const metrics = createProxyMetrics(new Registry());
await time('metrics.decisions.inc(labels)       prom-client counter, label object', () =>
  metrics.decisions.inc({ adapter: o.adapter, verdict: o.verdict, reason: o.reason }),
);
if (typeof metrics.countDecision === 'function') {
  await time('metrics.countDecision(a, v, r)       counted, added to the counter on scrape', () => metrics.countDecision(o.adapter, o.verdict, o.reason));
}

const sink = createAuditSink({ logger: createLogger({ format: 'json', destination: productionDestination() }), now: Date.now, format: 'json' });
await time('sink.emit(outcomeEvent(o))          the whole audit path, production destination', () => sink.emit(outcomeEvent(o)));
await time('emitOutcome(sink, metrics, o)       what forward.ts calls per request', () => emitOutcome(sink, metrics, o));
// A new path per request: no two events alike (the worst case for a memo of lines).
const varying = outcome();
let pathCount = 0;
await time('emitOutcome, a new path every request  (nothing repeats)', () => {
  varying.path = `/items/${pathCount++}`;
  emitOutcome(sink, metrics, varying);
});
sink.subscribe(() => sinkSeen++);
await time('emitOutcome, one subscriber         (control channel attached)', () => emitOutcome(sink, metrics, o));
const shorthand = createAuditSink({ logger: createLogger({ format: 'shorthand', destination: productionDestination() }), now: Date.now, format: 'shorthand' });
await time('emitOutcome, --log-format shorthand', () => emitOutcome(shorthand, metrics, o));

if (WITH_PINO) {
  const plain = pino({ base: null }, productionDestination());
  await time('pino.info({ocsf}, line), no redact  (prebuilt ocsf)', () => plain.info({ ocsf }, line));
  const redacted = pino({ base: null, redact: { paths: redactPaths(), censor: '[redacted]' } }, productionDestination());
  await time('pino.info({ocsf}, line), boundary redact paths (prebuilt ocsf)', () => redacted.info({ ocsf }, line));
}

await new Promise((resolve) => setTimeout(resolve, 300));
if (ONLY === undefined && sinkSeen === 0) throw new Error('subscriber saw nothing');

