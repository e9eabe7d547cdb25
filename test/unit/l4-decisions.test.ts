// The l4 stage's memo of connection-level decisions (chain/l4-decisions.ts): the same answer decide() gives, the same
// frozen decision for a host:port asked again under one policy object, never remembered across policies or for a
// process claim, and bounded.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createL4Decisions, MAX_REMEMBERED_L4_DECISIONS } from '../../src/chain/l4-decisions.js';
import { NOT_LOOKED_UP, type ProcessClaim } from '../../src/policy/binary-identity.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { withGeneration } from '../../src/policy/store.js';
import { ADAPTERS, type EgressIntent } from '../../src/policy/types.js';

const POLICY = parsePolicy(`version: 1
network_policies:
  web:
    name: web
    endpoints:
      - host: api.example.test
        port: 443
      - host: "*.cdn.example.test"
        port: 80
    binaries:
      - path: "/**"
  tools:
    name: tools
    endpoints:
      - host: git.example.test
        port: 22
    binaries:
      - path: /usr/bin/git
`);

const process = (exe: string, pid: number): ProcessClaim => ({
  kind: 'process',
  pid,
  exe,
  ancestors: [],
  cmdlinePaths: [],
  resolved: new Map(),
  verified: new Set([exe]),
  distrusted: [],
});

describe('l4 decisions', () => {
  const HOSTS: [string, number][] = [
    ['api.example.test', 443],
    ['api.example.test', 80],
    ['a.cdn.example.test', 80],
    ['git.example.test', 22],
    ['other.example.test', 443],
  ];

  it('answers as decide() does, for every claim', () => {
    const decideL4 = createL4Decisions();
    for (const identity of [undefined, NOT_LOOKED_UP, process('/usr/bin/git', 7), process('/usr/bin/curl', 8)]) {
      for (const [host, port] of HOSTS) {
        for (let round = 0; round < 2; round++) {
          const intent = { adapter: 'forward' as const, host, port, identity };
          assert.deepEqual(decideL4(POLICY, intent), decide(POLICY, intent), `${host}:${port} ${identity?.kind} round ${round}`);
        }
      }
    }
  });

  it('hands back the same decision for a host:port asked again, per claim, and decides a process claim anew', () => {
    const decideL4 = createL4Decisions();
    const none = decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443 });
    assert.equal(decideL4(POLICY, { adapter: 'l7', host: 'api.example.test', port: 443 }), none);
    const notLookedUp = decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443, identity: NOT_LOOKED_UP });
    assert.notEqual(notLookedUp, none);
    assert.equal(decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443, identity: NOT_LOOKED_UP }), notLookedUp);
    const first = decideL4(POLICY, { adapter: 'forward', host: 'git.example.test', port: 22, identity: process('/usr/bin/git', 7) });
    const second = decideL4(POLICY, { adapter: 'forward', host: 'git.example.test', port: 22, identity: process('/usr/bin/git', 9) });
    assert.notEqual(second, first);
    assert.equal(second.binaryPid, 9);
  });

  it('asks its evaluate (the stages\' timed decide) only for what it does not remember', () => {
    const asked: EgressIntent[] = [];
    const decideL4 = createL4Decisions((policy, intent) => {
      asked.push(intent);
      return decide(policy, intent);
    });
    const intent = { adapter: 'forward' as const, host: 'api.example.test', port: 443 };
    decideL4(POLICY, intent);
    decideL4(POLICY, { ...intent, adapter: 'connect' });
    assert.equal(asked.length, 1);
    decideL4(POLICY, { ...intent, port: 80 });
    decideL4(withGeneration(POLICY, POLICY.generation + 1), intent);
    assert.equal(asked.length, 3);
    // A process claim and a request are never remembered: each is asked.
    for (let i = 0; i < 2; i++) decideL4(POLICY, { ...intent, identity: process('/usr/bin/git', 7) });
    for (let i = 0; i < 2; i++) decideL4(POLICY, { ...intent, method: 'GET', path: '/' });
    assert.equal(asked.length, 7);
  });

  it('starts over under a new policy object (a reload), whose generation the decisions carry', () => {
    const decideL4 = createL4Decisions();
    const before = decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443 });
    const reloaded = withGeneration(POLICY, POLICY.generation + 1);
    const after = decideL4(reloaded, { adapter: 'forward', host: 'api.example.test', port: 443 });
    assert.notEqual(after, before);
    assert.equal(after.generation, POLICY.generation + 1);
  });

  it('decides requests (a method) and continuations (after) without the memo', () => {
    const decideL4 = createL4Decisions();
    const l4 = decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443 });
    const request = { adapter: 'forward' as const, host: 'api.example.test', port: 443, method: 'GET', path: '/', after: l4 };
    assert.notEqual(decideL4(POLICY, request), decideL4(POLICY, request));
  });

  it('stays bounded: past the bound it forgets, and still answers right', () => {
    const decideL4 = createL4Decisions();
    const first = decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443 });
    for (let i = 0; i < MAX_REMEMBERED_L4_DECISIONS; i++) decideL4(POLICY, { adapter: 'forward', host: `h${i}.example.test`, port: 443 });
    const again = decideL4(POLICY, { adapter: 'forward', host: 'api.example.test', port: 443 });
    assert.notEqual(again, first);
    assert.deepEqual(again, first);
  });

  it('gives every adapter the same decision, so CONNECT (connect-l4) shares the memo: the adapter decides nothing', () => {
    for (const identity of [undefined, NOT_LOOKED_UP, process('/usr/bin/git', 7)]) {
      for (const [host, port] of HOSTS) {
        const forward = decide(POLICY, { adapter: 'forward', host, port, identity });
        for (const adapter of ADAPTERS) assert.deepEqual(decide(POLICY, { adapter, host, port, identity }), forward, `${adapter} ${host}:${port}`);
      }
    }
    const decideL4 = createL4Decisions();
    const connect = decideL4(POLICY, { adapter: 'connect', host: 'api.example.test', port: 443 });
    assert.ok(Object.isFrozen(connect));
    assert.equal(decideL4(POLICY, { adapter: 'connect', host: 'api.example.test', port: 443 }), connect);
  });
});
