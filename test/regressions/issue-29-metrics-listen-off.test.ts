// Issue 29 (small untruths): `boundary supervisor --metrics-listen off` was refused as a bad HOST:PORT while
// `--admin-listen off` worked; both listeners are optional and both take `off`.
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { supervisorCommand } from '../../src/app/cli/supervisor.js';
import { recordingIo } from '../harness/cli-io.js';

async function run(argv: string[]): Promise<{ code: number; stderr: string }> {
  const recording = recordingIo(tmpdir());
  return { code: await supervisorCommand(argv, recording.io), stderr: recording.stderr() };
}

describe('issue 29: boundary supervisor --metrics-listen off', () => {
  it('is accepted like --admin-listen off, in both spellings', async () => {
    for (const flags of [['--metrics-listen', 'off'], ['--metrics-listen=off']]) {
      // Past the flags (exit 1 on the missing TLS folder), not a usage error (exit 2).
      const result = await run(['--tls-dir', 'missing-tls', '--policies', 'policies', '--admin-listen', 'off', ...flags]);
      assert.equal(result.code, 1, result.stderr);
      assert.doesNotMatch(result.stderr, /\(USAGE\)/);
      assert.match(result.stderr, /\(ENOENT\)/);
    }
  });

  it('still refuses a metrics address that is neither HOST:PORT nor off', async () => {
    const result = await run(['--tls-dir', 'missing-tls', '--policies', 'policies', '--admin-listen', 'off', '--metrics-listen', 'of']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--metrics-listen.*\(USAGE\)/s);
  });
});
