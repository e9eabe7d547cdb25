// Forward HTTP never reaches boundary's own listeners, not even with --unsafe-allow-loopback-upstream, and
// not on repeated requests, which use the self-address list parsed once by net/ssrf.ts (perf round, issue 3).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoundaryError } from '../../src/shared/errors.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { sendRequest } from '../harness/proxy-client.js';

let b: RunningBoundary;

before(async () => {
  b = await startBoundary({
    policy: 'version: 1\n',
    allowLoopback: true,
    names: { 'self.example.test': ['127.0.0.1'] },
    dial: (target) => Promise.reject(new BoundaryError('UPSTREAM_CONNECT_REFUSED', `test dialer refuses ${target.host}:${target.port}`)),
  });
  // The ports are known only now: allow the proxy's and the admin listener's own addresses by name and IP.
  const ports = `[${b.proxyPort}, ${b.adminPort}]`;
  await b.writePolicy(`version: 1
network_policies:
  self:
    endpoints:
      - { host: self.example.test, ports: ${ports} }
      - { host: 127.0.0.1, ports: ${ports} }
    binaries: [{ path: "/**" }]
`);
  await b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
});

after(() => b?.close());

describe('forward HTTP to boundary itself', () => {
  for (const [label, authority] of [
    ['the proxy listener by name', () => `self.example.test:${b.proxyPort}`],
    ['the proxy listener by IP', () => `127.0.0.1:${b.proxyPort}`],
    ['the admin listener by name', () => `self.example.test:${b.adminPort}`],
  ] as const) {
    it(`refuses ${label} on every request`, async () => {
      const dials = b.dials.length;
      for (let i = 0; i < 3; i++) {
        const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://${authority()}/` });
        assert.equal(response.status, 403, response.body);
        assert.match(response.body, /self-address/);
      }
      assert.equal(b.dials.length, dials, 'nothing was dialled');
    });
  }
});
