// Regressions found in review of issue 2 (policy engine): `issues show 2`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normaliseHost } from '../../src/net/host.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { cpuGrowth } from '../harness/cpu-growth.js';

/** CPU for 4x the adversarial path against 1x: about 4 when linear, 256 for the backtracking of four wildcards. */
const GROWTH_LIMIT = 8;

const policy = (host: string, extra = '') =>
  parsePolicy(`version: 1
network_policies:
  api:
    endpoints:
      - host: "${host}"
        port: 443
${extra}    binaries: [{ path: "/**" }]
`);

describe('issue 2 regressions', () => {
  it('spells a Unicode policy host the way requests are spelled (capital sharp s maps to ss)', () => {
    const request = normaliseHost('ẞ.example.com');
    assert.ok(request.ok);
    const verdict = decide(policy('ẞ.example.com'), { adapter: 'connect', host: request.host, port: 443 });
    assert.equal(verdict.verdict, 'allow');
  });

  it('decides an adversarial 4 KiB path against a many-wildcard rule without backtracking', (t) => {
    const p = policy(
      'api.example.test',
      `        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/*a*a*a*a*b" }
`,
    );
    const decideFor = (n: number) => decide(p, { adapter: 'forward', host: 'api.example.test', port: 443, method: 'GET', path: `/${'a'.repeat(n)}` });
    assert.equal(decideFor(4000).verdict, 'deny');
    const growth = cpuGrowth(() => decideFor(1000), () => decideFor(4000));
    t.diagnostic(`4x the path took ${growth.toFixed(1)}x the CPU`);
    assert.ok(growth < GROWTH_LIMIT, `4x the path took ${growth.toFixed(1)}x the CPU`);
  });

  it('reports a class containing a dot in a query value glob as a coded problem, not a crash', () => {
    assert.throws(
      () =>
        policy(
          'api.example.test',
          `        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**", query: { v: "[a.b]" } }
`,
        ),
      { code: 'POLICY_INVALID' },
    );
  });
});
