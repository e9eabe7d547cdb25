import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoundaryError } from '../../src/shared/errors.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { openTunnel, readAll, sendRequest } from '../harness/proxy-client.js';

// Nothing here may leave loopback: the dialer records each target and refuses it, so "allowed" means
// "the dialer was asked for that address" and "denied" means it never was (peer-tests §2 preamble).
const POLICY = `version: 1
network_policies:
  wild:
    endpoints:
      - { host: "*.example.test", port: 443 }
    binaries: [{ path: "/**" }]
  exact:
    endpoints:
      - { host: exact.example.test, ports: [443, 6443] }
    binaries: [{ path: "/**" }]
  literal:
    endpoints:
      - { host: 169.254.169.254, port: 443 }
      - { host: 127.0.0.1, port: 443 }
      - { host: 10.0.0.7, port: 443 }
    binaries: [{ path: "/**" }]
`;

let b: RunningBoundary;

before(async () => {
  b = await startBoundary({
    policy: POLICY,
    allowLoopback: false,
    names: {
      'meta.example.test': ['169.254.169.254'],
      'k8s.example.test': ['10.96.0.1'],
      'exact.example.test': ['10.1.2.3'],
      'mixed.example.test': ['10.0.0.5', '93.184.216.34'],
      'private.example.test': ['10.0.0.5', '192.168.1.1'],
      'public.example.test': ['93.184.216.34'],
    },
    dial: (target) => Promise.reject(new BoundaryError('UPSTREAM_CONNECT_REFUSED', `test dialer refuses ${target.host}:${target.port}`)),
  });
});

after(() => b?.close());

async function connectStatus(authority: string): Promise<{ status: number; body: string }> {
  const tunnel = await openTunnel(b.proxyPort, authority).catch(() => undefined);
  if (tunnel === undefined) return { status: 0, body: '' };
  const body = await readAll(tunnel.socket, tunnel.rest);
  return { status: tunnel.status, body };
}

// [authority, expected status, ssrf check or undefined when allowed (dialled), dialled address]
const ROWS: readonly (readonly [string, 403 | 'dialled', string])[] = [
  ['169.254.169.254:443', 403, 'always-blocked'],
  ['2852039166:443', 403, 'always-blocked'],
  ['0251.0376.0251.0376:443', 403, 'always-blocked'],
  ['0xA9FEA9FE:443', 403, 'always-blocked'],
  ['0xa9.0xfe.0xa9.0xfe:443', 403, 'always-blocked'],
  ['169.254.43518:443', 403, 'always-blocked'],
  ['127.1:443', 403, 'always-blocked'],
  ['0177.0.0.1:443', 403, 'always-blocked'],
  ['127.0.0.1.:443', 403, 'always-blocked'],
  ['meta.example.test:443', 403, 'always-blocked'],
  ['k8s.example.test:443', 403, 'internal-address'],
  ['private.example.test:443', 403, 'internal-address'],
  ['exact.example.test:6443', 403, 'control-plane-port'],
  ['exact.example.test:443', 'dialled', '10.1.2.3'],
  ['mixed.example.test:443', 'dialled', '93.184.216.34'],
  ['public.example.test:443', 'dialled', '93.184.216.34'],
  ['0x0a.0.0.7:443', 'dialled', '10.0.0.7'],
];

describe('SSRF through CONNECT', () => {
  for (const [authority, expected, detail] of ROWS) {
    it(`${expected === 403 ? `denies ${authority} (${detail})` : `dials only ${detail} for ${authority}`}`, async () => {
      const dials = b.dials.length;
      const calls = b.resolver.calls.length;
      const { status, body } = await connectStatus(authority);
      const asked = b.dials.slice(dials).map((d) => d.host);
      if (expected === 403) {
        assert.equal(status, 403);
        const parsed = JSON.parse(body.slice(body.indexOf('{'))) as { error: string; check: string };
        assert.equal(parsed.error, 'ssrf_denied');
        assert.equal(parsed.check, detail);
        assert.deepEqual(asked, [], 'the dialer was never asked');
        const event = b.log.events().reverse().find((e) => e.class_uid === 4001 && e.firewall_rule?.type === 'ssrf');
        assert.equal(event?.action, 'Denied');
        assert.equal(event?.unmapped.check, detail);
      } else {
        // The fake dialer refuses: a CONNECT dial failure is answered 502 (docs/destinations.md#connect).
        assert.equal(status, 502);
        assert.deepEqual(asked, [detail]);
        const event = b.log.events().reverse().find((e) => e.class_uid === 4001 && e.activity_name === 'Fail');
        assert.ok(event !== undefined, 'NET:FAIL emitted');
      }
      if (/^[0-9x.]+:/i.test(authority)) assert.equal(b.resolver.calls.length, calls, 'IP literals are never resolved');
    });
  }

  it('lists the dropped internal answer on the allow event (NM-07)', async () => {
    await connectStatus('mixed.example.test:443');
    const fail = b.log.events().reverse().find((e) => e.class_uid === 4001 && e.activity_name === 'Fail');
    assert.ok(fail !== undefined);
    const dropped = b.log.events().reverse().find((e) => Array.isArray(e.unmapped.dropped));
    assert.deepEqual(dropped?.unmapped.dropped, ['10.0.0.5 private']);
  });

  it('gives the same ssrf_denied body on CONNECT and on forward HTTP (NM-17)', async () => {
    const viaConnect = await connectStatus('meta.example.test:443');
    const viaForward = await sendRequest({ proxyPort: b.proxyPort, path: 'http://meta.example.test:443/latest/meta-data' });
    assert.equal(viaForward.status, 403);
    assert.deepEqual(JSON.parse(viaForward.body), JSON.parse(viaConnect.body.slice(viaConnect.body.indexOf('{'))));
  });

  it('answers 502 upstream_unreachable when the name does not resolve', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: 'http://nxdomain.example.test:443/' });
    assert.equal(response.status, 502);
    assert.equal((JSON.parse(response.body) as { error: string }).error, 'upstream_unreachable');
  });
});
