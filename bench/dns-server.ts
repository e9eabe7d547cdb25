// Benchmark entry: a policy DNS server on 127.0.0.1 with a fixed policy and a loopback fixture upstream.
// Usage: node --import tsx bench/dns-server.ts <port> <allowed-count> [json-log]
// Prints "ready <port>" once both listen. Loopback only; stops on SIGTERM/SIGINT.

import { createWriteStream } from 'node:fs';
import { createPolicyDns } from '../src/dns/policy-dns.js';
import { createDnsServer } from '../src/dns/server.js';
import { createUpstreamResolver } from '../src/dns/upstream.js';
import { createSyntheticPool } from '../src/net/synthetic.js';
import type { AuditSink } from '../src/telemetry/event.js';
import { stubPolicy } from '../test/harness/dns-policy.js';
import { type FixtureEntry, startDnsFixture } from '../test/harness/dns-upstream.js';

const port = Number(process.argv[2] ?? '15353');
const allowed = Number(process.argv[3] ?? '100');
const logMode = process.argv[4] ?? 'count';

const upstream: Record<string, FixtureEntry> = {};
for (let i = 0; i < allowed; i++) upstream[`allowed-${i}.bench.test`] = { a: ['127.0.0.2'], ttl: 30 };
const fixture = await startDnsFixture(upstream);

let events = 0;
// 'count': events are built but not serialised, like dnsmasq without log-queries. 'json': one JSON line
// per event to /dev/null, to show what the audit trail costs.
const devnull = logMode === 'json' ? createWriteStream('/dev/null') : undefined;
const sink: AuditSink = {
  emit(event) {
    events++;
    if (devnull !== undefined) devnull.write(`${JSON.stringify(event)}\n`);
  },
};
const now = () => Date.now();
const pool = createSyntheticPool({ epoch: 0, now });
const policy = stubPolicy([{ host: '*.bench.test', ports: [443] }]);
const dns = createPolicyDns({
  policy: () => policy,
  resolver: createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }] }),
  pool,
  sink,
  now,
  allowLoopback: true,
});
const server = createDnsServer({ host: '127.0.0.1', port, handler: dns.handler, onTick: () => pool.sweep() });
await server.start();
process.stdout.write(`ready ${server.address().port}\n`);

async function stop(): Promise<void> {
  await server.close();
  await fixture.close();
  process.stderr.write(`events=${events} upstream=${fixture.count()} ${JSON.stringify({ ...dns.stats(), ...server.stats() })}\n`);
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
