// The floor under a control-channel re-attach on this machine, now: the CPU that bare node:tls and node:http2
// spend on one mTLS handshake, one HTTP/2 session and three small requests (attach, watch, ack) with no boundary
// code at either end. It runs in a child process, server on a worker thread as the scale test's supervisor is,
// so the CPU it counts is its own (both threads and V8's helpers) and not the work of a fleet idling beside it.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Pem, TestPki } from './certs.js';

// Plain CommonJS, so the child needs no loader. Reads {ca, server, client, exchanges, concurrency} on stdin and
// prints {cpuMs, exchanges}: the process CPU of the exchanges after one warm-up exchange (node's TLS and HTTP/2
// code loaded and compiled).
const CHILD = `
const { Worker } = require('node:worker_threads');
const { connect: tlsConnect, createSecureContext } = require('node:tls');
const { connect: http2Connect } = require('node:http2');
const { once } = require('node:events');
const SERVER = \`
const { createSecureServer } = require('node:http2');
const { parentPort, workerData } = require('node:worker_threads');
const server = createSecureServer({ ...workerData, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' });
server.on('stream', (stream) => {
  stream.on('error', () => {});
  stream.resume();
  stream.on('end', () => {
    if (stream.destroyed) return;
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.end('{"kind":"ack"}');
  });
});
server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
\`;
const BODY = JSON.stringify({ kind: 'attach', sandboxId: 'sb-0', instanceId: 'pod-0', bootId: 'boot-1', version: '0.1.0-test', policyHash: 'x'.repeat(64) });
let input = '';
process.stdin.on('data', (chunk) => (input += chunk));
process.stdin.on('end', async () => {
  const job = JSON.parse(input);
  const worker = new Worker(SERVER, { eval: true, workerData: { ca: job.ca, cert: job.server.certPem, key: job.server.keyPem } });
  const [port] = await once(worker, 'message');
  const secureContext = createSecureContext({ ca: job.ca, cert: job.client.certPem, key: job.client.keyPem, minVersion: 'TLSv1.3' });
  const exchange = async () => {
    const socket = tlsConnect({ host: '127.0.0.1', port, secureContext, minVersion: 'TLSv1.3', ALPNProtocols: ['h2'] });
    const session = http2Connect('https://127.0.0.1:' + port, { createConnection: () => socket });
    const ask = (method, path, body) => new Promise((resolve, reject) => {
      const stream = session.request({ ':method': method, ':path': path }, { endStream: body === undefined });
      stream.on('error', reject);
      stream.resume();
      stream.on('end', resolve);
      if (body !== undefined) stream.end(body);
    });
    try {
      await ask('POST', '/v1/attach', BODY);
      await ask('GET', '/v1/watch', undefined);
      await ask('POST', '/v1/status', BODY);
    } finally {
      session.close();
      socket.destroy();
    }
  };
  await exchange();
  const before = process.cpuUsage();
  let next = 0;
  const lane = async () => {
    while (next < job.exchanges) {
      next += 1;
      await exchange();
    }
  };
  await Promise.all(Array.from({ length: Math.min(job.concurrency, job.exchanges) }, lane));
  const used = process.cpuUsage(before);
  process.stdout.write(JSON.stringify({ cpuMs: (used.user + used.system) / 1000, exchanges: job.exchanges }));
  process.exit(0);
});
`;

/** Runs `exchanges` bare exchanges, `concurrency` at a time, and returns the process CPU per exchange in ms. */
export async function measureControlFloor(pki: TestPki, identity: Pem, exchanges: number, concurrency: number): Promise<number> {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['pipe', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stdin.end(JSON.stringify({ ca: pki.ca.certPem, server: pki.server, client: identity, exchanges, concurrency }));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`the control floor measurement exited with ${String(code)}`);
  const result = JSON.parse(output) as { cpuMs: number; exchanges: number };
  return result.cpuMs / result.exchanges;
}
