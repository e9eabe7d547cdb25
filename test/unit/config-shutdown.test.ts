// The shutdown flags of `boundary run`: --shutdown-drain-ms (the drain deadline, config.shutdownDrainMs) and
// --close-grace-ms (the in-flight grace, config.limits.closeGraceMs), validated by parseConfig like the other
// numeric flags, with a bound a Node timer can hold. The CLI's exit codes with them: issue-15-exit-forced-cli.

import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { SHUTDOWN_DRAIN_MS } from '../../src/app/boundary-shutdown.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { parseRunFlags, runCommand } from '../../src/app/cli/run.js';
import { MAX_TIMER_MS, parseConfig } from '../../src/app/config.js';
import { configIssuePaths } from '../harness/config-issues.js';
import { CLOSE_GRACE_MS } from '../../src/proxy/limits.js';

const BAD_VALUES = ['0', '-1', '1.5', '1e3', 'soon', String(MAX_TIMER_MS + 1)];

describe('boundary run: --shutdown-drain-ms and --close-grace-ms', () => {
  it('default to SHUTDOWN_DRAIN_MS and CLOSE_GRACE_MS', () => {
    const config = parseConfig({});
    assert.deepEqual([config.shutdownDrainMs, config.limits.closeGraceMs], [SHUTDOWN_DRAIN_MS, CLOSE_GRACE_MS]);
  });

  it('map onto shutdownDrainMs and limits.closeGraceMs, in either flag form', () => {
    const config = parseConfig(parseRunFlags(['--shutdown-drain-ms', '25000', '--close-grace-ms=20000'], '/'));
    assert.deepEqual([config.shutdownDrainMs, config.limits.closeGraceMs], [25_000, 20_000]);
    assert.equal(parseConfig(parseRunFlags(['--shutdown-drain-ms', String(MAX_TIMER_MS)], '/')).shutdownDrainMs, MAX_TIMER_MS);
  });

  it('refuse anything but a positive integer a timer can hold, naming the key', () => {
    for (const bad of BAD_VALUES) {
      assert.deepEqual(configIssuePaths(['--shutdown-drain-ms', bad]), ['shutdownDrainMs'], bad);
      assert.deepEqual(configIssuePaths(['--close-grace-ms', bad]), ['limits.closeGraceMs'], bad);
    }
  });

  it('are usage errors when given twice or without a value', () => {
    for (const argv of [['--shutdown-drain-ms', '1', '--shutdown-drain-ms', '2'], ['--close-grace-ms=1', '--close-grace-ms', '2'], ['--shutdown-drain-ms']]) {
      assert.equal(typeof parseRunFlags(argv, '/'), 'string', argv.join(' '));
    }
  });

  it('make boundary run exit 2 with the issue on stderr for a bad value, before anything starts', async () => {
    let stderr = '';
    const io: CliIo = {
      stdout: { write: () => true },
      stderr: { write: (text: string) => (stderr += text) },
      env: {},
      cwd: tmpdir(),
      signal: AbortSignal.abort(),
      now: Date.now,
    };
    assert.equal(await runCommand(['--policy', 'missing.yaml', '--shutdown-drain-ms', '0'], io), 2);
    assert.match(stderr, /^boundary run: shutdownDrainMs: .*\(CONFIG_INVALID\)$/m);
  });
});
