// The --state-dir file behind the single-replica store: prepare the directory (created 0700) and read and validate
// the file at start, write it atomically (0600, fsync, rename), and coalesce the mutations of STATE_WRITE_COALESCE_MS
// into one write. A write that failed is retried until one succeeds, and nothing resolves as durable meanwhile.
// Knows nothing of what the state means: memory.ts hands it snapshots and gets told when changes are durable.

import { mkdir, open, readFile, rename, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BoundaryError } from '../../shared/errors.js';
import type { Logger } from '../../telemetry/logger.js';
import type { StoreChange, StoredInstance, StoredSandbox } from './store.js';
import type { KeptWithdrawal } from './withdrawals.js';

/** Mutations within this long of the first one share one write of the state file. */
const STATE_WRITE_COALESCE_MS = 50;
/** After a failed write, the whole state is written again this often until a write succeeds. */
export const STATE_WRITE_RETRY_MS = 1_000;
/** The state file's format; a file with another version is refused rather than guessed at. */
const STATE_FILE_VERSION = 1;
const STATE_FILE_MODE = 0o600;
/** A --state-dir that does not exist yet is created with this mode: the file names every sandbox and instance. */
const STATE_DIR_MODE = 0o700;

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

/**
 * Creates the state file's directory (STATE_DIR_MODE) when it is missing; an existing one keeps its mode (a
 * PersistentVolume's, say). STATE_DIR_UNUSABLE when it cannot be created or is not a directory.
 */
export async function prepareStateDir(path: string): Promise<void> {
  const dir = dirname(path);
  try {
    await mkdir(dir, { recursive: true, mode: STATE_DIR_MODE });
    if (!(await stat(dir)).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new BoundaryError('STATE_DIR_UNUSABLE', `--state-dir ${dir} cannot be used: ${(err as Error).message}`, { cause: err });
  }
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(err: Error): void;
  readonly changes: StoreChange[];
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A retry batch may have no caller: its failure is reported through failure(), never as an unhandled rejection.
  promise.catch(() => undefined);
  return { promise, resolve, reject, changes: [] };
}

interface StateFileWriter {
  /** Writes the state now (at start): STATE_DIR_UNUSABLE when it cannot be written, so the start is refused. */
  writeNow(): Promise<void>;
  /**
   * Resolves once the state at the next write (and so `changes`) is durable; `durable(changes)` runs first. Rejects
   * (STORE_UNAVAILABLE) when that write fails; the state is then written again every STATE_WRITE_RETRY_MS, and the
   * changes are told to `durable` with the first write that succeeds.
   */
  commit(changes: readonly StoreChange[]): Promise<void>;
  /**
   * For a call that changed nothing: the state it saw may still be on its way to disk (another caller's change, or
   * one whose write failed), so it resolves once a write of it succeeded, and rejects like commit otherwise.
   */
  settled(): Promise<void>;
  /** Why the last write failed, while no write has succeeded since; undefined when the file holds the state. */
  failure(): string | undefined;
  /** Writes everything pending and stops coalescing and retrying; safe to call more than once. */
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
  let retrying = false;
  let closed = false;
  // Set from a failed write until one succeeds: memory is then ahead of the file, and only a write can say otherwise.
  let failed: string | undefined;
  // Changes of failed batches: in memory, not yet on disk; subscribers hear of them once they are.
  let unwritten: StoreChange[] = [];

  const render = (): string => `${JSON.stringify({ version: STATE_FILE_VERSION, ...snapshot() } satisfies StateFile)}\n`;

  function written(batch: Deferred): void {
    if (failed !== undefined) logger?.info({ stateFile: path }, 'supervisor state file written again; every change since the failure is durable');
    failed = undefined;
    const changes = [...unwritten, ...batch.changes];
    unwritten = [];
    durable(changes);
    batch.resolve();
  }

  function notWritten(batch: Deferred, err: Error): void {
    // Once per failure, not once per retry: the retries repeat it every STATE_WRITE_RETRY_MS.
    if (failed === undefined) {
      logger?.error({ err, stateFile: path }, `writing the supervisor state file failed; writing it again every ${STATE_WRITE_RETRY_MS} ms until it succeeds, /readyz not ready meanwhile`);
    }
    failed = `writing state file ${path} failed: ${err.message}`;
    unwritten.push(...batch.changes);
    batch.reject(new BoundaryError('STORE_UNAVAILABLE', failed, { cause: err }));
  }

  async function flush(): Promise<void> {
    timer = undefined;
    retrying = false;
    const batch = pending;
    // A write in flight schedules the next one when it ends: two writes never share the temporary file.
    if (batch === undefined || inFlight !== undefined) return;
    pending = undefined;
    writing = batch;
    inFlight = writeAtomically(path, render()).then(
      () => written(batch),
      (err: Error) => notWritten(batch, err),
    );
    await inFlight;
    inFlight = undefined;
    writing = undefined;
    if (pending !== undefined) schedule(closed ? 0 : STATE_WRITE_COALESCE_MS);
    else if (failed !== undefined && !closed) {
      pending = deferred();
      schedule(STATE_WRITE_RETRY_MS, true);
    }
  }

  function schedule(delayMs: number, retry = false): void {
    // A caller waiting behind a retry is written at the coalescing pace, not the retry's.
    if (timer !== undefined && retrying && !retry) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (timer !== undefined || inFlight !== undefined) return;
    retrying = retry;
    timer = setTimeout(() => void flush(), delayMs);
  }

  function join(changes: readonly StoreChange[]): Promise<void> {
    pending ??= deferred();
    pending.changes.push(...changes);
    schedule(STATE_WRITE_COALESCE_MS);
    return pending.promise;
  }

  return {
    async writeNow() {
      try {
        await writeAtomically(path, render());
      } catch (err) {
        throw new BoundaryError('STATE_DIR_UNUSABLE', `cannot write state file ${path}: ${(err as Error).message}`, { cause: err });
      }
    },

    commit: join,

    settled() {
      if (pending !== undefined) return join([]);
      if (writing !== undefined) return writing.promise;
      return failed === undefined ? Promise.resolve() : join([]);
    },

    failure: () => failed,

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
