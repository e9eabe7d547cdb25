// Policy DNS assembled for socket tests: fixture upstream + upstream resolver + pool + handler + server,
// all on 127.0.0.1 with port 0. Events are collected as plain AuditEvent values.

import { createDnsServer, type DnsServer } from '../../src/dns/server.js';
import { createPolicyDns, type PolicyDns } from '../../src/dns/policy-dns.js';
import { createUpstreamResolver } from '../../src/dns/upstream.js';
import { createSyntheticPool, type SyntheticPool } from '../../src/net/synthetic.js';
import type { Policy } from '../../src/policy/types.js';
import type { AuditEvent, AuditSink } from '../../src/telemetry/event.js';
import { type DnsFixture, type FixtureEntry, startDnsFixture } from './dns-upstream.js';
import { type EndpointSpec, stubPolicy } from './dns-policy.js';
import { testLookupGate } from './lookup-gate.js';

export interface CollectingSink extends AuditSink {
  readonly events: AuditEvent[];
}

export function collectingSink(keep = true): CollectingSink {
  const events: AuditEvent[] = [];
  return { events, emit: (event) => void (keep && events.push(event)) };
}

export interface DnsStack {
  readonly port: number;
  readonly fixture: DnsFixture;
  readonly server: DnsServer;
  readonly dns: PolicyDns;
  readonly pool: SyntheticPool;
  readonly sink: CollectingSink;
  setPolicy(policy: Policy): void;
  close(): Promise<void>;
}

export async function startDnsStack(options: {
  endpoints: readonly EndpointSpec[];
  upstream: Readonly<Record<string, FixtureEntry>>;
  now?: () => number;
  keepEvents?: boolean;
  epoch?: number;
  cidr?: string;
  tcpIdleTimeoutMs?: number;
}): Promise<DnsStack> {
  const fixture = await startDnsFixture(options.upstream);
  let policy = stubPolicy(options.endpoints);
  const now = options.now ?? (() => Date.now());
  const pool = createSyntheticPool({ epoch: options.epoch ?? 0, now, ...(options.cidr === undefined ? {} : { cidr: options.cidr }) });
  const sink = collectingSink(options.keepEvents ?? true);
  const dns = createPolicyDns({
    policy: () => policy,
    lookups: testLookupGate(createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }], timeoutMs: 500 }), { now, sink, policy: () => policy }),
    pool,
    sink,
    now,
    allowLoopback: true,
  });
  const server = createDnsServer({
    host: '127.0.0.1',
    port: 0,
    handler: dns.handler,
    onTick: () => pool.sweep(),
    ...(options.tcpIdleTimeoutMs === undefined ? {} : { tcpIdleTimeoutMs: options.tcpIdleTimeoutMs }),
  });
  await server.start();
  return {
    port: server.address().port,
    fixture,
    server,
    dns,
    pool,
    sink,
    setPolicy(next) {
      policy = next;
    },
    async close() {
      await server.close();
      await fixture.close();
    },
  };
}
