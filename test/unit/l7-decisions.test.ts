// The l7 stage's memo of request-level decisions (chain/l7-decisions.ts): the same answer decide() gives, the same
// frozen decision for a request line asked again under one allow, never remembered across policies, for a read body
// or for a long target, and bounded.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createL4Decisions } from '../../src/chain/l4-decisions.js';
import { createL7Decisions, MAX_REMEMBERED_L7_DECISIONS, MAX_REMEMBERED_L7_TARGET_CHARS } from '../../src/chain/l7-decisions.js';
import type { ProcessClaim } from '../../src/policy/binary-identity.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { withGeneration } from '../../src/policy/store.js';
import type { EgressIntent } from '../../src/policy/types.js';

const POLICY = parsePolicy(`version: 1
network_policies:
  svc:
    name: svc
    binaries: [{ path: "/**" }]
    endpoints:
      - { host: plain.example.test, port: 80 }
      - { host: api.example.test, port: 443, path: "/audit/**", protocol: rest, enforcement: audit, access: read-only }
      - host: api.example.test
        port: 443
        protocol: rest
        enforcement: enforce
        deny_rules: [{ method: GET, path: "/v1/admin/**" }]
        rules:
          - allow: { method: GET, path: "/v1/**" }
          - allow: { method: POST, path: /v1/items, query: { mode: fast } }
`);

const decideL4 = createL4Decisions();
const allowOf = (host: string, port: number) => decideL4(POLICY, { adapter: 'l7', host, port });

function request(method: string, path: string, query: string | undefined, host = 'api.example.test', port = 443): EgressIntent {
  const after = allowOf(host, port);
  return query === undefined ? { adapter: 'l7', host, port, method, path, after } : { adapter: 'l7', host, port, method, path, query, after };
}

const LINES: [string, string, string | undefined][] = [
  ['GET', '/v1/items', undefined],
  ['GET', '/v1/items', ''],
  ['get', '/v1/items', undefined],
  ['GET', '/v1/admin/users', undefined],
  ['POST', '/v1/items', 'mode=fast'],
  ['POST', '/v1/items', 'mode=slow'],
  ['POST', '/v1/items', undefined],
  ['DELETE', '/v1/items', undefined],
  ['GET', '/audit/x', undefined],
  ['POST', '/audit/x', undefined],
  ['GET', '/other', 'a=1&b=2'],
];

describe('l7 decisions', () => {
  it('answers as decide() does, asked once and again', () => {
    const decideL7 = createL7Decisions();
    for (let round = 0; round < 3; round++) {
      for (const [method, path, query] of LINES) {
        const intent = request(method, path, query);
        assert.deepEqual(decideL7(POLICY, intent), decide(POLICY, intent), `${method} ${path}?${query} round ${round}`);
      }
      const plain = request('GET', '/x', undefined, 'plain.example.test', 80);
      assert.deepEqual(decideL7(POLICY, plain), decide(POLICY, plain));
    }
  });

  it('hands back the same frozen decision for a request line asked again, and tells methods and queries apart', () => {
    const decideL7 = createL7Decisions();
    const first = decideL7(POLICY, request('POST', '/v1/items', 'mode=fast'));
    assert.ok(Object.isFrozen(first));
    assert.equal(decideL7(POLICY, request('POST', '/v1/items', 'mode=fast')), first);
    const slow = decideL7(POLICY, request('POST', '/v1/items', 'mode=slow'));
    assert.equal(first.verdict, 'allow');
    assert.equal(slow.verdict, 'deny');
    assert.equal(decideL7(POLICY, request('POST', '/v1/items', 'mode=fast')), first);
    assert.notEqual(decideL7(POLICY, request('GET', '/v1/items', 'mode=fast')), first);
  });

  it('asks its evaluate (the l7 stage\'s timed decide) only for what it does not remember', () => {
    const asked: EgressIntent[] = [];
    const decideL7 = createL7Decisions((policy, intent) => {
      asked.push(intent);
      return decide(policy, intent);
    });
    decideL7(POLICY, request('GET', '/v1/items', undefined));
    decideL7(POLICY, request('GET', '/v1/items', undefined));
    assert.equal(asked.length, 1);
    decideL7(POLICY, request('GET', '/v1/items', 'a=1'));
    assert.equal(asked.length, 2);
    const long = request('GET', `/v1/${'a'.repeat(MAX_REMEMBERED_L7_TARGET_CHARS)}`, undefined);
    decideL7(POLICY, long);
    decideL7(POLICY, long);
    assert.equal(asked.length, 4);
  });

  it('starts over under a new policy object (a reload), and decides in full a request whose allow is not of that policy', () => {
    const decideL7 = createL7Decisions();
    const before = decideL7(POLICY, request('GET', '/v1/items', undefined));
    const reloaded = withGeneration(POLICY, POLICY.generation + 1);
    const stale = decideL7(reloaded, request('GET', '/v1/items', undefined));
    assert.notEqual(stale, before);
    assert.deepEqual(stale, decide(reloaded, request('GET', '/v1/items', undefined)));
    assert.equal(stale.generation, POLICY.generation + 1);
  });

  it('decides anew a request with a read body, a process claim, without an allow to continue from, or with a long target', () => {
    const decideL7 = createL7Decisions();
    const claim: ProcessClaim = { kind: 'process', pid: 7, exe: '/usr/bin/curl', ancestors: [], cmdlinePaths: [], resolved: new Map(), verified: new Set(['/usr/bin/curl']), distrusted: [] };
    const allowed = decideL4(POLICY, { adapter: 'l7', host: 'api.example.test', port: 443, identity: claim });
    const held: EgressIntent = { adapter: 'l7', host: 'api.example.test', port: 443, method: 'GET', path: '/v1/items', identity: claim, after: allowed };
    assert.notEqual(decideL7(POLICY, held), decideL7(POLICY, held));
    assert.deepEqual(decideL7(POLICY, held), decide(POLICY, held));
    const graphql = { ...request('POST', '/v1/items', 'mode=fast'), graphql: { operations: [] } } as unknown as EgressIntent;
    assert.notEqual(decideL7(POLICY, graphql), decideL7(POLICY, graphql));
    const alone: EgressIntent = { adapter: 'l7', host: 'api.example.test', port: 443, method: 'GET', path: '/v1/items' };
    assert.notEqual(decideL7(POLICY, alone), decideL7(POLICY, alone));
    assert.deepEqual(decideL7(POLICY, alone), decide(POLICY, alone));
    const long = request('GET', `/v1/${'a'.repeat(MAX_REMEMBERED_L7_TARGET_CHARS)}`, undefined);
    assert.notEqual(decideL7(POLICY, long), decideL7(POLICY, long));
    assert.deepEqual(decideL7(POLICY, long), decide(POLICY, long));
  });

  it('stays bounded: past the bound it forgets, and still answers right', () => {
    const decideL7 = createL7Decisions();
    const first = decideL7(POLICY, request('GET', '/v1/items', undefined));
    for (let i = 0; i < MAX_REMEMBERED_L7_DECISIONS; i++) decideL7(POLICY, request('GET', `/v1/items/${i}`, undefined));
    const again = decideL7(POLICY, request('GET', '/v1/items', undefined));
    assert.notEqual(again, first);
    assert.deepEqual(again, first);
  });
});
