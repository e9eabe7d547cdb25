// What an external middleware service may answer (docs/policy.md#external-middleware-services): each limit and rule
// of middleware/results.ts and middleware/service-headers.ts, and the head a service is shown.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { httpRequestResult } from '../../src/middleware/results.js';
import { applyMutations, MAX_HEADER_MUTATIONS, serviceHeaders } from '../../src/middleware/service-headers.js';

const write = (name: string, value: string, on = 'EXISTING_HEADER_ACTION_OVERWRITE') => ({ operation: 'write', write: { name, value, on_existing: on } });

describe('external middleware results', () => {
  it('reads allow, deny and its reason code; anything else is a failure', () => {
    assert.deepEqual(httpRequestResult({ decision: 'DECISION_ALLOW' }, 10), { verdict: 'allow', body: undefined, findings: [] });
    assert.deepEqual(httpRequestResult({ decision: 'DECISION_DENY', reason_code: 'pii' }, 10), { verdict: 'deny', reasonCode: 'pii', findings: [] });
    assert.deepEqual(httpRequestResult({ decision: 'DECISION_UNSPECIFIED' }, 10), { verdict: 'failed', failure: 'invalid-result' });
    for (const code of ['Pii', '1pii', 'pii-x', 'p'.repeat(65)]) {
      assert.deepEqual(httpRequestResult({ decision: 'DECISION_DENY', reason_code: code }, 10), { verdict: 'failed', failure: 'invalid-result' }, code);
    }
  });

  it('takes a replacement body within the payload limit, an empty one too', () => {
    const r = httpRequestResult({ decision: 'DECISION_ALLOW', has_body: true, body: Buffer.alloc(0) }, 10);
    assert.equal(r.verdict === 'allow' && r.body?.length, 0);
    assert.deepEqual(httpRequestResult({ decision: 'DECISION_ALLOW', has_body: true, body: Buffer.alloc(11) }, 10), { verdict: 'failed', failure: 'payload-too-large' });
  });

  it('refuses the whole result for one bad header change: protected, placeholder, CR/LF, too many', () => {
    const bad = [
      [write('x-ok', 'a'), write('Authorization', 'x')],
      [write('content-type', 'text/plain')],
      [write('x-key', 'openshell:resolve:env:KEY')],
      [write('x-a', 'a\r\nb: c')],
      [write('bad name', 'a')],
      [{ operation: 'remove', remove: { name: 'host' } }],
      Array.from({ length: MAX_HEADER_MUTATIONS + 1 }, (_, i) => write(`x-${i}`, 'v')),
    ];
    for (const mutations of bad) {
      assert.deepEqual(httpRequestResult({ decision: 'DECISION_ALLOW', header_mutations: mutations }, 10), { verdict: 'failed', failure: 'invalid-result' });
    }
  });

  it('applies changes in order: overwrite, append, skip when present, remove', () => {
    const r = httpRequestResult(
      {
        decision: 'DECISION_ALLOW',
        header_mutations: [write('X-A', '2'), write('x-b', '2', 'EXISTING_HEADER_ACTION_APPEND'), write('x-c', '2', 'EXISTING_HEADER_ACTION_SKIP'), { operation: 'remove', remove: { name: 'x-d' } }],
      },
      10,
    );
    assert.ok(r.verdict === 'allow' && r.mutations !== undefined);
    assert.deepEqual(applyMutations(['x-a', '1', 'x-b', '1', 'x-c', '1', 'x-d', '1'], r.mutations), ['x-b', '1', 'x-c', '1', 'X-A', '2', 'x-b', '2']);
  });

  it('counts findings without their text, and refuses too many findings or metadata', () => {
    const r = httpRequestResult({ decision: 'DECISION_ALLOW', findings: [{ type: 'ssn', count: 2 }, { type: 'secret text' }] }, 10);
    assert.deepEqual(r.verdict === 'allow' && r.findings, [{ type: 'middleware.service', count: 3 }]);
    assert.equal(httpRequestResult({ decision: 'DECISION_ALLOW', findings: Array.from({ length: 33 }, () => ({})) }, 10).verdict, 'failed');
    const metadata = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']));
    assert.equal(httpRequestResult({ decision: 'DECISION_ALLOW', metadata }, 10).verdict, 'failed');
  });

  it('shows a service neither credential, routing and framing fields nor a line with a placeholder', () => {
    const shown = serviceHeaders(['Host', 'a', 'Authorization', 'Bearer x', 'Cookie', 'c', 'Content-Length', '2', 'X-Forwarded-For', '1.2.3.4', 'X-Key', 'openshell:resolve:env:K', 'X-Trace', ' t ']);
    assert.deepEqual(shown, [['x-trace', 't']]);
  });
});
