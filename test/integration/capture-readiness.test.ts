import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { DEFAULT_SYNTHETIC_CIDR } from '../../src/net/synthetic.js';
import { startBoundary } from '../harness/boundary.js';
import { policyYaml } from '../harness/control.js';
import { buildQuery, udpQuery } from '../harness/dns-client.js';

const POLICY = policyYaml('api.example.test', 443);
const UNROUTED =
  /^capture-unavailable: EADDRNOTAVAIL 198\.1[89]\.\d+\.\d+(?::443)? \(is the synthetic range routed to lo\? run boundary init-netns\)$/;

/** True when this host already routes the default synthetic range locally (init-netns ran here). */
function routedLocally(ip: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: ip, port: 0 }, () => server.close(() => resolve(true)));
  });
}

async function readyz(adminPort: number): Promise<{ status: number; reasons: string[] }> {
  const response = await fetch(`http://127.0.0.1:${adminPort}/readyz?verbose=1`);
  const body = (await response.json()) as { reasons?: string[] };
  return { status: response.status, reasons: body.reasons ?? [] };
}

describe('/readyz and transparent capture', () => {
  it('is 503 capture-unavailable, before and after a name is resolved, when the synthetic range is not local', async (t) => {
    if (await routedLocally('198.18.0.1')) return t.skip('this host routes 198.18.0.0/15 to lo');
    const b = await startBoundary({ policy: POLICY, syntheticCidr: DEFAULT_SYNTHETIC_CIDR });
    t.after(() => b.close());
    // The start-up probe: not ready before any workload asked for a name.
    const before = await readyz(b.adminPort);
    assert.equal(before.status, 503);
    assert.ok(before.reasons.some((r) => UNROUTED.test(r)), JSON.stringify(before.reasons));

    const answer = await udpQuery(b.dnsPort as number, buildQuery('api.example.test'));
    const record = answer.answers?.find((a) => a.type === 'A');
    const synthetic = record !== undefined && 'data' in record ? record.data : undefined;
    assert.equal(typeof synthetic, 'string');
    const after = await readyz(b.adminPort);
    assert.equal(after.status, 503);
    const reason = after.reasons.find((r) => UNROUTED.test(r));
    assert.equal(reason?.split(' ')[2], `${String(synthetic)}:443`, JSON.stringify(after.reasons));
  });

  it('is ready with a synthetic CIDR inside 127.0.0.0/8, where every address is local', async (t) => {
    const b = await startBoundary({ policy: policyYaml('api.example.test', 8443) });
    t.after(() => b.close());
    await udpQuery(b.dnsPort as number, buildQuery('api.example.test'));
    assert.equal(b.boundary.transparent.listening().length, 1);
    const ready = await readyz(b.adminPort);
    assert.equal(ready.status, 200, JSON.stringify(ready.reasons));
    assert.deepEqual(ready.reasons, []);
  });
});
