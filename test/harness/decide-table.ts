// Shared pieces of the decide() reference tables (docs/policy.md, Access presets and rules through Deny precedence
// and enforcement; peer-tests HA/LD rows). Data-driven: each case names a policy snippet, an already-normalised
// intent and the expected decision; intents carry lower-case A-label hosts, as adapters hand them over after
// net/host.ts. Here: the case shape, shorthands, snippet builders and the runner; the rows are in decide-cases-*.ts.

import assert from 'node:assert/strict';
import { it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { BinaryIdentity, ProcessClaim } from '../../src/policy/binary-identity.js';
import type { DecisionReason, EgressIntent, Policy, Verdict } from '../../src/policy/types.js';

export interface Expect {
  readonly verdict: Verdict;
  readonly reason: DecisionReason;
  /** `null` asserts that no policy decided (decision.policy undefined). */
  readonly policy?: string | null;
  readonly endpointIndex?: number;
  readonly binaryIdentity?: BinaryIdentity;
}

export interface DecideCase {
  readonly group: string;
  readonly label: string;
  readonly policy: string;
  readonly intent: EgressIntent;
  readonly expect: Expect;
}

// ---- intent and expectation shorthands -------------------------------------------------------------------

/** A process with no ancestors: what `policy explain --binary` asks about. */
export function exe(path: string, ancestors: readonly string[] = []): ProcessClaim {
  return { kind: 'process', exe: path, ancestors };
}

export function conn(host: string, port = 443, binary?: string): EgressIntent {
  return binary === undefined ? { adapter: 'connect', host, port } : { adapter: 'connect', host, port, identity: exe(binary) };
}

/** An inspected request: `GET /path?query` on host:443. */
export function req(method: string, target: string, host = 'api.example.com', binary?: string): EgressIntent {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const base = { adapter: 'l7' as const, host, port: 443, method, path };
  const withQuery = q < 0 ? base : { ...base, query: target.slice(q + 1) };
  return binary === undefined ? withQuery : { ...withQuery, identity: exe(binary) };
}

export const ALLOW_L4: Expect = { verdict: 'allow', reason: 'endpoint-allowed' };
export const MISS: Expect = { verdict: 'deny', reason: 'no-endpoint-matched', policy: null };
export const RULE_OK: Expect = { verdict: 'allow', reason: 'rule-allowed' };
export const PRESET_OK: Expect = { verdict: 'allow', reason: 'preset-allowed' };
export const NO_RULE: Expect = { verdict: 'deny', reason: 'no-rule-matched' };
export const DENY_RULE: Expect = { verdict: 'deny', reason: 'deny-rule-matched' };
export const AUDIT_NO_RULE: Expect = { verdict: 'audit', reason: 'no-rule-matched' };
export const AUDIT_DENY_RULE: Expect = { verdict: 'audit', reason: 'deny-rule-matched' };
/** A json-rpc or mcp request decided without its parsed body: fails closed, even under audit. */
export const JSONRPC_UNREAD: Expect = { verdict: 'deny', reason: 'jsonrpc-rejected' };
export const BINARY_MISS: Expect = { verdict: 'deny', reason: 'binary-not-allowed' };

// ---- policy snippets ---------------------------------------------------------------------------------------

export const ANY_BINARY = '    binaries: [{ path: "/**" }]';

/** One L4 endpoint under key `p`. */
export function l4Policy(endpoint: string): string {
  return `version: 1\nnetwork_policies:\n  p:\n    endpoints:\n      - ${endpoint}\n${ANY_BINARY}\n`;
}

export function hostPolicy(host: string): string {
  return l4Policy(`{ host: "${host}", port: 443 }`);
}

/** One enforced rest endpoint on api.example.com:443 with the given allow rules and deny rules (YAML lines). */
export function restPolicy(rules: readonly string[], denyRules: readonly string[] = [], extra = ''): string {
  const lines = [
    'version: 1',
    'network_policies:',
    '  p:',
    '    endpoints:',
    '      - host: api.example.com',
    '        port: 443',
    '        protocol: rest',
    '        enforcement: enforce',
  ];
  if (extra) lines.push(extra);
  lines.push('        rules:', ...rules.map((r) => `          - allow: ${r}`));
  if (denyRules.length > 0) lines.push('        deny_rules:', ...denyRules.map((r) => `          - ${r}`));
  lines.push(ANY_BINARY);
  return `${lines.join('\n')}\n`;
}

// ---- the table -----------------------------------------------------------------------------------------------

/** A case list and its `add`: each table module builds one and exports its cases. */
export function caseTable(): { readonly cases: DecideCase[]; add(group: string, label: string, policy: string, intent: EgressIntent, expect: Expect): void } {
  const cases: DecideCase[] = [];
  return {
    cases,
    add(group, label, policy, intent, expect) {
      cases.push({ group, label, policy, intent, expect });
    },
  };
}

// ---- runner --------------------------------------------------------------------------------------------------

const parsed = new Map<string, Policy>();
function policyFor(text: string): Policy {
  let policy = parsed.get(text);
  if (policy === undefined) {
    policy = parsePolicy(text, { source: 'decide-table' });
    parsed.set(text, policy);
  }
  return policy;
}

/** One test per case, named `group: label -> verdict (reason)`; call inside the tables' describe(). */
export function decideCaseTests(cases: readonly DecideCase[]): void {
  for (const c of cases) {
    const { verdict, reason } = c.expect;
    it(`${c.group}: ${c.label} -> ${verdict} (${reason})`, () => {
      const decision = decide(policyFor(c.policy), c.intent);
      const got = { verdict: decision.verdict, reason: decision.reason };
      assert.deepEqual(got, { verdict, reason }, `detail: ${decision.detail}`);
      if (c.expect.policy === null) assert.equal(decision.policy, undefined);
      else if (c.expect.policy !== undefined) assert.equal(decision.policy, c.expect.policy);
      if (c.expect.endpointIndex !== undefined) assert.equal(decision.endpointIndex, c.expect.endpointIndex);
      if (c.expect.binaryIdentity !== undefined) assert.equal(decision.binaryIdentity, c.expect.binaryIdentity);
      assert.equal(decision.generation, 0);
      assert.equal(typeof decision.detail, 'string');
      if (c.intent.query) assert.ok(!decision.detail.includes(c.intent.query), 'detail never carries the query');
      // A request decided from its connection-level allow (the request chain's l7 stage) decides exactly alike.
      if (c.intent.method !== undefined) {
        const { adapter, host, port, identity } = c.intent;
        const l4 = decide(policyFor(c.policy), identity === undefined ? { adapter, host, port } : { adapter, host, port, identity });
        if (l4.verdict !== 'deny') assert.deepEqual(decide(policyFor(c.policy), { ...c.intent, after: l4 }), decision, 'decided after the L4 allow');
      }
    });
  }
}
