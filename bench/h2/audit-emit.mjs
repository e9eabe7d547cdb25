// bench/h2/audit-emit.mjs — two compiled trees' audit sinks side by side in one process, for the per-event work of an
// HTTP/2 stream's decision event too small to see through a noisy host's end-to-end runs: each tree's sink writes JSON
// lines to /dev/null through its own buffered destination, as boundary writes stdout. Blocks of emits of one L7 request
// event (a new source port each, as every stream has) alternate between the trees; prints the CPU per event of each and
// the median per-block ratio B/A.
//
// Usage: node bench/h2/audit-emit.mjs <dist A> <dist B>
import { openSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
const load = async (dir) => {
  const l = (f) => import(pathToFileURL(`${resolve(dir)}/${f}`).href);
  const [{ createAuditSink }, { createLogger }, { createBufferedDestination }] = await Promise.all([l('telemetry/audit.js'), l('telemetry/logger.js'), l('telemetry/log-destination.js')]);
  const logger = createLogger({ format: 'json', destination: createBufferedDestination(openSync('/dev/null', 'w')) });
  return createAuditSink({ logger, now: Date.now, format: 'json' });
};
const [a, b] = process.argv.slice(2);
if (a === undefined || b === undefined) throw new Error('usage: node bench/h2/audit-emit.mjs <dist A> <dist B>');
const sinks = [await load(a), await load(b)];
const event = (port) => ({
  class: 'HTTP', activity: 'GET', severity: 'INFO', action: 'ALLOWED', engine: 'policy', policy: 'bench',
  dst: { host: 'origin.bench.test', port: 40403 }, src: { ip: '127.0.0.1', port },
  http: { method: 'GET', url: 'https://origin.bench.test:40403/' }, message: 'L7_REQUEST allowed GET -/',
  statusDetail: 'L7_REQUEST allowed', detail: 'endpoint origin.bench.test:40403 of policy bench', generation: 1, policyHash: 'sha256:abc',
  unmapped: { adapter: 'l7', verdict: 'allow', reason_code: 'endpoint-allowed', status_code: 200, rule: undefined, endpoint: 'bench/0', http_version: '2' },
});
const N = 20000;
const PER_TICK = 100;
const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; };
// A tick at a time, as a proxy emits: the log's writes complete between ticks and its slabs are reused, as in boundary.
const tick = (s, from) => {
  for (let i = 0; i < PER_TICK; i++) s.emit(event(40000 + ((from + i) & 8191)));
};
const block = async (s) => {
  for (let t = 0; t < N / PER_TICK; t++) {
    tick(s, t * PER_TICK);
    await new Promise((r) => setImmediate(r));
  }
};
for (const s of sinks) {
  await block(s);
  await block(s);
}
const per = [[], []];
for (let k = 0; k < 30; k++) {
  for (const i of k % 2 ? [1, 0] : [0, 1]) {
    const t = cpu();
    await block(sinks[i]);
    per[i].push(((cpu() - t) * 1000) / N);
  }
}
const med = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
console.log(`A ${med(per[0]).toFixed(0)} ns/event, B ${med(per[1]).toFixed(0)} ns/event, B/A per block median ${med(per[1].map((x, i) => x / per[0][i])).toFixed(3)}`);
