// The image's build runs: tsc's output bundled by scripts/bundle.ts, as the Dockerfile makes it and stageBoundary()
// reproduces (the pod, first-run and netns tests run the same copy). Checked as a user would meet it: health, an
// allowed and a denied request through the proxy (curl), both worker threads (binary identity in required mode; a
// policy reload big enough for the parse worker), a middleware service reached through proto/, and --version. And
// that a started sidecar reads no package from node_modules: the ones it loads at start are in the bundle.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { BUNDLED_PACKAGES } from '../../scripts/bundle.js';
import { PROJECT_ROOT, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { stageBoundary } from '../harness/stage.js';

const CHECK_TIMEOUT_MS = 180_000;
/** After the proxy listens, policy DNS and the admin listener finish starting; what they load is seen. */
const SETTLE_MS = 2_000;
/** Appends each file node compiles as CommonJS to LOADED_FILES, from the process's first line. */
const CJS_RECORDER = `
const Module = require('node:module');
const { appendFileSync } = require('node:fs');
const compile = Module.prototype._compile;
Module.prototype._compile = function recordedCompile(content, filename) {
  appendFileSync(process.env.LOADED_FILES, filename + '\\n');
  return compile.apply(this, arguments);
};
`;
/** Appends each file: URL the ES module loader resolves to LOADED_FILES (the hooks run on a thread of their own). */
const ESM_RECORDER = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (resolved.url.startsWith('file:')) appendFileSync(process.env.LOADED_FILES, new URL(resolved.url).pathname + '\\n');
  return resolved;
}
`;
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

  it(`starts without reading a package from node_modules: ${BUNDLED_PACKAGES.join(', ')} are in the bundle`, { timeout: CHECK_TIMEOUT_MS }, async (t) => {
    const staged = await stageBoundary();
    // The recorders append to dir/loaded on every module the child loads: removed once the child is dead.
    await withStateDir(t, 'boundary-image-loads-', async (dir) => {
      await copyFile(join(PROJECT_ROOT, 'policies', 'default.yaml'), join(dir, 'policy.yaml'));
      await writeFile(join(dir, 'hosts'), '');
      await writeFile(join(dir, 'cjs.cjs'), CJS_RECORDER);
      await writeFile(join(dir, 'esm-hooks.mjs'), ESM_RECORDER);
      await writeFile(join(dir, 'esm.mjs'), `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(join(dir, 'esm-hooks.mjs')).href)});\n`);
      const loaded = join(dir, 'loaded');
      await writeFile(loaded, '');
      const recorders = `--require ${join(dir, 'cjs.cjs')} --import ${join(dir, 'esm.mjs')}`;
      const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} ${recorders}`, LOADED_FILES: loaded };
      const cli = spawnBoundaryCli(standaloneFlags(dir), { staged, env });
      t.after(() => (cli.child.exitCode === null && cli.child.signalCode === null ? cli.kill() : undefined));
      await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
      await sleep(SETTLE_MS);
      const files = (await readFile(loaded, 'utf8')).split('\n').filter(Boolean);
      assert.ok(files.some((file) => file.endsWith('/dist/app/main.js')), `the recorders see the entry: ${files.join(', ')}`);
      assert.deepEqual(files.filter((file) => file.includes('/node_modules/')), [], 'files read from node_modules at start');
    });
  });
});
