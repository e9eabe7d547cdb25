// src/graphql/http-request.ts: which GraphQL parameters a request carries, from the URL and a POST body, and what
// servers would read two ways (issue 28, finding 1): refused as graphql-ambiguous, never decided.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type GraphqlHead, type GraphqlRead, graphqlFromHead, graphqlFromPost } from '../../src/graphql/http-request.js';
import { classifyGraphqlWsMessage } from '../../src/graphql/ws-message.js';
import type { GraphqlOperation } from '../../src/policy/graphql-match.js';

const head = (method: string, query: string, extra: Partial<GraphqlHead> = {}): GraphqlHead => ({
  method,
  query,
  contentType: method === 'POST' ? 'application/json' : undefined,
  hasBody: method === 'POST',
  ...extra,
});
const post = (query: string, body: unknown): GraphqlRead => graphqlFromPost(head('POST', query), Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)));
const refusedWith = (read: GraphqlRead | 'hold'): string => {
  assert.ok(read !== 'hold' && 'refused' in read, `expected a refusal, got ${JSON.stringify(read)}`);
  return read.refused.reason;
};
const operations = (read: GraphqlRead | 'hold'): readonly GraphqlOperation[] => {
  assert.ok(read !== 'hold' && 'graphql' in read && 'operations' in read.graphql, JSON.stringify(read));
  return read.graphql.operations;
};
const q = encodeURIComponent;

describe('GraphQL over HTTP: one place for the parameters', () => {
  it('reads a POST body alone, and a GET or bodiless POST from the URL alone', () => {
    assert.deepEqual(operations(post('', { query: '{ viewer }' }))[0]?.fields, ['viewer']);
    assert.deepEqual(operations(graphqlFromHead(head('GET', `query=${q('{ viewer }')}`)))[0]?.fields, ['viewer']);
    const urlOnly = graphqlFromHead(head('POST', `query=${q('mutation { deleteRepository }')}`, { hasBody: false, contentType: undefined }));
    assert.deepEqual(operations(urlOnly)[0], { type: 'mutation', name: undefined, fields: ['deleteRepository'], hashOnly: false });
  });

  it('decides a POST whose JSON body carries no GraphQL parameter (or none at all) on the URL', () => {
    assert.deepEqual(operations(post(`query=${q('mutation M { deleteRepository }')}`, { unrelated: 1 }))[0]?.name, 'M');
    assert.deepEqual(operations(post(`query=${q('{ viewer }')}`, ''))[0]?.fields, ['viewer']);
  });

  it('holds a POST with an application/json body (a UTF-8 charset beside it is fine)', () => {
    for (const contentType of ['application/json', 'Application/JSON; charset=UTF-8', 'application/json;charset="utf-8"']) {
      assert.equal(graphqlFromHead(head('POST', '', { contentType })), 'hold', contentType);
    }
  });

  const ambiguous: [string, GraphqlRead | 'hold'][] = [
    ['query in the URL and the body', post(`query=${q('mutation { d }')}`, { query: '{ viewer }' })],
    ['operationName in the URL, the document in the body', post('operationName=B', { query: 'query A { a } mutation B { b }' })],
    ['variables in the URL beside a body query', post('variables=%7B%7D', { query: '{ viewer }' })],
    ['an empty URL parameter beside a body (express-graphql reads the empty one)', post('query=', { query: '{ viewer }' })],
    ['a persisted id in the URL beside a body', post('documentId=abc', { query: '{ viewer }' })],
    ['URL parameters beside a batch', post(`query=${q('{ a }')}`, [{ query: '{ viewer }' }])],
    ['a form body', graphqlFromHead(head('POST', '', { contentType: 'application/x-www-form-urlencoded' }))],
    ['an application/graphql body', graphqlFromHead(head('POST', '', { contentType: 'application/graphql' }))],
    ['a body without Content-Type', graphqlFromHead(head('POST', '', { contentType: undefined }))],
    ['a UTF-16 charset', graphqlFromHead(head('POST', '', { contentType: 'application/json; charset=utf-16le' }))],
    ['a GET with a body', graphqlFromHead(head('GET', `query=${q('{ a }')}`, { hasBody: true }))],
    ['a repeated URL parameter', graphqlFromHead(head('GET', 'query=%7Ba%7D&query=%7Bb%7D'))],
    ['two persisted ids', graphqlFromHead(head('GET', 'id=one&queryId=two'))],
    ['a parameter in another case', graphqlFromHead(head('GET', `query=${q('{ a }')}&OperationName=B`))],
    ['a bracketed parameter', graphqlFromHead(head('GET', `query[]=${q('{ a }')}`))],
    ['a parameter encoded twice', graphqlFromHead(head('GET', `%2571uery=${q('{ a }')}`))],
    ['a literal ? in the query string', graphqlFromHead(head('GET', `query=${q('{ a } #')}?x`))],
    ['a ; separating parameters', graphqlFromHead(head('GET', `x=1;query=${q('{ a }')}`))],
    ['a value that is not percent-encoding', graphqlFromHead(head('GET', 'query=%E0%A4%A'))],
  ];
  for (const [name, read] of ambiguous) {
    it(`refuses ${name}`, () => {
      assert.equal(refusedWith(read), 'graphql-ambiguous');
    });
  }

  it('reads a percent-encoded parameter name as servers decode it', () => {
    assert.deepEqual(operations(graphqlFromHead(head('GET', `%71uery=${q('{ viewer }')}`)))[0]?.fields, ['viewer']);
  });

  it('ignores ; and ? in a query string that names no GraphQL parameter (a POST body is then read alone)', () => {
    assert.deepEqual(operations(post('token=a;b?c', { query: '{ viewer }' }))[0]?.fields, ['viewer']);
  });

  it('refuses a repeated key in the body or in the URL extensions as json-duplicate-key', () => {
    assert.equal(refusedWith(post('', '{"query":"mutation { d }","query":"{ viewer }"}')), 'json-duplicate-key');
    const extensions = q('{"persistedQuery":{"sha256Hash":"aa","sha256Hash":"bb"}}');
    assert.equal(refusedWith(graphqlFromHead(head('GET', `extensions=${extensions}`))), 'json-duplicate-key');
  });

  it('keeps persisted queries: a URL hash or id alone is a hash-only operation, empty values count as absent', () => {
    const extensions = q(JSON.stringify({ persistedQuery: { version: 1, sha256Hash: 'abc' } }));
    assert.deepEqual(operations(graphqlFromHead(head('GET', `operationName=V&extensions=${extensions}&query=`)))[0], { type: '', name: 'V', fields: [], hashOnly: true, hash: 'abc' });
    const urlOnlyPost = graphqlFromHead(head('POST', 'documentId=doc-1', { hasBody: false }));
    assert.deepEqual(operations(urlOnlyPost)[0], { type: '', name: undefined, fields: [], hashOnly: true, id: 'doc-1' });
  });

  it('treats a document naming an operation or a fragment twice as unreadable', () => {
    const twiceOp = post('', { query: 'query A { a } query A { b }', operationName: 'A' });
    assert.ok('graphql' in twiceOp && 'error' in twiceOp.graphql);
    const twiceFragment = post('', { query: 'query Q { ...F } fragment F on Query { a } fragment F on Query { b }' });
    assert.ok('graphql' in twiceFragment && 'error' in twiceFragment.graphql);
  });

  it('leaves other methods to policy as unreadable (graphql-rejected), not as ambiguous', () => {
    const put = graphqlFromHead(head('PUT', '', { hasBody: true }));
    assert.ok(put !== 'hold' && 'graphql' in put && 'error' in put.graphql);
  });
});

describe('graphql-ws messages', () => {
  it('refuses a message that repeats a key, in the payload or around it (json-duplicate-key)', () => {
    for (const text of [
      '{"type":"subscribe","id":"1","payload":{"query":"mutation { d }","query":"{ viewer }"}}',
      '{"type":"subscribe","type":"ping","id":"1","payload":{"query":"{ viewer }"}}',
    ]) {
      const message = classifyGraphqlWsMessage(text);
      assert.equal(message.kind, 'refused', text);
    }
    assert.equal(classifyGraphqlWsMessage('{"type":"subscribe","id":"1","payload":{"query":"{ viewer }"}}').kind, 'operation');
  });
});
