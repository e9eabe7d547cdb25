// boundary's own upstream query that comes back to its policy DNS (docs/dns.md#a-query-that-comes-back): fails at
// once as `dns-loop`, whatever policy DNS would have answered it with. Real sockets: the upstream resolver's
// nameserver is policy DNS's own UDP port, which is where a redirect without an exemption for boundary sends it.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { createDnsServer } from '../../src/dns/server.js';
import { createOwnQueries, isOwnPort } from '../../src/dns/own-queries.js';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import { createUpstreamResolver } from '../../src/dns/upstream.js';
import type { Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { buildQuery, rcodeOf, udpQuery } from '../harness/dns-client.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';
import { testLookupGate } from '../harness/lookup-gate.js';

/** Policy DNS whose upstream resolver asks policy DNS itself. */
async function loopedStack(t: TestContext) {
  const own = createOwnQueries();
  const policy = stubPolicy([{ host: '*.allowed.test', ports: [443] }]);
  const sink = collectingSink();
  let upstream: Resolver | undefined;
  // The nameserver's port is known only once policy DNS listens.
  const resolver: Resolver = { resolve: (name, family) => (upstream as Resolver).resolve(name, family) };
  const dns = createPolicyDns({
    policy: () => policy,
    lookups: testLookupGate(resolver, { sink, policy: () => policy }),
    pool: createSyntheticPool({ epoch: 0, now: Date.now }),
    sink,
    now: Date.now,
    allowLoopback: true,
    ownQueries: own,
  });
  const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: dns.handler });
  await server.start();
  t.after(() => server.close());
  const port = server.address().port;
  upstream = createUpstreamResolver({ servers: [{ host: '127.0.0.1', port }], ownQueries: own });
  return { port, sink, resolver: upstream };
}

describe('policy DNS and a query of boundary’s own that comes back to it', () => {
  it('fails the lookup at once as dns-loop, instead of resolving the name again and waiting on itself', async (t) => {
    const stack = await loopedStack(t);
    const reply = await udpQuery(stack.port, buildQuery('api.allowed.test'));
    assert.equal(rcodeOf(reply), 'SERVFAIL');
    const event = stack.sink.events.find((e) => e.statusDetail?.startsWith('policy_dns_upstream_') === true);
    assert.equal(event?.statusDetail, 'policy_dns_upstream_dns_loop', JSON.stringify(event));
    assert.match(event?.message ?? '', /came back to boundary's policy DNS: exempt boundary's uid from the DNS redirect \(docs\/dns\.md, A query that comes back\)$/);
  });

  it('never answers boundary’s own query with policy DNS’s answer: a refused name, asked twice, and refused by policy DNS in between', async (t) => {
    const stack = await loopedStack(t);
    const first = await stack.resolver.resolve('refused.other.test', 4);
    assert.deepEqual(!first.ok && first.failure, 'dns-loop', JSON.stringify(first));
    // The workload's own query for it is refused and cached as such; boundary's next one must still not take that.
    assert.equal(rcodeOf(await udpQuery(stack.port, buildQuery('refused.other.test'))), 'NXDOMAIN');
    const again = await stack.resolver.resolve('refused.other.test', 4);
    assert.deepEqual(!again.ok && again.failure, 'dns-loop', JSON.stringify(again));
    assert.match(again.ok ? '' : again.message, /^the query to 127\.0\.0\.1:\d+ from port \d+ came back/);
  });

  it('answers the workload as before: the same name and id from a port boundary is not asking from', async (t) => {
    const stack = await loopedStack(t);
    const query = buildQuery('refused.other.test', 'A', { id: 4242 });
    assert.equal(rcodeOf(await udpQuery(stack.port, query)), 'NXDOMAIN');
  });
});

describe('createOwnQueries', () => {
  it('matches port, id and name, once, and forgets an exchange that ended', () => {
    const own = createOwnQueries();
    const loops: string[] = [];
    const forget = own.add('udp', 40_000, 7, 'a.test', () => loops.push('a'));
    own.add('udp', 40_001, 8, 'b.test', () => loops.push('b'));
    assert.equal(own.returned('udp', 40_000, 8, 'a.test'), false, 'another id');
    assert.equal(own.returned('udp', 40_000, 7, 'b.test'), false, 'another name');
    assert.equal(own.returned('udp', 40_002, 7, 'a.test'), false, 'another port');
    assert.equal(own.returned('tcp', 40_000, 7, 'a.test'), false, 'another transport');
    assert.deepEqual(loops, []);
    assert.equal(own.returned('udp', 40_001, 8, 'b.test'), true);
    assert.equal(own.returned('udp', 40_001, 8, 'b.test'), false, 'a second copy (the resend) is not a second loop');
    forget();
    assert.equal(own.returned('udp', 40_000, 7, 'a.test'), false, 'ended');
    assert.deepEqual(loops, ['b']);
  });

  it('numbers UDP and TCP ports apart: an exchange of each from one port number is matched on its own transport', () => {
    const own = createOwnQueries();
    const loops: string[] = [];
    own.add('udp', 40_000, 7, 'a.test', () => loops.push('udp'));
    const forgetTcp = own.add('tcp', 40_000, 7, 'a.test', () => loops.push('tcp'));
    const ports = new Uint32Array(own.sharedPorts());
    assert.equal(own.returned('tcp', 40_000, 7, 'a.test'), true);
    assert.deepEqual(loops, ['tcp']);
    assert.equal(isOwnPort(ports, 40_000), true, 'the UDP exchange is still in flight');
    forgetTcp();
    assert.equal(own.returned('udp', 40_000, 7, 'a.test'), true);
    assert.deepEqual(loops, ['tcp', 'udp']);
    assert.equal(isOwnPort(ports, 40_000), false);
  });

  it('shares the ports of the exchanges in flight with the replay workers, from before and after the first share', () => {
    const own = createOwnQueries();
    const forgetEarly = own.add('udp', 53, 1, 'a.test', () => {});
    const ports = new Uint32Array(own.sharedPorts());
    assert.equal(own.sharedPorts(), ports.buffer, 'one bitmap');
    const forgetLate = own.add('udp', 65_535, 2, 'b.test', () => {});
    own.add('udp', 1, 3, 'c.test', () => {});
    assert.deepEqual([53, 65_535, 1, 0, 52, 54, 65_534].map((port) => isOwnPort(ports, port)), [true, true, true, false, false, false, false]);
    forgetEarly();
    forgetLate();
    assert.equal(own.returned('udp', 1, 3, 'c.test'), true);
    assert.ok(ports.every((word) => word === 0), 'an ended or matched exchange leaves no bit');
  });
});
