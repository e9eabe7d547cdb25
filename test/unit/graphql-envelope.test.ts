// The GraphQL envelope reader (src/graphql/envelope.ts) against the reference's parser cases (openshell-l7.md
// §1.1-1.3, G19-G23): operation selection, root fields through aliases and fragments, GET rules, batches.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type GraphqlRead, graphqlFromHead, graphqlFromPost } from '../../src/graphql/http-request.js';
import type { GraphqlRequest } from '../../src/policy/graphql-match.js';

const POST = { method: 'POST', query: '', contentType: 'application/json', hasBody: true };
const read = (r: GraphqlRead | 'hold'): GraphqlRequest => {
  assert.ok(r !== 'hold' && 'graphql' in r, r === 'hold' ? 'hold' : 'refused' in r ? r.refused.problem : '');
  return r.graphql;
};
const body = (v: unknown): GraphqlRequest => read(graphqlFromPost(POST, Buffer.from(typeof v === 'string' ? v : JSON.stringify(v))));
const get = (query: string): GraphqlRead | 'hold' => graphqlFromHead({ method: 'GET', query, contentType: undefined, hasBody: false });
const ops = (r: GraphqlRequest) => {
  assert.ok('operations' in r, 'error' in r ? r.error : '');
  return r.operations;
};
const error = (r: GraphqlRequest): string => {
  assert.ok('error' in r, 'expected an error');
  return r.error;
};

describe('GraphQL envelope', () => {
  it('G19: reads the field name, never the alias', () => {
    const [op] = ops(body({ query: 'mutation M { safeAlias: volumeDelete(volumeId: "x") { id } }', operationName: 'M' }));
    assert.deepEqual(op, { type: 'mutation', name: 'M', fields: ['volumeDelete'], hashOnly: false });
  });

  it('G20: expands root fragments, sorted and deduplicated; a cycle is followed once', () => {
    const [op] = ops(body({ query: 'query Q { ...Root viewer } fragment Root on Query { viewer repository(owner: "o", name: "r") { id } ...Root }' }));
    assert.deepEqual(op?.fields, ['repository', 'viewer']);
  });

  it('G21: several operations need an operationName; a named one is chosen alone', () => {
    assert.match(error(body({ query: 'query A { a } query B { b }' })), /multiple operations/);
    assert.deepEqual(ops(body({ query: 'query A { a } mutation B { b }', operationName: 'B' }))[0]?.fields, ['b']);
    assert.match(error(body({ query: 'query A { a }', operationName: 'C' })), /"C" was not found/);
  });

  it('G22: GET ids must not be combined, nor parameters repeated: both are refused as read two ways', () => {
    for (const query of ['id=one&queryId=two', 'query=%7Ba%7D&query=%7Bb%7D']) {
      const r = get(query);
      assert.ok(r !== 'hold' && 'refused' in r, query);
      assert.equal(r.refused.reason, 'graphql-ambiguous');
    }
  });

  it('G23: a hash-only POST is a persisted operation with no fields', () => {
    const [op] = ops(body({ operationName: 'Viewer', extensions: { persistedQuery: { version: 1, sha256Hash: 'abc123' } } }));
    assert.deepEqual(op, { type: '', name: 'Viewer', fields: [], hashOnly: true, hash: 'abc123' });
  });

  it('decodes + as a space in GET, and reads the shorthand as a query', () => {
    assert.deepEqual(ops(read(get('query=%7B+viewer+%7B+login+%7D+%7D')))[0], { type: 'query', name: undefined, fields: ['viewer'], hashOnly: false });
  });

  it('pools a batch, and refuses an empty one, a non-object item, a parse error and a non-JSON body', () => {
    assert.equal(ops(body([{ query: '{ a }' }, { query: 'mutation { b }' }])).length, 2);
    assert.match(error(body([])), /batch request is empty/);
    assert.match(error(body([1])), /batch item must be an object/);
    assert.match(error(body({ query: 'query {' })), /document parse error/);
    assert.match(error(body('nope')), /not JSON/);
    assert.match(error(body({})), /no query document or persisted query identifier/);
  });

  it('stops graphql-js at the token limit instead of parsing without bound', () => {
    assert.match(error(body({ query: `{ ${'a '.repeat(25_000)} }` })), /document parse error/);
  });
});
