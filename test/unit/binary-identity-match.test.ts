// Binary matching as docs/identity.md#matching describes it, one row per reference case (B1-B12, B19): exact
// paths and globs against the executable or any ancestor, argv never granting, the symlink-expanded form, the
// empty list, endpoint-only and unavailable identities. decide() is pure: claims are built by hand here.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { binaryPatterns, type IdentityClaim, identityNeededAt, narrowByBinary, NOT_LOOKED_UP, pathsToResolve, policyNeedsIdentity, type ProcessClaim } from '../../src/policy/binary-identity.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { DecisionReason, Verdict } from '../../src/policy/types.js';

/** One entry per row's policy: host, port 443, optional L7 rules, the binaries as written. */
function policyOf(host: string, binaries: readonly string[], rules = ''): string {
  const list = binaries.map((b) => `{ path: "${b}" }`).join(', ');
  return `version: 1
network_policies:
  p:
    name: row-policy
    endpoints:
      - host: ${host}
        port: 443
${rules}    binaries: [${list}]
`;
}

const CURL_RULES = `        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/v1/**" }
`;

function proc(exe: string, ancestors: readonly string[] = [], cmdlinePaths: readonly string[] = [], resolved?: Record<string, string>): ProcessClaim {
  return { kind: 'process', exe, ancestors, cmdlinePaths, ...(resolved === undefined ? {} : { resolved: new Map(Object.entries(resolved)) }) };
}

interface Row {
  readonly id: string;
  readonly label: string;
  readonly policy: string;
  readonly host: string;
  readonly claim: IdentityClaim | undefined;
  readonly request?: { method: string; path: string };
  readonly verdict: Verdict;
  readonly reason: DecisionReason;
  /** The ancestor the decision names as the match. */
  readonly via?: string;
}

const GIT = policyOf('github.com', ['/usr/bin/git']);
const CLAUDE = policyOf('api.anthropic.com', ['/usr/local/bin/claude']);
const ROWS: readonly Row[] = [
  { id: 'B1', label: 'python3 under git reaches github.com through its ancestor', policy: GIT, host: 'github.com', claim: proc('/usr/bin/python3', ['/usr/bin/git']), verdict: 'allow', reason: 'endpoint-allowed', via: '/usr/bin/git' },
  { id: 'B2', label: 'python3 under bash does not', policy: GIT, host: 'github.com', claim: proc('/usr/bin/python3', ['/usr/bin/bash']), verdict: 'deny', reason: 'binary-not-allowed' },
  { id: 'B3', label: 'a deep chain: git two levels up', policy: GIT, host: 'github.com', claim: proc('/usr/bin/python3', ['/usr/bin/sh', '/usr/bin/git']), verdict: 'allow', reason: 'endpoint-allowed', via: '/usr/bin/git' },
  { id: 'B4', label: 'claude itself, no ancestors', policy: CLAUDE, host: 'api.anthropic.com', claim: proc('/usr/local/bin/claude'), verdict: 'allow', reason: 'endpoint-allowed' },
  { id: 'B5', label: '/usr/bin/* takes node', policy: policyOf('a.example.com', ['/usr/bin/*']), host: 'a.example.com', claim: proc('/usr/bin/node'), verdict: 'allow', reason: 'endpoint-allowed' },
  {
    id: 'B6',
    label: '/usr/local/bin/* takes node launched by claude',
    policy: policyOf('a.example.com', ['/usr/local/bin/*']),
    host: 'a.example.com',
    claim: proc('/usr/bin/node', ['/usr/local/bin/claude']),
    verdict: 'allow',
    reason: 'endpoint-allowed',
    via: '/usr/local/bin/claude',
  },
  { id: 'B7', label: '* does not cross a /', policy: policyOf('a.example.com', ['/usr/bin/*']), host: 'a.example.com', claim: proc('/usr/bin/subdir/node'), verdict: 'deny', reason: 'binary-not-allowed' },
  {
    id: 'B8',
    label: 'an exact path named only on the command line grants nothing',
    policy: policyOf('a.example.com', ['/usr/local/bin/my-tool']),
    host: 'a.example.com',
    claim: proc('/usr/bin/node', ['/usr/bin/bash'], ['/usr/local/bin/my-tool']),
    verdict: 'deny',
    reason: 'binary-not-allowed',
  },
  {
    id: 'B9',
    label: 'a glob matching only the command line grants nothing',
    policy: policyOf('a.example.com', ['/usr/local/bin/*']),
    host: 'a.example.com',
    claim: proc('/usr/bin/node', [], ['/usr/local/bin/script.js']),
    verdict: 'deny',
    reason: 'binary-not-allowed',
  },
  { id: 'B10a', label: 'expanded symlink form: python3.11', policy: policyOf('a.example.com', ['/usr/bin/python3', '/usr/bin/python3.11']), host: 'a.example.com', claim: proc('/usr/bin/python3.11'), verdict: 'allow', reason: 'endpoint-allowed' },
  { id: 'B10b', label: 'expanded symlink form: python3', policy: policyOf('a.example.com', ['/usr/bin/python3', '/usr/bin/python3.11']), host: 'a.example.com', claim: proc('/usr/bin/python3'), verdict: 'allow', reason: 'endpoint-allowed' },
  { id: 'B10c', label: 'expanded symlink form: curl', policy: policyOf('a.example.com', ['/usr/bin/python3', '/usr/bin/python3.11']), host: 'a.example.com', claim: proc('/usr/bin/curl'), verdict: 'deny', reason: 'binary-not-allowed' },
  {
    id: 'B10d',
    label: 'the written path resolved in the workload (python3 -> python3.11) matches the kernel path',
    policy: policyOf('a.example.com', ['/usr/bin/python3']),
    host: 'a.example.com',
    claim: proc('/usr/bin/python3.11', [], [], { '/usr/bin/python3': '/usr/bin/python3.11' }),
    verdict: 'allow',
    reason: 'endpoint-allowed',
  },
  { id: 'B11a', label: 'an empty executable path is no curl', policy: policyOf('a.example.com', ['/usr/bin/curl']), host: 'a.example.com', claim: proc(''), verdict: 'deny', reason: 'binary-not-allowed' },
  { id: 'B11b', label: 'curl itself', policy: policyOf('a.example.com', ['/usr/bin/curl']), host: 'a.example.com', claim: proc('/usr/bin/curl'), verdict: 'allow', reason: 'endpoint-allowed' },
  { id: 'B12', label: 'endpoint-only: an unlisted binary passes', policy: policyOf('a.example.com', ['/usr/bin/curl']), host: 'a.example.com', claim: undefined, verdict: 'allow', reason: 'endpoint-allowed' },
  {
    id: 'B19a',
    label: 'the right endpoint and rule from the wrong binary',
    policy: policyOf('a.example.com', ['/usr/bin/curl'], CURL_RULES),
    host: 'a.example.com',
    claim: proc('/usr/bin/python3'),
    request: { method: 'GET', path: '/v1/x' },
    verdict: 'deny',
    reason: 'binary-not-allowed',
  },
  {
    id: 'B19b',
    label: 'the same request from curl',
    policy: policyOf('a.example.com', ['/usr/bin/curl'], CURL_RULES),
    host: 'a.example.com',
    claim: proc('/usr/bin/curl'),
    request: { method: 'GET', path: '/v1/x' },
    verdict: 'allow',
    reason: 'rule-allowed',
  },
  {
    id: 'B19c',
    label: 'the right binary, a path no rule allows',
    policy: policyOf('a.example.com', ['/usr/bin/curl'], CURL_RULES),
    host: 'a.example.com',
    claim: proc('/usr/bin/curl'),
    request: { method: 'GET', path: '/v2/x' },
    verdict: 'deny',
    reason: 'no-rule-matched',
  },
  { id: 'literal', label: 'a ? without * is literal', policy: policyOf('a.example.com', ['/opt/x?']), host: 'a.example.com', claim: proc('/opt/xy'), verdict: 'deny', reason: 'binary-not-allowed' },
  { id: 'empty', label: 'an empty binaries list admits no process', policy: policyOf('a.example.com', []), host: 'a.example.com', claim: proc('/usr/bin/curl'), verdict: 'deny', reason: 'binary-not-allowed' },
  {
    id: 'unavailable',
    label: 'no identity where the entry needs one fails closed',
    policy: policyOf('a.example.com', ['/usr/bin/curl']),
    host: 'a.example.com',
    claim: { kind: 'unavailable', failure: 'owner-not-found' },
    verdict: 'deny',
    reason: 'identity-unavailable',
  },
  { id: 'any', label: '/** needs no identity', policy: policyOf('a.example.com', ['/**']), host: 'a.example.com', claim: NOT_LOOKED_UP, verdict: 'allow', reason: 'endpoint-allowed' },
];

describe('binaries matching (docs/identity.md#matching)', () => {
  for (const row of ROWS) {
    it(`${row.id}: ${row.label} -> ${row.verdict} (${row.reason})`, () => {
      const policy = parsePolicy(row.policy);
      const decision = decide(policy, { adapter: 'connect', host: row.host, port: 443, identity: row.claim, ...row.request });
      assert.deepEqual([decision.verdict, decision.reason], [row.verdict, row.reason], decision.detail);
      assert.equal(decision.binaryAncestor, row.via);
      if (row.reason === 'binary-not-allowed' || row.reason === 'endpoint-allowed') assert.equal(decision.policy === undefined, row.verdict === 'deny');
      if (row.verdict === 'allow') assert.equal(decision.policyName, 'row-policy', 'the policy name is reported');
    });
  }

  it('names the binary, its ancestors and the script in a denial, and labels each identity', () => {
    const policy = parsePolicy(policyOf('a.example.com', ['/usr/bin/curl']));
    const script = decide(policy, { adapter: 'connect', host: 'a.example.com', port: 443, identity: proc('/usr/bin/python3.11', ['/usr/bin/bash'], ['/app/run.py']) });
    assert.equal(
      script.detail,
      'binary /usr/bin/python3.11 is not allowed to reach a.example.com:443 by policy p (check its binaries list and symlinks); ancestors: /usr/bin/bash; command line: /app/run.py (a script runs as its interpreter)',
    );
    assert.deepEqual([script.binaryIdentity, script.binary, script.identityFailure], ['process', '/usr/bin/python3.11', undefined]);
    const missing = decide(policy, { adapter: 'connect', host: 'a.example.com', port: 443, identity: { kind: 'unavailable', failure: 'permission-denied', detail: 'pid 7' } });
    assert.deepEqual([missing.binaryIdentity, missing.identityFailure], ['unavailable', 'permission-denied']);
    assert.match(missing.detail, /could not be identified \(permission-denied: pid 7\); policy p needs its binary/);
    const none = decide(policy, { adapter: 'connect', host: 'a.example.com', port: 443 });
    assert.equal(none.binaryIdentity, 'endpoint-only');
    const elsewhere = decide(policy, { adapter: 'connect', host: 'b.example.com', port: 443, identity: NOT_LOOKED_UP });
    assert.deepEqual([elsewhere.reason, elsewhere.binaryIdentity], ['no-endpoint-matched', 'not-needed']);
  });

  it('keeps /** entries without an identity and drops only the entries that need one', () => {
    const policy = parsePolicy(`version: 1
network_policies:
  any:
    endpoints: [{ host: a.example.com, port: 443 }]
    binaries: [{ path: "/**" }]
  gh:
    endpoints: [{ host: a.example.com, port: 443 }]
    binaries: [{ path: /usr/bin/gh }]
`);
    const narrowed = narrowByBinary(policy.endpoints, { kind: 'unavailable', failure: 'timeout' });
    assert.deepEqual(narrowed.endpoints.map((e) => e.policy), ['any']);
    assert.deepEqual([narrowed.identity, narrowed.failure, narrowed.unavailable], ['unavailable', 'timeout', false]);
    const decision = decide(policy, { adapter: 'connect', host: 'a.example.com', port: 443, identity: NOT_LOOKED_UP });
    assert.deepEqual([decision.verdict, decision.policy, decision.binaryIdentity], ['allow', 'any', 'unavailable']);
  });

  it('looks up only where an entry lists binaries other than /**, and resolves only the exact paths', () => {
    const policy = parsePolicy(`version: 1
network_policies:
  any:
    endpoints: [{ host: open.example.com, port: 443 }]
    binaries: [{ path: "/**" }]
  tools:
    endpoints: [{ host: tools.example.com, port: 443 }]
    binaries: [{ path: /usr/bin/python3 }, { path: "/opt/*/bin/tool" }, { path: /usr/bin/python3 }]
`);
    assert.equal(policyNeedsIdentity(policy), true);
    assert.equal(identityNeededAt(policy, 'open.example.com', 443), false);
    assert.equal(identityNeededAt(policy, 'tools.example.com', 443), true);
    assert.equal(identityNeededAt(policy, 'tools.example.com', 80), false);
    assert.deepEqual(pathsToResolve(policy, { host: 'tools.example.com', port: 443 }), ['/usr/bin/python3']);
    assert.deepEqual(pathsToResolve(policy, { host: 'open.example.com', port: 443 }), []);
    assert.equal(policyNeedsIdentity(parsePolicy(policyOf('a.example.com', ['/**']))), false);
    assert.deepEqual(binaryPatterns(policy, { host: 'tools.example.com', port: 443 }), { paths: ['/usr/bin/python3'], globs: ['/opt/*/bin/tool'] });
  });
});

describe('verified executables and every holder (docs/identity.md#verification, #shared-sockets)', () => {
  const policy = parsePolicy(policyOf('a.example.com', ['/usr/bin/curl', '/usr/local/bin/agent']));
  const at = (identity: IdentityClaim) => decide(policy, { adapter: 'forward', host: 'a.example.com', port: 443, identity });

  it('grants only on what was verified: an unverified executable or ancestor grants nothing', () => {
    const verified = { ...proc('/usr/bin/curl', ['/usr/local/bin/agent']), verified: new Set(['/usr/bin/curl']) } as const;
    assert.equal(at(verified).verdict, 'allow');
    const launcherOnly = { ...proc('/usr/bin/python3', ['/usr/local/bin/agent']), verified: new Set<string>() } as const;
    assert.deepEqual([at(launcherOnly).verdict, at(launcherOnly).reason], ['deny', 'binary-not-allowed']);
  });

  it('names a listed path whose file failed verification, with its failure and no binary', () => {
    const fake = { ...proc('/usr/bin/curl', ['/usr/bin/bash']), pid: 9, verified: new Set<string>(), distrusted: [{ path: '/usr/bin/curl', failure: 'executable-unverified' as const }] };
    const decision = at(fake);
    assert.deepEqual(
      [decision.reason, decision.binaryIdentity, decision.identityFailure, decision.binary],
      ['identity-unavailable', 'unavailable', 'executable-unverified', undefined],
    );
    assert.match(decision.detail, /\(pid 9\) could not be verified: its executable \/usr\/bin\/curl failed with executable-unverified/);
    const ancestor = { ...proc('/usr/bin/python3', ['/usr/local/bin/agent']), verified: new Set<string>(), distrusted: [{ path: '/usr/local/bin/agent', failure: 'executable-changed' as const }] };
    assert.deepEqual([at(ancestor).identityFailure, at(ancestor).detail.includes('its ancestor /usr/local/bin/agent')], ['executable-changed', true]);
  });

  it('allows a connection held by several processes only when every one is allowed, and names the one refused', () => {
    const curl = { ...proc('/usr/bin/curl'), pid: 10 };
    const python = { ...proc('/usr/bin/python3.11'), pid: 11 };
    const shared = at({ ...curl, holders: [python] });
    assert.deepEqual([shared.verdict, shared.reason, shared.binary, shared.binaryPid], ['deny', 'binary-not-allowed', '/usr/bin/python3.11', 11]);
    assert.match(shared.detail, /also held by pid 10 \/usr\/bin\/curl, and every holder must be allowed/);
    const both = at({ ...curl, holders: [{ ...proc('/usr/bin/python3.11', ['/usr/local/bin/agent']), pid: 12 }] });
    assert.deepEqual([both.verdict, both.binary, both.binaryPid], ['allow', '/usr/bin/curl', 10]);
  });
});
