// Identity lookup cost per new connection (docs/identity.md#cost): the production /proc source (worker thread)
// asked about loopback connections held by python3 clients (PER_CLIENT connections each), with IDLE extra
// processes in the process table.
// One lookup at a time (a connection on its own: the full walk each time), bursts of BURST lookups made together
// (one walk shared, as when connections arrive at once), and the re-check a request on a kept-alive connection
// makes (the known socket's holders only). Medians and p99 over LOOKUPS connections.
//   node --import tsx bench/identity-lookup.ts
//   IDLE=0,100,400 LOOKUPS=200 PER_CLIENT=10 BURST=20 CLIENT_UID=65534 node --import tsx bench/identity-lookup.ts
// CLIENT_UID runs the client as another uid (setpriv), as in a pod where the agent is not boundary's uid: only
// processes of the socket's uid have their fds read.

import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { createProcIdentitySource } from '../src/identity/proc-source.js';
import type { LookupRequest } from '../src/identity/source.js';

const IDLE = (process.env.IDLE ?? '0,100,400').split(',').map(Number);
const LOOKUPS = Number(process.env.LOOKUPS ?? 200);
const BURST = Number(process.env.BURST ?? 20);
const PER_CLIENT = Number(process.env.PER_CLIENT ?? 10);
const CLIENT_UID = process.env.CLIENT_UID;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

function summary(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  return `median ${percentile(sorted, 50).toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms`;
}

async function main(): Promise<void> {
  const accepted: Socket[] = [];
  const server = createServer((s) => accepted.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  // Clients holding PER_CLIENT connections each: every lookup is a new connection's, with its own socket.
  const holder = `import socket, sys\nconns = [socket.create_connection(('127.0.0.1', ${port})) for _ in range(${PER_CLIENT})]\nprint('ready', flush=True)\nsys.stdin.read()\n`;
  const prefix = CLIENT_UID === undefined ? [] : ['setpriv', `--reuid=${CLIENT_UID}`, `--regid=${CLIENT_UID}`, '--clear-groups'];
  const argv = [...prefix, '/usr/bin/python3', '-c', holder];
  const clients: ChildProcess[] = [];
  for (let i = 0; i < Math.ceil(LOOKUPS / PER_CLIENT); i++) {
    const client = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
    clients.push(client);
    await once(client.stdout as NodeJS.ReadableStream, 'data');
  }
  while (accepted.length < clients.length * PER_CLIENT) await once(server, 'connection');
  const requests: LookupRequest[] = accepted.slice(0, LOOKUPS).map((s) => ({
    client: { ip: s.remoteAddress ?? '', port: s.remotePort ?? 0 },
    proxy: { ip: s.localAddress ?? '', port: s.localPort ?? 0 },
    paths: ['/usr/bin/python3'],
  }));
  const idle: ChildProcess[] = [];
  const source = createProcIdentitySource({ now: Date.now });
  await source.start();
  // The worker's boot is a one-time cost, not a connection's.
  await source.lookup(requests[0] as LookupRequest);
  const who = `${clients.length} python3 clients holding ${PER_CLIENT} each${CLIENT_UID === undefined ? '' : ` (uid ${CLIENT_UID})`}`;
  console.log(`identity lookup, ${LOOKUPS} connections of ${who}, /proc source on its worker thread`);
  for (const extra of IDLE) {
    while (idle.length < extra) idle.push(spawn('sleep', ['3600'], { stdio: 'ignore' }));
    const processes = readdir('/proc').then((names) => names.filter((name) => /^\d+$/.test(name)).length);
    const single: number[] = [];
    for (const request of requests) {
      const started = performance.now();
      const result = await source.lookup(request);
      single.push(performance.now() - started);
      if (!result.ok) throw new Error(`${result.failure}: ${result.detail}`);
    }
    const perConnection: number[] = [];
    for (let i = 0; i + BURST <= requests.length; i += BURST) {
      const started = performance.now();
      await Promise.all(requests.slice(i, i + BURST).map((r) => source.lookup(r)));
      const elapsed = performance.now() - started;
      for (let j = 0; j < BURST; j++) perConnection.push(elapsed / BURST);
    }
    // A request on a kept-alive connection looks its holders up again by the socket found before (no table read).
    const recheck: number[] = [];
    for (const request of requests) {
      const first = await source.lookup(request);
      if (!first.ok) throw new Error(`${first.failure}: ${first.detail}`);
      const started = performance.now();
      const again = await source.lookup({ ...request, socket: first.socket });
      recheck.push(performance.now() - started);
      if (!again.ok) throw new Error(`${again.failure}: ${again.detail}`);
    }
    console.log(`  ${await processes} processes: one at a time ${summary(single)}; in bursts of ${BURST}, per connection ${summary(perConnection)}; re-check of a known socket ${summary(recheck)}`);
  }
  await source.close();
  for (const child of idle) child.kill();
  for (const client of clients) client.kill();
  for (const s of accepted) s.destroy();
  server.close();
}

await main();
