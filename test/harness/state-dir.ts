// A test's scratch directory that outlives whatever the test starts in it.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Runs `run` with a fresh directory (a supervisor's file store, a boundary's --state-dir), removed after every hook
 * `run` registers on `t`: node:test runs a test's hooks in the order they were registered and skips the rest after
 * one fails, and what `run` starts may write there until its own hook has stopped it.
 */
export async function withStateDir(t: { after(fn: () => Promise<unknown>): void }, prefix: string, run: (stateDir: string) => Promise<void>): Promise<void> {
  const stateDir = await mkdtemp(join(tmpdir(), prefix));
  try {
    await run(stateDir);
  } finally {
    t.after(() => rm(stateDir, { recursive: true, force: true }));
  }
}
