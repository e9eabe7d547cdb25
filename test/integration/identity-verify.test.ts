// Executable verification against real processes (docs/identity.md#verification): a file is hashed once however
// many processes run it or lookups ask, its pin is kept, and the pin table's capacity (MAX_PINNED_PATHS) refuses a
// new path once full without growing; a process of a private user namespace is checked in its parent's view.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { type ProcFs, SYNC_PROC_FS } from '../../src/identity/proc-fs.js';
import type { ChainLink } from '../../src/identity/proc-process.js';
import { createScanContext } from '../../src/identity/proc-scan.js';
import { MAX_PINNED_PATHS, verifyExecutable, viewOf } from '../../src/identity/proc-verify.js';
import { realExe } from '../harness/identity-processes.js';

const SLEEP = realExe('/usr/bin/sleep');
const BASH = realExe('/bin/bash');

describe('executable verification', () => {
  const children: ChildProcess[] = [];
  after(() => {
    for (const child of children) child.kill('SIGKILL');
  });
  function sleeper(): ChainLink & { exe: string } {
    const child = spawn(SLEEP, ['60'], { stdio: 'ignore' });
    children.push(child);
    return { pid: child.pid as number, exe: SLEEP, deleted: false };
  }
  let digests = 0;
  const counting: ProcFs = {
    ...SYNC_PROC_FS,
    digest(path, maxBytes) {
      digests++;
      return SYNC_PROC_FS.digest(path, maxBytes);
    },
  };

  it('hashes a file once for every process and lookup, and keeps its pin', async () => {
    const ctx = createScanContext({ root: '/proc', fs: counting, skipPids: [], now: Date.now });
    const links = [sleeper(), sleeper()];
    for (let round = 0; round < 3; round++) {
      for (const link of links) assert.equal(await verifyExecutable(ctx, link, await viewOf(ctx, [link], 0, new Map())), undefined);
    }
    assert.equal(digests, 1, 'one digest served six verifications');
    assert.equal(ctx.verify.pins.size, 1);
  });

  it('refuses a path not pinned yet once the table is full, and does not grow it', async () => {
    const ctx = createScanContext({ root: '/proc', fs: SYNC_PROC_FS, skipPids: [], now: Date.now });
    for (let i = 0; i < MAX_PINNED_PATHS; i++) ctx.verify.pins.set(`0:0\0/pinned/${i}`, 'x');
    const link = sleeper();
    const view = await viewOf(ctx, [link], 0, new Map());
    assert.deepEqual(await verifyExecutable(ctx, link, view), { path: SLEEP, failure: 'pin-table-full' });
    assert.equal(ctx.verify.pins.size, MAX_PINNED_PATHS);
    ctx.verify.pins.delete('0:0\0/pinned/0');
    assert.equal(await verifyExecutable(ctx, link, view), undefined, 'a free slot pins it');
    assert.equal(ctx.verify.pins.size, MAX_PINNED_PATHS);
  });

  it('checks a process of a private user namespace in its nearest ancestor\'s view, and refuses one without such an ancestor', async () => {
    const ctx = createScanContext({ root: '/proc', fs: SYNC_PROC_FS, skipPids: [], now: Date.now });
    // unshare execs bash in its own process, which says so once it runs: its parent is this process.
    const child = spawn('unshare', ['-Ur', BASH, '-c', 'echo ready; read -r _'], { stdio: ['pipe', 'pipe', 'ignore'] });
    children.push(child);
    await once(child.stdout as NodeJS.ReadableStream, 'data');
    const inUserns = { pid: child.pid as number, exe: BASH, deleted: false };
    const parent: ChainLink = { pid: process.pid, exe: realExe(process.execPath), deleted: false };
    assert.equal(await viewOf(ctx, [inUserns, parent], 0, new Map()), process.pid);
    assert.equal(await viewOf(ctx, [inUserns], 0, new Map()), undefined);
    assert.equal(await verifyExecutable(ctx, inUserns, process.pid), undefined, 'the same file in the parent\'s view');
    assert.deepEqual(await verifyExecutable(ctx, inUserns, undefined), { path: BASH, failure: 'executable-unverified' });
  });
});
