// decide() against the pinned reference tables, inspected requests: path globs, methods, websocket frames, query
// matchers, access presets and the endpoint path selector. The rows are in test/harness/decide-cases-requests.ts.

import { describe } from 'node:test';
import { REQUEST_CASES } from '../harness/decide-cases-requests.js';
import { decideCaseTests } from '../harness/decide-table.js';

describe('decide() against the pinned reference tables', () => {
  decideCaseTests(REQUEST_CASES);
});
