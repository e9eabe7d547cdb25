// Benchmark origin for bench/proxy.sh: a minimal keep-alive HTTP (and optional HTTPS) server on 127.0.0.1 that
// answers every request with one small fixed body, or GET /large with a large one. Never listens on anything but
// loopback; has no other routing beyond GET /__stats (request counter, used by the bench to prove proxied requests
// reached the origin).
//
// Usage: node origin.mjs --ready FILE [--http N] [--https N --cert PEM --key PEM] [--large-bytes N]
//   --http N / --https N: how many listeners of each kind (each on its own random loopback port).
//   --large-bytes N: the size of the /large answer (default 1 MiB): base64 text from a fixed seed, so every byte
//   value a secret's forms can begin with occurs, as in real answers.
//   Writes {"http":[ports],"https":[ports],"pid":n} to FILE once every listener is up.

import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';

const BODY = Buffer.from('ok: boundary bench origin, fixed 64-byte body..................\n');
const HEADERS = { 'content-type': 'text/plain', 'content-length': String(BODY.length) };
const LARGE = largeBody(Number(arg('--large-bytes', '1048576')));
const LARGE_HEADERS = { 'content-type': 'text/plain', 'content-length': String(LARGE.length) };

/** `bytes` of base64 text from a fixed-seed generator (xorshift32). */
function largeBody(bytes) {
  const raw = Buffer.alloc(Math.ceil((bytes * 3) / 4));
  let x = 0x2545f491;
  for (let i = 0; i < raw.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    raw[i] = x & 0xff;
  }
  return Buffer.from(raw.toString('base64').slice(0, bytes));
}
// Long enough that neither wrk nor a proxy's upstream pool ever sees the origin close an idle socket mid-run.
const KEEP_ALIVE_MS = 120_000;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
}

const readyFile = arg('--ready');
if (readyFile === undefined) {
  process.stderr.write('origin.mjs: --ready FILE is required\n');
  process.exit(2);
}
const httpCount = Number(arg('--http', '1'));
const httpsCount = Number(arg('--https', '0'));
let served = 0;

function handle(req, res) {
  if (req.url === '/__stats') {
    const body = JSON.stringify({ served });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
    res.end(body);
    return;
  }
  served++;
  // Drain any request body so the connection stays reusable.
  req.resume();
  if (req.url === '/large' || req.url?.endsWith('/large')) {
    res.writeHead(200, LARGE_HEADERS);
    res.end(LARGE);
    return;
  }
  res.writeHead(200, HEADERS);
  res.end(BODY);
}

function tune(server) {
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  server.headersTimeout = KEEP_ALIVE_MS + 1000;
  server.requestTimeout = 0;
  return server;
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => resolve(server.address().port));
  });
}

const tlsOptions =
  httpsCount > 0 ? { cert: readFileSync(arg('--cert')), key: readFileSync(arg('--key')), ALPNProtocols: ['http/1.1'] } : undefined;
const servers = [];
const ports = { http: [], https: [], pid: process.pid };
for (let i = 0; i < httpCount; i++) {
  const s = tune(http.createServer(handle));
  servers.push(s);
  ports.http.push(await listen(s));
}
for (let i = 0; i < httpsCount; i++) {
  const s = tune(https.createServer(tlsOptions, handle));
  servers.push(s);
  ports.https.push(await listen(s));
}
writeFileSync(`${readyFile}.tmp`, JSON.stringify(ports));
renameSync(`${readyFile}.tmp`, readyFile);

const stop = () => {
  for (const s of servers) s.close();
  for (const s of servers) s.closeAllConnections?.();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
