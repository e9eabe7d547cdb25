// Micro-benchmark for bench/proxy.sh's profile notes: the cost of one forward-request audit event in boundary,
// stage by stage (outcome -> AuditEvent -> shorthand + OCSF -> pino line with redaction -> file), using the
// built dist/ modules. Writes to /dev/null and one temp file; no sockets. Usage: node event-cost.mjs [N=50000]
// (build first: npx tsc -p tsconfig.json). Prints µs per event for each stage, best of 5 rounds.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';

const dist = new URL('../../dist/', import.meta.url);
const { beginOutcome, outcomeEvent, emitOutcome, createProxyMetrics } = await import(new URL('proxy/events.js', dist).href);
const { toOcsf, toShorthand, cleanText } = await import(new URL('telemetry/ocsf.js', dist).href);
const { createAuditSink } = await import(new URL('telemetry/audit.js', dist).href);
const { createLogger, redactPaths } = await import(new URL('telemetry/logger.js', dist).href);

const N = Number(process.argv[2] ?? 50_000);
const ROUNDS = 7;
const dir = mkdtempSync(join(tmpdir(), 'boundary-event-cost-'));

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
  o.engine = 'opa';
  o.extra = { rule: undefined, endpoint: 'bench_origin/0', identity: undefined };
  o.verdict = 'allow';
  o.reason = 'allowed';
  o.detail = 'endpoint origin.bench.test:8080 of policy bench-origin';
  o.status = 200;
  return o;
}

// Rendering costs are measured into /dev/null so disk speed does not blur them; one line writes a real file.
function destination(name) {
  return pino.destination({ dest: name === undefined ? '/dev/null' : join(dir, name), sync: false, minLength: 0 });
}

async function time(label, fn) {
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) fn(i);
    const dt = performance.now() - t0;
    best = Math.min(best, dt);
    // Let sonic-boom drain between rounds so a full buffer is not what we measure.
    await new Promise((r) => setImmediate(r));
  }
  const us = (best * 1000) / N;
  console.log(`${us.toFixed(2).padStart(8)} µs/event  ${label}`);
  return us;
}

const o = outcome();
const event = outcomeEvent(o);
const meta = { time: Date.now(), uid: randomUUID() };
const ocsf = toOcsf(event, meta);
const line = toShorthand(event);

console.log(`audit event cost, ${N} events × best of ${ROUNDS} rounds (node ${process.version})`);
await time('outcomeEvent(o)                     Outcome -> AuditEvent', () => outcomeEvent(o));
await time('toShorthand(event)                  shorthand text', () => toShorthand(event));
await time('randomUUID()                        OCSF metadata.uid', () => randomUUID());
await time('toOcsf(event, meta)                 OCSF object', () => toOcsf(event, { time: 1, uid: meta.uid }));
await time('cleanText(message)                  one string (toOcsf calls it ~10x)', () => cleanText(event.message));
await time('new URL(url)                        toOcsf re-parses the URL it was given', () => new URL('http://origin.bench.test:8080/'));
await time('JSON.stringify({ocsf, msg})         serialisation lower bound', () => JSON.stringify({ level: 30, time: 1, ocsf, msg: line }));

const plain = pino({ base: null }, destination());
await time('pino.info({ocsf}, line), no redact  (prebuilt ocsf)', () => plain.info({ ocsf }, line));
const redacted = pino({ base: null, redact: { paths: redactPaths(), censor: '[redacted]' } }, destination());
await time('pino.info({ocsf}, line), boundary redact paths (prebuilt ocsf)', () => redacted.info({ ocsf }, line));

const logger = createLogger({ format: 'json', destination: destination() });
const sink = createAuditSink({ logger, now: Date.now, format: 'json' });
await time('sink.emit(outcomeEvent(o))          the whole audit path (boundary logger)', () => sink.emit(outcomeEvent(o)));
const metrics = createProxyMetrics(new Registry());
await time('metrics.decisions.inc(labels)       prom-client counter alone', () =>
  metrics.decisions.inc({ adapter: o.adapter, verdict: o.verdict, reason: o.reason }),
);
await time('emitOutcome(sink, metrics, o)       what forward.ts calls per request', () => emitOutcome(sink, metrics, o));
const fileSink = createAuditSink({ logger: createLogger({ format: 'json', destination: destination('sink.log') }), now: Date.now, format: 'json' });
await time('sink.emit to a real file            (as `run` does, stdout redirected to a file)', () => fileSink.emit(outcomeEvent(o)));
const quiet = createAuditSink({
  logger: pino({ base: null }, destination()),
  now: Date.now,
  format: 'json',
});
await time('sink.emit, logger without redact    (what dropping wildcard redaction buys)', () => quiet.emit(outcomeEvent(o)));

await new Promise((r) => setTimeout(r, 200));
rmSync(dir, { recursive: true, force: true });
