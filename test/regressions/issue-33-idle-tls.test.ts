// Regression of issue 33, "a 48 MiB sidecar": two things held TLS memory in every idle sidecar. The upstream client
// built its verifying context (an OpenSSL store of Node's ~150 roots, about 1-2 MiB) at start, though a sidecar whose
// tunnels all pass through never verifies an upstream; it is now built on the first verified upstream. And an ESM
// import of node:tls fills in the module's namespace, whose `rootCertificates` getter decodes the roots into strings
// kept for the process's life; boundary now loads node:tls's functions with require (src/shared/node-tls.ts), as it
// already did node:http's, whose namespace loads undici on Node 22.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { PROJECT_ROOT, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';

/** Builtins whose ESM namespace costs memory nothing in boundary uses; each is loaded with require in src/shared/. */
const REQUIRED_BUILTINS: Readonly<Record<string, string>> = { 'node:http': 'src/shared/node-http.ts', 'node:tls': 'src/shared/node-tls.ts' };
/** After the proxy listens, policy DNS and the admin listener finish starting; a context made by either is seen. */
const SETTLE_MS = 2_000;
const CHILD_TIMEOUT_MS = 30_000;

/** Counts node:tls's createSecureContext calls from the first line of the process; writes them out on SIGUSR2. */
const COUNTING_PRELOAD = `
const tls = require('node:tls');
const { writeFileSync } = require('node:fs');
const create = tls.createSecureContext;
let contexts = 0;
tls.createSecureContext = function countedSecureContext(...args) { contexts++; return create.apply(this, args); };
process.on('SIGUSR2', () => writeFileSync(process.env.CONTEXT_COUNT_FILE, String(contexts)));
`;

async function countAfterSignal(file: string, pid: number): Promise<number> {
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 100; i++) {
    const text = await readFile(file, 'utf8').catch(() => '');
    if (text !== '') return Number(text);
    await sleep(50);
  }
  throw new Error('the preload wrote no count');
}

describe('issue 33: no TLS memory in an idle sidecar', () => {
  it('imports node:http and node:tls for their types only, outside the two files that require them', async () => {
    const offenders: string[] = [];
    const entries = await readdir(join(PROJECT_ROOT, 'src'), { withFileTypes: true, recursive: true });
    const files = entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
    assert.ok(files.length > 100, `src/ listed: ${files.length} files`);
    for (const file of files) {
      const path = relative(PROJECT_ROOT, file);
      const text = await readFile(file, 'utf8');
      for (const [builtin, owner] of Object.entries(REQUIRED_BUILTINS)) {
        if (path === owner) continue;
        // verbatimModuleSyntax keeps `import { type X } from ...` as an import of the module: only `import type` loads nothing.
        const statements = text.match(new RegExp(`^import\\b[^;]*?from '${builtin}';`, 'gms')) ?? [];
        for (const statement of statements) if (!statement.startsWith('import type ')) offenders.push(`${path}: ${statement.replace(/\s+/g, ' ')}`);
      }
    }
    assert.deepEqual(offenders, []);
  });

  it('counts the contexts it is asked to count', { timeout: CHILD_TIMEOUT_MS }, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-issue-33-tls-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'count.cjs'), COUNTING_PRELOAD);
    const file = join(dir, 'count');
    const script = "require('node:tls').createSecureContext({}); process.kill(process.pid, 'SIGUSR2'); setTimeout(() => {}, 100);";
    await promisify(execFile)(process.execPath, ['--require', join(dir, 'count.cjs'), '-e', script], { env: { ...process.env, CONTEXT_COUNT_FILE: file }, timeout: CHILD_TIMEOUT_MS });
    assert.equal(await readFile(file, 'utf8'), '1');
  });

  it('makes no TLS context before something needs one', { timeout: CHILD_TIMEOUT_MS * 2 }, async (t) => {
    // dir holds boundary's --state-dir and the count its preload writes: removed after the hook that kills boundary.
    await withStateDir(t, 'boundary-issue-33-tls-', async (dir) => {
      await copyFile(join(PROJECT_ROOT, 'policies', 'default.yaml'), join(dir, 'policy.yaml'));
      await writeFile(join(dir, 'hosts'), '');
      await writeFile(join(dir, 'count.cjs'), COUNTING_PRELOAD);
      const file = join(dir, 'count');
      const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${join(dir, 'count.cjs')}`, CONTEXT_COUNT_FILE: file };
      const cli = spawnBoundaryCli(standaloneFlags(dir), { env });
      t.after(() => (cli.child.exitCode === null && cli.child.signalCode === null ? cli.kill() : undefined));
      await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
      await sleep(SETTLE_MS);
      assert.equal(await countAfterSignal(file, cli.child.pid as number), 0, 'TLS contexts made by an idle boundary');
  });
  });
});
