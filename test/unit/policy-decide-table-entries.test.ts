// decide() against the pinned reference tables, how entries combine: deny precedence, audit, uninspected L7,
// overlaps, binaries and no policy (rows in test/harness/decide-cases-entries.ts). Also holds the checks on the
// tables as a whole: the case count over every decide-cases-* module, and emptyPolicy().

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { emptyPolicy } from '../../src/policy/store.js';
import { ENTRY_CASES } from '../harness/decide-cases-entries.js';
import { HOST_CASES } from '../harness/decide-cases-hosts.js';
import { REQUEST_CASES } from '../harness/decide-cases-requests.js';
import { conn, decideCaseTests, req } from '../harness/decide-table.js';

// Every table, for the count check: each file runs only its own rows.
const CASES = [...HOST_CASES, ...REQUEST_CASES, ...ENTRY_CASES];

describe('decide() against the pinned reference tables', () => {
  it('has at least 150 cases', () => {
    assert.ok(CASES.length >= 150, `only ${CASES.length} cases`);
  });

  it('denies everything with no-policy under emptyPolicy()', () => {
    for (const intent of [conn('api.example.com'), req('GET', '/'), conn('10.0.0.7', 5432)]) {
      const decision = decide(emptyPolicy(), intent);
      assert.deepEqual([decision.verdict, decision.reason, decision.policy], ['deny', 'no-policy', undefined]);
    }
  });

  decideCaseTests(ENTRY_CASES);
});
