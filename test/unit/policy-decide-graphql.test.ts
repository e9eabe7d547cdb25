// decide() on GraphQL endpoints against the reference's policy cases (openshell-l7.md §1.5, GQ-U G10-G18).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { graphqlFromJson } from '../../src/graphql/envelope.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';

const GQ_U = `version: 1
network_policies:
  gh:
    endpoints:
      - host: api.github.test
        port: 443
        path: /repos/**
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: "*", path: "/**" }
      - host: api.github.test
        port: 443
        path: /graphql
        protocol: graphql
        enforcement: enforce
        persisted_queries: allow_registered
        graphql_persisted_queries:
          abc123: { operation_type: query, operation_name: Viewer, fields: [viewer] }
        rules:
          - allow: { operation_type: query, fields: [viewer, repository] }
          - allow: { operation_type: mutation, operation_name: "Issue*", fields: [createIssue, deleteRepository] }
        deny_rules:
          - { operation_type: mutation, fields: [deleteRepository] }
      - host: ro.github.test
        port: 443
        protocol: graphql
        enforcement: audit
        access: read-only
    binaries: [{ path: "/**" }]
`;

const policy = parsePolicy(GQ_U);
const ask = (envelope: unknown, host = 'api.github.test', path = '/graphql') =>
  decide(policy, { adapter: 'l7', host, port: 443, method: 'POST', path, graphql: graphqlFromJson(envelope) });

describe('decide: GraphQL endpoints', () => {
  it('G10/G11: every root field must be allowed', () => {
    assert.equal(ask({ query: 'query RepoLookup { repository(owner: "o", name: "r") { id } }' }).verdict, 'allow');
    const miss = ask({ query: '{ viewer { login } adminAuditLog }' });
    assert.equal(miss.verdict, 'deny');
    assert.equal(miss.reason, 'no-rule-matched');
    assert.match(miss.detail, /not permitted by policy gh/);
  });

  it('G12/G13: one denied batch item denies the batch; a deny rule wins over a matching allow', () => {
    assert.equal(ask([{ query: '{ viewer { login } }' }, { query: 'mutation DeleteRepo { deleteRepository }' }]).reason, 'deny-rule-matched');
    const both = ask({ query: 'mutation IssueDelete { deleteRepository }' });
    assert.equal(both.reason, 'deny-rule-matched');
    assert.match(both.detail, /GraphQL operation blocked by endpoint policy/);
    assert.equal(ask({ query: 'mutation IssueNew { createIssue }' }).verdict, 'allow');
    assert.equal(ask({ query: 'mutation Other { createIssue }' }).verdict, 'deny', 'operation_name Issue* does not take Other');
  });

  it('G14/G15: a hash-only query is decided as its registry entry; an unknown hash is denied', () => {
    const ext = (h: string) => ({ operationName: 'Anything', extensions: { persistedQuery: { version: 1, sha256Hash: h } } });
    assert.equal(ask(ext('abc123')).verdict, 'allow');
    const missing = ask(ext('missing'));
    assert.equal(missing.verdict, 'deny');
    assert.match(missing.detail, /persisted query is not registered/);
  });

  it('G16: an unparsable request is denied even on an audit endpoint', () => {
    const d = ask({ query: 'query {' }, 'ro.github.test', '/');
    assert.equal(d.verdict, 'deny');
    assert.equal(d.reason, 'graphql-rejected');
  });

  it('G17: access read-only allows queries; a mutation is a soft deny (audit here)', () => {
    assert.equal(ask({ query: '{ viewer { login } }' }, 'ro.github.test', '/').reason, 'preset-allowed');
    assert.equal(ask({ query: 'mutation { createIssue }' }, 'ro.github.test', '/').verdict, 'audit');
  });

  it('G18: a REST endpoint beside it keeps its paths, and cannot let a mutation through /graphql', () => {
    const rest = decide(policy, { adapter: 'l7', host: 'api.github.test', port: 443, method: 'POST', path: '/repos/org/repo/issues' });
    assert.equal(rest.verdict, 'allow');
    assert.equal(ask({ query: '{ viewer { login } }' }).verdict, 'allow');
    assert.equal(ask({ query: 'mutation M { createIssue }' }).verdict, 'deny');
  });
});
