// The --state-dir file behind the single-replica store: read and validate it at start, write it atomically (0600,
// fsync, rename), and coalesce the mutations of STATE_WRITE_COALESCE_MS into one write. Knows nothing of what the
// state means: memory.ts hands it snapshots and gets told when a batch of changes is durable.

import { open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BoundaryError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import type { StoreChange, StoredInstance, StoredSandbox } from './store.js';
import type { KeptWithdrawal } from './withdrawals.js';

/** Mutations within this long of the first one share one write of the state file. */
const STATE_WRITE_COALESCE_MS = 50;
/** The state file's format; a file with another version is refused rather than guessed at. */
const STATE_FILE_VERSION = 1;
const STATE_FILE_MODE = 0o600;

/** A withdrawal as the file holds it: its lease survives a restart. */
export interface StateWithdrawal extends KeptWithdrawal {
  readonly leaseUntil: number | null;
}

/** What the store keeps; the file adds its format version. */
export interface StateContents {
  readonly nextSeq: number;
  readonly sandboxes: StoredSandbox[];
  readonly instances: StoredInstance[];
  readonly withdrawals: StateWithdrawal[];
}

interface StateFile extends StateContents {
  readonly version: number;
}

function parseStateFile(text: string, path: string): StateFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new BoundaryError('STORE_STATE_INVALID', `state file ${path} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const state = raw as Partial<StateFile> | null;
  if (state === null || typeof state !== 'object') throw new BoundaryError('STORE_STATE_INVALID', `state file ${path} does not hold an object`);
  if (state.version !== STATE_FILE_VERSION) {
    throw new BoundaryError(
      'STORE_STATE_INVALID',
      `state file ${path} has format version ${String(state.version)}; this supervisor reads version ${STATE_FILE_VERSION}`,
    );
  }
  for (const key of ['sandboxes', 'instances', 'withdrawals'] as const) {
    const list = state[key];
    if (!Array.isArray(list) || !list.every((row) => row !== null && typeof row === 'object' && typeof row.sandboxId === 'string')) {
      throw new BoundaryError('STORE_STATE_INVALID', `state file ${path}: ${key} is not a list of records`);
    }
  }
  if (typeof state.nextSeq !== 'number') throw new BoundaryError('STORE_STATE_INVALID', `state file ${path}: nextSeq is not a number`);
  return state as StateFile;
}

/** The state in `path`, or undefined when there is no file yet (a first start). */
export async function readStateFile(path: string): Promise<StateFile | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new BoundaryError('STORE_UNAVAILABLE', `cannot read state file ${path}: ${(err as Error).message}`, { cause: err });
  }
  return parseStateFile(text, path);
}

/** Writes `text` to `path` so that a crash leaves the old or the new file, never a torn one. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp`;
  const file = await open(tmp, 'w', STATE_FILE_MODE);
  try {
    // The mode given to open() applies only when it creates the file: a leftover temporary file keeps its own.
    await file.chmod(STATE_FILE_MODE);
    await file.writeFile(text, 'utf8');
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, path);
  // The rename is durable only once the directory entry is.
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(err: Error): void;
  readonly changes: StoreChange[];
}

interface StateFileWriter {
  /** Resolves once the state at the next write (and so `changes`) is durable; `durable(changes)` runs first. */
  commit(changes: readonly StoreChange[]): Promise<void>;
  /**
   * For a call that changed nothing: the state it saw may still be on its way to disk (another caller's change),
   * so it resolves once that is durable too.
   */
  settled(): Promise<void>;
  /** Writes everything pending and stops coalescing; safe to call more than once. */
  close(): Promise<void>;
}

export function createStateFileWriter(options: {
  readonly path: string;
  /** The whole state, taken when a write starts, so it holds every mutation that joined the batch. */
  readonly snapshot: () => StateContents;
  /** The changes of a batch that is now on disk. */
  readonly durable: (changes: readonly StoreChange[]) => void;
  readonly logger?: Logger | undefined;
}): StateFileWriter {
  const { path, snapshot, durable, logger } = options;
  // At most one write in flight and one pending; every mutation joins the pending one.
  let pending: Deferred | undefined;
  let writing: Deferred | undefined;
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  async function flush(): Promise<void> {
    timer = undefined;
    const batch = pending;
    // A write in flight schedules the next one when it ends: two writes never share the temporary file.
    if (batch === undefined || inFlight !== undefined) return;
    pending = undefined;
    writing = batch;
    const state: StateFile = { version: STATE_FILE_VERSION, ...snapshot() };
    const write = writeAtomically(path, `${JSON.stringify(state)}\n`);
    inFlight = write.then(
      () => {
        durable(batch.changes);
        batch.resolve();
      },
      (err: Error) => {
        logger?.error({ err, stateFile: path }, 'writing the supervisor state file failed');
        batch.reject(new BoundaryError('STORE_UNAVAILABLE', `writing state file ${path} failed: ${err.message}`, { cause: err }));
      },
    );
    await inFlight;
    inFlight = undefined;
    writing = undefined;
    if (pending !== undefined) schedule(closed ? 0 : STATE_WRITE_COALESCE_MS);
  }

  function schedule(delayMs: number): void {
    if (timer !== undefined || inFlight !== undefined) return;
    timer = setTimeout(() => void flush(), delayMs);
  }

  return {
    commit(changes) {
      if (pending === undefined) {
        let resolve!: () => void;
        let reject!: (err: Error) => void;
        const promise = new Promise<void>((res, rej) => {
          resolve = res;
          reject = rej;
        });
        pending = { promise, resolve, reject, changes: [] };
      }
      pending.changes.push(...changes);
      schedule(STATE_WRITE_COALESCE_MS);
      return pending.promise;
    },

    settled: () => (pending ?? writing)?.promise ?? Promise.resolve(),

    async close() {
      closed = true;
      // Ends: each round writes everything pending so far; only callers still mutating could add more.
      while (inFlight !== undefined || pending !== undefined) {
        if (timer !== undefined) clearTimeout(timer);
        timer = undefined;
        if (inFlight !== undefined) await inFlight;
        else await flush();
      }
    },
  };
}
