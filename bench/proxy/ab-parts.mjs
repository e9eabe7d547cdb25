// bench/proxy/ab-parts.mjs — two compiled trees side by side in one process, for per-request parts too small to
// see through a noisy host's end-to-end runs: a forward request's decision event and audit line (message and URL
// strings made afresh, as the parser's are), the placeholder marker scan of three header-sized texts, and the
// credential scope of a request that binds nothing. Blocks of each tree alternate; prints medians and the median
// per-block ratio B/A. Bounded loops; no sockets.
//
// Usage: node bench/proxy/ab-parts.mjs <dist A> <dist B>
//        e.g. the trees bench/proxy.sh builds for BOUNDARY_REF: bench/out/build-<sha>/dist
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
const [dirA, dirB] = process.argv.slice(2).map((dir) => resolve(dir));
if (dirA === undefined || dirB === undefined) throw new Error('usage: node bench/proxy/ab-parts.mjs <dist A> <dist B>');
const load = async (dir) => {
  const l = (f) => import(pathToFileURL(`${dir}/${f}`).href);
  const events = await l('chain/events.js');
  const line = await l('telemetry/audit-line.js');
  const ph = await l('credentials/placeholder.js');
  const scope = await l('credentials/scope.js');
  const src = await l('credentials/source.js');
  return { events, line, ph, scope, src };
};
const builds = [await load(dirA), await load(dirB)];
const pathBuf = Buffer.from('/index.html');
const hostBuf = Buffer.from('origin.bench.test');
const hostHdr = Buffer.from('origin.bench.test:43081');
// As bytes (what the sink hands the line writer now); a tree from before takes it as its text, written the same.
const UID = Buffer.from('01234567-89ab-cdef-0123-456789abcdef');
function eventBench(b) {
  let sink = 0;
  const writer = { fieldPrefix: ',"ocsf":', end: '}\n', takesParts: true, write: (s) => { sink += s.length; }, writeParts: (p) => { sink += p.length; } };
  const write = b.line.createAuditLineWriter(writer, undefined);
  return () => {
    const o = b.events.beginOutcome('forward', 'http', { remoteAddress: '127.0.0.1', remotePort: 40000 + (sink & 1023) });
    Object.assign(o, { method: 'GET', host: hostBuf.toString('latin1'), port: 43081, path: pathBuf.toString('latin1'), verdict: 'allow', reason: 'policy-allow', engine: 'l4', detail: 'allowed by web', policy: 'web', generation: 1, policyHash: 'abc', status: 200, extra: { rule: 'web', endpoint: 'e1' } });
    write(b.events.outcomeEvent(o), 1733380000000, UID);
  };
}
function markerBench(b) {
  return () => {
    b.ph.containsMarker(hostHdr.toString('latin1'));
    b.ph.containsMarker('Mozilla/5.0 (X11; Linux x86_64) curl-like agent 8.5');
    b.ph.containsMarker(pathBuf.toString('latin1'));
  };
}
function scopeBench(b) {
  const source = b.src.createStaticCredentialSource({ providers: [{ name: 'p', env: { K: 'v' }, endpoints: [{ host: 'api.other.test', port: 443 }] }] });
  return () => b.scope.scopeFor({ source, host: hostBuf.toString('latin1'), port: 43081, path: pathBuf.toString('latin1') });
}
const N = 50_000, BLOCKS = 12;
for (const [name, make] of [['event+audit line', eventBench], ['marker scan (3 texts)', markerBench], ['scopeFor (unbound)', scopeBench]]) {
  const fns = builds.map(make);
  for (const f of fns) for (let i = 0; i < N; i++) f();
  const t = [[], []];
  for (let blk = 0; blk < BLOCKS; blk++) {
    for (const k of blk % 2 ? [1, 0] : [0, 1]) {
      const s = process.hrtime.bigint();
      for (let i = 0; i < N; i++) fns[k]();
      t[k].push(Number(process.hrtime.bigint() - s) / N / 1000);
    }
  }
  const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  const ratios = t[0].map((x, i) => t[1][i] / x);
  console.log(`${name.padEnd(24)} A ${med([...t[0]]).toFixed(3)} µs  B ${med([...t[1]]).toFixed(3)} µs  median ratio B/A ${med(ratios).toFixed(3)}`);
}
