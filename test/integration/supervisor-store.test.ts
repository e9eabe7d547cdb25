// The SupervisorStore contract against the in-memory store, with and without a state file, then what only the
// state file promises: durable resolved mutations, reopening, and refusing a corrupt or unknown-version file.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BoundaryError } from '../../src/shared/errors.js';
import { createMemoryStore } from '../../src/supervisor/store/memory.js';
import { attach, publication, runStoreContract } from '../contracts/supervisor-store.contract.js';

runStoreContract('memory', async () => {
  const store = createMemoryStore();
  assert.equal(store.kind, 'memory');
  await store.start();
  return { store, cleanup: () => store.close() };
});

async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'boundary-store-'));
}

runStoreContract('file', async () => {
  const dir = await tempDir();
  const store = createMemoryStore({ stateFile: join(dir, 'state.json') });
  assert.equal(store.kind, 'file');
  await store.start();
  return {
    store,
    async cleanup() {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('file store', () => {
  let dir = '';
  before(async () => {
    dir = await tempDir();
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('a resolved mutation is already on disk, written 0600 with no temporary file left', async () => {
    const file = join(dir, 'durable.json');
    const store = createMemoryStore({ stateFile: file });
    await store.start();
    await Promise.all([store.publishSandbox(publication('sb')), store.expect('sb', 'i1', 100)]);
    const onDisk = JSON.parse(await readFile(file, 'utf8')) as { version: number; sandboxes: unknown[]; instances: unknown[] };
    assert.equal(onDisk.version, 1);
    assert.equal(onDisk.sandboxes.length, 1);
    assert.equal(onDisk.instances.length, 1);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    await assert.rejects(stat(`${file}.tmp`), { code: 'ENOENT' });
    await store.close();
    await store.close();
  });

  it('reopening the file restores everything', async () => {
    const file = join(dir, 'reopen.json');
    const store = createMemoryStore({ stateFile: file });
    await store.start();
    await store.publishSandbox(publication('sb', { policyHash: 'p9' }));
    await store.raiseGeneration('sb', 4);
    await store.expect('sb', 'expected', 100);
    await store.expect('sb', 'due', 10);
    await store.attached(attach('sb', 'attached'));
    await store.claimDue(50, 'r1', true, () => 'withdrawn');
    await store.claimHookDeliveries(50, 400, 10);
    // No await here: close() must flush what is still pending.
    void store.status('sb', 'attached', 's1', { state: 'applied', generation: 4, policyHash: 'p9', error: null });
    const before = { sandboxes: await store.sandboxes(), instances: await store.instances(), withdrawals: await store.withdrawals() };
    await store.close();

    const reopened = createMemoryStore({ stateFile: file });
    await reopened.start();
    assert.deepEqual(await reopened.sandboxes(), before.sandboxes);
    assert.deepEqual(await reopened.instances(), before.instances);
    assert.deepEqual(await reopened.withdrawals(), before.withdrawals);
    assert.equal((await reopened.instance('sb', 'attached'))?.effectiveGeneration, 4);
    assert.deepEqual(await reopened.claimHookDeliveries(399, 500, 10), [], 'the lease survives the restart');
    assert.equal((await reopened.publishSandbox(publication('sb', { policyHash: 'p9' }))).generation, 4);
    await reopened.close();
  });

  it('a missing file is an empty state', async () => {
    const store = createMemoryStore({ stateFile: join(dir, 'missing.json') });
    await store.start();
    assert.deepEqual(await store.sandboxes(), []);
    await store.close();
  });

  it('a corrupt file or an unknown format version is refused, naming the file', async () => {
    const corrupt = join(dir, 'corrupt.json');
    await writeFile(corrupt, '{"version": 1, "sandb');
    const invalid = (err: BoundaryError) => err.code === 'STORE_STATE_INVALID';
    await assert.rejects(createMemoryStore({ stateFile: corrupt }).start(), (err: BoundaryError) => invalid(err) && err.message.includes(corrupt));
    const future = join(dir, 'future.json');
    await writeFile(future, JSON.stringify({ version: 99, nextSeq: 1, sandboxes: [], instances: [], withdrawals: [] }));
    await assert.rejects(
      createMemoryStore({ stateFile: future }).start(),
      (err: BoundaryError) => invalid(err) && err.message.includes(future) && err.message.includes('version 99'),
    );
    const wrongShape = join(dir, 'shape.json');
    await writeFile(wrongShape, JSON.stringify({ version: 1, nextSeq: 1, sandboxes: {}, instances: [], withdrawals: [] }));
    await assert.rejects(createMemoryStore({ stateFile: wrongShape }).start(), (err: BoundaryError) => invalid(err) && err.message.includes('sandboxes'));
  });
});
