// Issue 15, "Holds against a hostile workload" (`issues show 15`): the soak. A real `boundary run` child serves
// steady allowed traffic from curl, node:http, a WebSocket and policy DNS while a hostile mix runs at the same time
// (zero-byte sockets, slowloris, huge heads, endless chunked bodies, idle and denied tunnels, WebSocket floods, a
// DNS flood, policy reloads, credential rotation). Short form here (SOAK_SECONDS unset, about 60 s); bench/soak.sh
// runs the long one. The figures are printed as diagnostics either way.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { EXIT_OK } from '../../src/app/cli/run.js';
import { formatReport, p99RatioBound, RSS_GROWTH_BOUND_MB } from './soak-report.js';
import { baselineSecondsFor, runSoak, type SoakReport, soakSecondsFrom } from './soak-run.js';

const hostileSeconds = soakSecondsFrom(process.env);
/**
 * The whole test, start-up to exit, is cut off after this: the phases plus start-up, the last waves (30 s each at
 * most), the held sockets' checks and the shutdown, with room for a loaded host.
 */
const SOAK_TEST_TIMEOUT_MS = (hostileSeconds + baselineSecondsFor(hostileSeconds) + 180) * 1_000;

describe('issue 15: the soak', { timeout: SOAK_TEST_TIMEOUT_MS }, () => {
  it('serves every allowed request within the p99 bound while each hostile class is refused with its code, and exits 0 on SIGTERM', async (t) => {
    const cleanups: (() => Promise<void> | void)[] = [];
    t.after(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });
    const report: SoakReport = await runSoak({ hostileSeconds }, (fn) => cleanups.push(fn));
    for (const line of formatReport(report).split('\n')) t.diagnostic(line);
    if (process.env.SOAK_REPORT !== undefined) await writeFile(process.env.SOAK_REPORT, JSON.stringify(report, null, 2));

    assert.deepEqual(report.baseline.failures, [], 'every allowed request of the baseline succeeded');
    assert.deepEqual(report.hostile.failures, [], 'every allowed request under the hostile mix succeeded');
    assert.ok(report.hostile.attempts > 0 && report.baseline.attempts > 0);
    assert.ok(report.p99Ratio <= p99RatioBound(report), `p99 ratio ${report.p99Ratio.toFixed(2)} over ${p99RatioBound(report)}`);
    assert.ok(report.rss.growthMb <= RSS_GROWTH_BOUND_MB, `RSS grew ${report.rss.growthMb.toFixed(1)} MB after warm-up`);
    for (const h of report.hostiles) {
      assert.ok(h.attempts > 0, `${h.name} ran`);
      assert.deepEqual({ name: h.name, unexpected: h.unexpected }, { name: h.name, unexpected: [] }, `${h.name}: ${h.expected}`);
    }
    // An endless body may be cut by a reset before its 413 is read (soak-hostile-http.ts): its audit event is not.
    const chunked = report.hostiles.find((h) => h.name === 'endless-chunked');
    assert.ok((report.events['HTTP Activity:Post:credential-body-too-large'] ?? 0) >= (chunked?.attempts ?? 1), 'one credential-body-too-large event per endless body');
    assert.deepEqual({ code: report.exit.code, signal: report.exit.signal }, { code: EXIT_OK, signal: null }, `exit after SIGTERM in ${report.exit.ms.toFixed(0)} ms`);
    assert.ok(report.exit.ms <= report.exit.deadlineMs);
  });
});
