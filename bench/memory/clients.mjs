// Client side of bench/memory.sh, in its own process so its sockets never count against boundary's RSS.
// Opens N connections through boundary and holds them idle until SIGTERM (`closed`: closes each once it is up, and
// waits for boundary to close its side); prints one JSON line once all are done: {"mode","ok","failed","ms"}.
// Loopback only; every step has a deadline.
//
// Usage: node clients.mjs --mode tunnel|inspected|dns|closed --count N --proxy PORT --target HOST:PORT
//                         [--ca PEM] [--dns PORT --suffix dns.bench.test] [--concurrency N]

import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import dnsPacket from 'dns-packet';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
};
const mode = arg('--mode');
const count = Number(arg('--count', '1000'));
const concurrency = Number(arg('--concurrency', '200'));
// One connection (CONNECT, TLS, one request) or one DNS answer must complete within this.
const STEP_TIMEOUT_MS = 15_000;

const held = [];

function withTimeout(promise, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timeout`)), STEP_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Reads from `socket` until `done(text)` is true; resolves with the text read. */
function readUntil(socket, done) {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk) => {
      text += chunk.toString('latin1');
      if (done(text)) {
        socket.off('data', onData);
        socket.off('error', reject);
        socket.pause();
        resolve(text);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

async function openTunnel(target) {
  const socket = net.connect({ port: Number(arg('--proxy')), host: '127.0.0.1' });
  socket.on('error', () => {});
  held.push(socket);
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  const head = await readUntil(socket, (t) => t.includes('\r\n\r\n'));
  if (!head.startsWith('HTTP/1.1 200')) throw new Error(`CONNECT answered ${head.split('\r\n')[0]}`);
  return socket;
}

/** A tunnel opened, then closed by the client; resolves once boundary has closed its side too. */
async function openAndClose(target) {
  const socket = await openTunnel(target);
  held.splice(held.indexOf(socket), 1);
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.resume();
  socket.end();
  await closed;
}

async function openInspected(target, ca) {
  const raw = await openTunnel(target);
  const host = target.slice(0, target.lastIndexOf(':'));
  const socket = tls.connect({ socket: raw, servername: host, ca });
  socket.on('error', () => {});
  held.push(socket);
  await new Promise((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  socket.write(`GET / HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  const reply = await readUntil(socket, (t) => t.includes('\r\n\r\n') && (!t.startsWith('HTTP/1.1 200') || t.endsWith('\r\n\r\nok\n')));
  if (!reply.startsWith('HTTP/1.1 200')) throw new Error(`request answered ${reply.split('\r\n')[0]}`);
}

const DNS_RETRIES = 30;

function makeDnsQuery(sock, port) {
  const pending = new Map();
  sock.on('message', (msg) => {
    const r = dnsPacket.decode(msg);
    const p = pending.get(r.id);
    if (p === undefined) return;
    pending.delete(r.id);
    if (r.rcode === 'NOERROR' && r.answers.some((a) => a.type === 'A')) p.resolve();
    else p.reject(new Error(`answer ${r.rcode}`));
  });
  let nextId = 1;
  return (name) =>
    new Promise((resolve, reject) => {
      const id = nextId++ & 0xffff;
      pending.set(id, { resolve, reject });
      sock.send(dnsPacket.encode({ id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', name }] }), port, '127.0.0.1');
    });
}

const started = performance.now();
let ok = 0;
let failed = 0;
let firstError;
let one;
if (mode === 'tunnel') one = () => openTunnel(arg('--target'));
else if (mode === 'closed') one = () => openAndClose(arg('--target'));
else if (mode === 'inspected') {
  const ca = readFileSync(arg('--ca'));
  one = () => openInspected(arg('--target'), ca);
} else if (mode === 'dns') {
  const sock = createSocket('udp4');
  await new Promise((resolve) => sock.bind(0, '127.0.0.1', resolve));
  const query = makeDnsQuery(sock, Number(arg('--dns')));
  const suffix = arg('--suffix');
  let n = 0;
  // New mappings past the per-sandbox burst are refused with SERVFAIL until the rate allows more
  // (docs/dns.md#synthetic-pools): a refused name is asked again a second later, at most DNS_RETRIES times.
  one = async () => {
    const name = `n${n++}.${suffix}`;
    for (let attempt = 0; ; attempt++) {
      try {
        return await query(name);
      } catch (err) {
        if (attempt >= DNS_RETRIES || !String(err?.message).includes('SERVFAIL')) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  };
} else {
  process.stderr.write('clients.mjs: --mode tunnel|inspected|dns|closed\n');
  process.exit(2);
}

let next = 0;
async function worker() {
  while (next < count) {
    next++;
    try {
      await withTimeout(one(), mode);
      ok++;
    } catch (err) {
      failed++;
      firstError ??= String(err?.message ?? err);
    }
  }
}
await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
process.stdout.write(`${JSON.stringify({ mode, ok, failed, ms: Math.round(performance.now() - started), firstError })}\n`);
process.on('SIGTERM', () => {
  for (const s of held) s.destroy();
  process.exit(0);
});
setInterval(() => {}, 60_000);
