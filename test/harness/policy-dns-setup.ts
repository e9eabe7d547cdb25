// Policy DNS test fixture: a createPolicyDns() wired to a fake resolver, a test clock, a synthetic pool and a
// collecting sink, with helpers to ask a query and read the answer. Shared by the policy-dns-* unit tests.

import assert from 'node:assert/strict';
import { type DecodedPacket, decode, type RecordClass, type RecordType } from 'dns-packet';
import { createPolicyDns, type PolicyDns } from '../../src/dns/policy-dns.js';
import { type DnsRequestInfo, NO_RESPONSE } from '../../src/dns/server.js';
import type { Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import type { Policy } from '../../src/policy/types.js';
import { testClock } from './clock.js';
import { buildQuery } from './dns-client.js';
import { type EndpointSpec, stubPolicy } from './dns-policy.js';
import { collectingSink } from './dns-stack.js';
import { type FakeAnswer, fakeResolver } from './fake-resolver.js';
import { testLookupGate } from './lookup-gate.js';

export const UDP: DnsRequestInfo = { transport: 'udp', remote: { ip: '127.0.0.1', port: 5353 } };
export const PUBLIC = '93.184.216.34';

/** As server.ts asks: the cached path first, then the async one on a miss; undefined when nothing is sent. */
export async function answer(dns: PolicyDns, message: Buffer, info: DnsRequestInfo = UDP): Promise<Buffer | undefined> {
  const out = await dns.handler.answer(message, info);
  return out === NO_RESPONSE ? undefined : out;
}

/** One policy DNS over a fake resolver; `swap` installs a new stub policy, `details` and `published` read the sink. */
export function setup(
  options: { endpoints?: readonly EndpointSpec[]; answers?: Record<string, FakeAnswer>; resolver?: Resolver; cidr?: string; searchDomains?: readonly string[] } = {},
) {
  const clock = testClock();
  const resolver = fakeResolver(options.answers ?? { 'api.example.test': { addresses: [PUBLIC], ttlSeconds: 30 } });
  let policy: Policy = stubPolicy(options.endpoints ?? [{ host: 'api.example.test', ports: [443] }]);
  const pool = createSyntheticPool({ epoch: 0, now: clock.now, ...(options.cidr === undefined ? {} : { cidr: options.cidr }) });
  const sink = collectingSink();
  const dns = createPolicyDns({
    policy: () => policy,
    lookups: testLookupGate(options.resolver ?? resolver, { now: clock.now, sink, policy: () => policy }),
    pool,
    sink,
    now: clock.now,
    ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
  });
  async function ask(name: string, type: RecordType = 'A', extra: { qclass?: RecordClass; id?: number } = {}): Promise<DecodedPacket> {
    const out = await answer(dns, buildQuery(name, type, extra), UDP);
    assert.ok(out !== undefined, 'a response');
    return decode(out);
  }
  return {
    clock,
    resolver,
    pool,
    sink,
    dns,
    ask,
    swap(specs: readonly EndpointSpec[]) {
      policy = stubPolicy(specs, policy.generation + 1);
    },
    details: () => sink.events.filter((e) => e.class === 'NET').map((e) => e.statusDetail),
    published: () => sink.events.filter((e) => e.class === 'CONFIG' && e.activity === 'PUBLISHED'),
  };
}

/** The TTL of the first answer record. */
export function ttlOf(packet: DecodedPacket): number | undefined {
  return (packet.answers?.[0] as { ttl?: number } | undefined)?.ttl;
}

/** The data of every answer record, as strings. */
export function aOf(packet: DecodedPacket): string[] {
  return (packet.answers ?? []).map((a) => String((a as { data: unknown }).data));
}
