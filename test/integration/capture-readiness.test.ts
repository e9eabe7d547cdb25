// /readyz and transparent capture in each --capture mode: required (503 while the synthetic range is not local),
// optional (ready, and the body says capture is unavailable), off (no capture listeners at all).
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { DEFAULT_SYNTHETIC_CIDR } from '../../src/net/synthetic.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { policyYaml } from '../harness/control.js';
import { buildQuery, udpQuery } from '../harness/dns-client.js';

const POLICY = policyYaml('api.example.test', 443);
const TWO_NAMES = `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: 443 }
      - { host: other.example.test, port: 443 }
    binaries: [{ path: "/**" }]
`;
const UNROUTED =
  /^capture-unavailable: EADDRNOTAVAIL 198\.1[89]\.\d+\.\d+(?::443)? \(the synthetic range is not routed to lo: run 'ip route add local 198\.18\.0\.0\/15 dev lo' as root, or boundary init-netns\)$/;

/** True when this host already routes the default synthetic range locally (init-netns ran here). */
function routedLocally(ip: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: ip, port: 0 }, () => server.close(() => resolve(true)));
  });
}

interface ReadyBody {
  reasons?: string[];
  capture?: { mode: string; state: string; problem?: string };
}

async function readyz(adminPort: number): Promise<{ status: number; reasons: string[]; body: ReadyBody }> {
  const response = await fetch(`http://127.0.0.1:${adminPort}/readyz?verbose=1`);
  const body = (await response.json()) as ReadyBody;
  return { status: response.status, reasons: body.reasons ?? [], body };
}

/** Asks policy DNS for the allowed name: its answer opens (or tries to open) a capture listener. */
async function resolveAllowed(b: RunningBoundary): Promise<string> {
  const answer = await udpQuery(b.dnsPort as number, buildQuery('api.example.test'));
  const record = answer.answers?.find((a) => a.type === 'A');
  const synthetic = record !== undefined && 'data' in record ? record.data : undefined;
  assert.equal(typeof synthetic, 'string');
  return String(synthetic);
}

/** Log lines about capture failing: the one summary, and any per-listener line. */
function captureFailureLines(b: RunningBoundary): string[] {
  return b.log.lines().filter((line) => /capture unavailable|capture listener/.test(line));
}

describe('/readyz and transparent capture', () => {
  it('with --capture required is 503 capture-unavailable, before and after a name is resolved, when the synthetic range is not local', async (t) => {
    if (await routedLocally('198.18.0.1')) return t.skip('this host routes 198.18.0.0/15 to lo');
    const b = await startBoundary({ policy: POLICY, syntheticCidr: DEFAULT_SYNTHETIC_CIDR, capture: 'required' });
    t.after(() => b.close());
    // The start-up probe: not ready before any workload asked for a name.
    const before = await readyz(b.adminPort);
    assert.equal(before.status, 503);
    assert.ok(before.reasons.some((r) => UNROUTED.test(r)), JSON.stringify(before.reasons));
    assert.deepEqual([before.body.capture?.mode, before.body.capture?.state], ['required', 'unavailable']);

    const synthetic = await resolveAllowed(b);
    const after = await readyz(b.adminPort);
    assert.equal(after.status, 503);
    const reason = after.reasons.find((r) => UNROUTED.test(r));
    assert.equal(reason?.split(' ')[2], `${synthetic}:443`, JSON.stringify(after.reasons));
  });

  it('with --capture optional (the standalone default) is 200, says capture is unavailable, and logs it once without a stack', async (t) => {
    if (await routedLocally('198.18.0.1')) return t.skip('this host routes 198.18.0.0/15 to lo');
    const b = await startBoundary({ policy: TWO_NAMES, syntheticCidr: DEFAULT_SYNTHETIC_CIDR });
    t.after(() => b.close());
    const before = await readyz(b.adminPort);
    assert.equal(before.status, 200, JSON.stringify(before.body));
    assert.deepEqual(before.reasons, []);
    assert.deepEqual([before.body.capture?.mode, before.body.capture?.state], ['optional', 'unavailable']);
    assert.match(before.body.capture?.problem ?? '', UNROUTED);

    await resolveAllowed(b);
    await udpQuery(b.dnsPort as number, buildQuery('other.example.test'));
    assert.equal((await readyz(b.adminPort)).status, 200);
    const lines = captureFailureLines(b);
    assert.equal(lines.length, 1, lines.join('\n'));
    const line = JSON.parse(lines[0] ?? '{}') as { level: number; err?: unknown; msg: string };
    assert.equal(line.level, 40, 'a warning: the proxy serves');
    assert.equal(line.err, undefined, 'no stack');
    assert.deepEqual(b.log.events().filter((e) => e.status_detail === 'transparent_tcp_listen_failed'), []);
  });

  it('with --capture off opens no capture listener and is ready', async (t) => {
    const b = await startBoundary({ policy: policyYaml('api.example.test', 8443), capture: 'off' });
    t.after(() => b.close());
    await resolveAllowed(b);
    assert.deepEqual(b.boundary.transparent.listening(), []);
    const ready = await readyz(b.adminPort);
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.deepEqual(ready.body.capture, { mode: 'off', state: 'off' });
  });

  it('is ready with a synthetic CIDR inside 127.0.0.0/8, where every address is local', async (t) => {
    const b = await startBoundary({ policy: policyYaml('api.example.test', 8443), capture: 'required' });
    t.after(() => b.close());
    await udpQuery(b.dnsPort as number, buildQuery('api.example.test'));
    assert.equal(b.boundary.transparent.listening().length, 1);
    const ready = await readyz(b.adminPort);
    assert.equal(ready.status, 200, JSON.stringify(ready.reasons));
    assert.deepEqual(ready.reasons, []);
    assert.deepEqual(ready.body.capture, { mode: 'required', state: 'ready' });
  });
});
