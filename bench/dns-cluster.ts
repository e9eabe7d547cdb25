// Multi-core policy DNS for bench/dns.sh's separate scaling row: a node:cluster primary that forks WORKERS copies of
// bench/dns-server.mjs (built beside this file), all reading one shared UDP socket (Node 20's dgram has no
// SO_REUSEPORT: a second socket on the port fails with EADDRINUSE). Usage: node dns-cluster.mjs <workers> <server args>.
// Prints "ready <port>" once every worker listens; SIGTERM/SIGINT stops the workers, then the primary.

import cluster from 'node:cluster';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const workers = Number(process.argv[2] ?? '2');
const args = process.argv.slice(3);
cluster.setupPrimary({ exec: join(dirname(fileURLToPath(import.meta.url)), 'dns-server.mjs'), args, silent: true });
let ready = 0;
for (let i = 0; i < workers; i++) {
  const worker = cluster.fork({ DNS_BENCH_SHARED: '1' });
  worker.process.stdout?.on('data', (chunk: Buffer) => {
    if (chunk.toString().startsWith('ready') && ++ready === workers) process.stdout.write(`ready ${args[0]}\n`);
  });
  worker.process.stderr?.pipe(process.stderr);
}
function stop(): void {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  cluster.disconnect(() => process.exit(0));
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
