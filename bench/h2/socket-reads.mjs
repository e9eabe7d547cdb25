// bench/h2/socket-reads.mjs — what one read of a TLS socket costs the session that reads it, by 'data' events against
// http2/socket-reads.ts (the handle's reads handed straight on), in one process: two loopback TLS connections, one read
// each way, blocks alternating. Each block writes small chunks one turn apart, so every chunk is a read of its own (as
// an h2load client's frames are); the writer's work is the same in both, so the difference per read is the reader's.
// Prints CPU per read of each (process CPU, writer included) and the median per-block ratio direct / 'data' events.
//
// Usage: node bench/h2/socket-reads.mjs <dist> [blocks=30] [reads per block=5000]
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect, TLSSocket } from 'node:tls';
import { pathToFileURL } from 'node:url';

const [dist, blocksArg, readsArg] = process.argv.slice(2);
if (dist === undefined) throw new Error('usage: node bench/h2/socket-reads.mjs <dist> [blocks] [reads per block]');
const BLOCKS = Math.min(Number(blocksArg ?? 30), 200);
const READS = Math.min(Number(readsArg ?? 5000), 100_000);
const CHUNK = Buffer.alloc(120, 'h');
const { readSocket } = await import(pathToFileURL(`${resolve(dist)}/http2/socket-reads.js`).href);

const dir = mkdtempSync(join(tmpdir(), 'boundary-socket-reads-'));
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
const key = readFileSync(join(dir, 'k.pem'));
const cert = readFileSync(join(dir, 'c.pem'));
rmSync(dir, { recursive: true, force: true });
const server = createServer();
await new Promise((r) => server.listen(0, '127.0.0.1', r));

/** A terminated TLS socket (as boundary's tunnels make them) read by `how`, and the client writing to it. */
async function pair(how) {
  const accepted = once(server, 'connection');
  const client = connect({ port: server.address().port, host: '127.0.0.1', rejectUnauthorized: false });
  const [raw] = await accepted;
  raw.setTimeout(300_000);
  const terminated = new TLSSocket(raw, { isServer: true, key, cert });
  await Promise.all([once(terminated, 'secure'), once(client, 'secureConnect')]);
  const counter = { bytes: 0 };
  const onData = (chunk) => {
    counter.bytes += chunk.length;
  };
  if (how === 'direct') readSocket(terminated, onData);
  else terminated.on('data', onData);
  terminated.resume();
  return { client, terminated, counter };
}

const tick = () => new Promise((r) => setImmediate(r));
async function block(p) {
  const target = p.counter.bytes + READS * CHUNK.length;
  const started = process.cpuUsage();
  for (let i = 0; i < READS; i++) {
    p.client.write(CHUNK);
    await tick();
  }
  while (p.counter.bytes < target) await tick();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / READS;
}

const events = await pair('data');
const direct = await pair('direct');
await block(events);
await block(direct);
const ratios = [];
const sums = { data: 0, direct: 0 };
for (let b = 0; b < BLOCKS; b++) {
  const first = b % 2 === 0;
  const x = first ? await block(events) : await block(direct);
  const y = first ? await block(direct) : await block(events);
  const [e, d] = first ? [x, y] : [y, x];
  sums.data += e;
  sums.direct += d;
  ratios.push(d / e);
}
ratios.sort((a, b) => a - b);
console.log(`'data' events: ${(sums.data / BLOCKS).toFixed(2)} µs CPU per read; direct: ${(sums.direct / BLOCKS).toFixed(2)}`);
console.log(`direct / 'data' per block: median ${ratios[ratios.length >> 1].toFixed(3)} (${ratios[0].toFixed(2)}-${ratios[ratios.length - 1].toFixed(2)})`);
for (const p of [events, direct]) {
  p.client.destroy();
  p.terminated.destroy();
}
server.close();
