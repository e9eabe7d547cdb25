// decide() against the pinned reference tables, L4 matching: host patterns (HA-14 to HA-17), the hostless
// allowed_ips form, ports, and requests on an uninspected endpoint. The rows are in test/harness/decide-cases-hosts.ts.

import { describe } from 'node:test';
import { HOST_CASES } from '../harness/decide-cases-hosts.js';
import { decideCaseTests } from '../harness/decide-table.js';

describe('decide() against the pinned reference tables', () => {
  decideCaseTests(HOST_CASES);
});
