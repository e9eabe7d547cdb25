// The few file operations the /proc walk needs, bounded where a file can be large, behind an interface so tests can
// count reads or point the walk at another root. The calls are synchronous behind resolved promises: the walk runs
// on proc-worker.ts's own thread, where blocking is the point. A /proc syscall takes microseconds, and a trip
// through libuv's pool (node:fs/promises) cost four to five times the whole walk here (docs/identity.md#cost).
// Errors keep node's `code` (ENOENT, EACCES, ...), which the walk turns into failure reasons.

import { closeSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, statSync } from 'node:fs';

/** Reads in flight at once where an injected ProcFs is asynchronous; the blocking set runs them one by one anyway. */
export const PROC_READS_IN_FLIGHT = 16;

export interface ProcFs {
  /** The first `maxBytes` of a file (/proc files report size 0, so this reads until EOF or the bound). */
  readText(path: string, maxBytes: number): Promise<string>;
  readdir(path: string): Promise<string[]>;
  readlink(path: string): Promise<string>;
  /** Follows links: the uid of /proc/<pid> is the process's, a root's dev:ino names its file system. */
  stat(path: string): Promise<{ readonly uid: number; readonly dev: number; readonly ino: number }>;
  lstat(path: string): Promise<{ isSymbolicLink(): boolean }>;
}

/** Read per call: one page-sized table read rarely needs more, and a large one grows by this much at a time. */
const READ_CHUNK_BYTES = 65_536;

function readTextSync(path: string, maxBytes: number): string {
  const fd = openSync(path, 'r');
  try {
    const chunks: Buffer[] = [];
    let length = 0;
    while (length < maxBytes) {
      const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, maxBytes - length));
      const bytesRead = readSync(fd, chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      length += bytesRead;
    }
    return Buffer.concat(chunks, length).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Settles in the same microtask as the call: a rejection keeps node's error and its code. */
function now<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (err) {
    return Promise.reject(err);
  }
}

/** Blocking calls: for a worker thread (proc-worker.ts), or a test's own loop; never a server's event loop. */
export const SYNC_PROC_FS: ProcFs = {
  readText: (path, maxBytes) => now(() => readTextSync(path, maxBytes)),
  readdir: (path) => now(() => readdirSync(path)),
  readlink: (path) => now(() => readlinkSync(path)),
  stat: (path) => now(() => statSync(path)),
  lstat: (path) => now(() => lstatSync(path)),
};

/** node's error code, or undefined for anything else. */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Runs `task` over `items` with at most `limit` in flight; results keep the order of `items`. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  async function worker(): Promise<void> {
    while (next < items.length) {
      const i = next++;
      out[i] = await task(items[i] as T);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
