// Issue 33: a denial's audit line is made from its line template, as an allowed request's is. A denial carries
// `unmapped.replay` (an object, with a list of query keys), which the memo of line templates refused, so every denial
// was rendered whole: four times the CPU of an allowed request's line (bench/proxy/ocsf-layers.mjs).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAuditMemo } from '../../src/telemetry/audit-memo.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { FORWARD_ALLOWED_EVENT } from '../harness/audit-events.js';

/** A denial as chain/events.ts builds one, with a new replay object each time, as each request has. */
function denial(path: string, queryKeys: readonly string[]): AuditEvent {
  return {
    ...FORWARD_ALLOWED_EVENT,
    action: 'DENIED',
    message: `FORWARD denied GET origin.example.test:8080${path}`,
    unmapped: {
      adapter: 'forward',
      verdict: 'deny',
      reason_code: 'no-rule-matched',
      status_code: 403,
      replay: { scheme: 'http', method: 'GET', host: 'origin.example.test', port: 8080, path, query_keys: [...queryKeys] },
    },
  };
}

test('issue 33: a repeated denial is memoised with its replay, and found again only with the same replay', () => {
  const memo = createAuditMemo<string>();
  assert.equal(memo.admit(denial('/admin', ['a', 'b'])), undefined, 'seen once: not yet');
  const snapshot = memo.admit(denial('/admin', ['a', 'b']));
  assert.ok(snapshot !== undefined, 'a denial seen twice is memoised');
  assert.deepEqual({ ...(snapshot.unmapped?.replay as object) }, denial('/admin', ['a', 'b']).unmapped?.replay);
  memo.remember(snapshot, 'template');
  assert.equal(memo.find(denial('/admin', ['a', 'b'])), 'template');
  assert.equal(memo.find(denial('/admin', ['a'])), undefined);
  assert.equal(memo.find(denial('/admin', ['b', 'a'])), undefined);
  const otherPath = denial('/admin', ['a', 'b']);
  (otherPath.unmapped?.replay as { path: string }).path = '/other';
  assert.equal(memo.find(otherPath), undefined);
});
