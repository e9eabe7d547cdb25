// The image's build runs: tsc's output bundled by scripts/bundle.ts, as the Dockerfile makes it and stageBoundary()
// reproduces (the pod, first-run and netns tests run the same copy). Checked as a user would meet it: health, an
// allowed and a denied request through the proxy (curl), both worker threads (binary identity in required mode; a
// policy reload big enough for the parse worker), a middleware service reached through proto/, and --version.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../harness/cli-boundary.js';
import { stageBoundary } from '../harness/stage.js';

const CHECK_TIMEOUT_MS = 180_000;
const CHECKS = ['--version', '/healthz', '/readyz', 'allowed request', 'port outside the policy', 'denied by the middleware service', 'reload of a'];

describe('the image build (scripts/bundle.ts)', () => {
  it('is a bundle: one directory with the entry, both workers and chunks, no per-module files', { timeout: CHECK_TIMEOUT_MS }, async () => {
    const staged = await stageBoundary();
    const files = await readdir(join(staged.dir, 'dist'), { recursive: true });
    for (const file of ['app/main.js', 'app/parse-worker.js', 'app/proc-worker.js']) assert.ok(files.includes(file), `${file} in the bundle`);
    assert.ok(!files.includes('app/boundary.js'), 'the composition root is bundled, not a file of its own');
    assert.ok(files.some((file) => /^app\/chunk-[A-Z0-9]+\.js$/.test(file)), 'dynamic imports stay chunks');
  });

  it('runs: health, allowed and denied requests, both workers, proto/, reload, --version', { timeout: CHECK_TIMEOUT_MS }, async () => {
    const staged = await stageBoundary();
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/harness/check-build.ts', join(staged.dir, 'dist')], {
      cwd: PROJECT_ROOT,
      timeout: CHECK_TIMEOUT_MS,
    });
    const passed = stdout.split('\n').filter((line) => line.startsWith('ok  '));
    for (const check of CHECKS) assert.ok(passed.some((line) => line.includes(check)), `check "${check}" passed: ${stdout}`);
  });
});
