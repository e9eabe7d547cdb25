// Issue 29 (what boundary tells users is what it does): an L7 denial's body said `"rule": null` where `policy explain`
// named the rule (the missing allow rule). The body now names the rule explain names: the deny rule that matched, or
// the allow rule that is missing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { json, sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

describe('issue 29: a denial names the rule explain names', () => {
  let origin: Origin;
  let b: RunningBoundary;
  before(async () => {
    origin = await httpOrigin();
    b = await startBoundary({
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        rules: [{ allow: { method: GET, path: "/ok/**" } }]
        deny_rules: [{ method: GET, path: "/ok/secret/**" }]
    binaries: [{ path: "/**" }]
`,
    });
  });
  after(async () => {
    await b?.close();
    await origin?.close();
  });

  async function explained(url: string): Promise<Record<string, unknown>> {
    const response = await fetch(`http://127.0.0.1:${b.adminPort}/v1/explain?url=${encodeURIComponent(url)}`);
    return (await response.json()) as Record<string, unknown>;
  }

  for (const [name, path, rule] of [
    ['no rule matched: the missing allow rule', '/nope', 'GET /nope'],
    ['a deny rule matched: that rule', '/ok/secret/x', 'GET /ok/secret/**'],
  ] as const) {
    it(name, async () => {
      const url = `http://api.example.test:${origin.port}${path}`;
      const response = await sendRequest({ proxyPort: b.proxyPort, path: url });
      assert.equal(response.status, 403);
      const body = json(response);
      const explain = await explained(url);
      assert.equal(explain.verdict, 'deny');
      assert.equal(body.rule, rule);
      assert.equal(explain.rule, body.rule);
    });
  }
});
