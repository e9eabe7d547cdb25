// The few file operations the /proc walk needs, bounded where a file can be large, behind an interface so tests can
// count reads or point the walk at another root. The calls are synchronous behind resolved promises: the walk runs
// on proc-worker.ts's own thread, where blocking is the point. A /proc syscall takes microseconds, and a trip
// through libuv's pool (node:fs/promises) cost four to five times the whole walk here (docs/identity.md#cost).
// Errors keep node's `code` (ENOENT, EACCES, ...), which the walk turns into failure reasons.

import { createHash } from 'node:crypto';
import { type BigIntStats, closeSync, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, statSync } from 'node:fs';

/** Reads in flight at once where an injected ProcFs is asynchronous; the blocking set runs them one by one anyway. */
export const PROC_READS_IN_FLIGHT = 16;

export interface ProcFs {
  /** The first `maxBytes` of a file (/proc files report size 0, so this reads until EOF or the bound). */
  readText(path: string, maxBytes: number): Promise<string>;
  readdir(path: string): Promise<string[]>;
  readlink(path: string): Promise<string>;
  /** Follows links: the uid of /proc/<pid> is the process's, a root's dev:ino names its file system. */
  stat(path: string): Promise<FileStat>;
  lstat(path: string): Promise<{ isSymbolicLink(): boolean }>;
  /**
   * The SHA-256 (hex) of the file `path` opens and the stat of that open file, or undefined when it holds more than
   * `maxBytes` or changed while it was read: one open, so the digest and the stat are of the same file even if the
   * path changes meanwhile.
   */
  digest(path: string, maxBytes: number): Promise<{ readonly stat: FileStat; readonly sha256: string } | undefined>;
}

/** What verification compares (docs/identity.md#verification): identity (dev, ino), ownership, and the fingerprint. */
export interface FileStat {
  readonly uid: number;
  readonly mode: number;
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

/** Read per call: one page-sized table read rarely needs more, and a large one grows by this much at a time. */
const READ_CHUNK_BYTES = 65_536;
/** Read per call while hashing an executable. */
const DIGEST_CHUNK_BYTES = 1_048_576;

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

function fileStat(s: BigIntStats): FileStat {
  return { uid: Number(s.uid), mode: Number(s.mode), dev: s.dev, ino: s.ino, size: s.size, mtimeNs: s.mtimeNs, ctimeNs: s.ctimeNs };
}

function digestSync(path: string, maxBytes: number): { stat: FileStat; sha256: string } | undefined {
  const fd = openSync(path, 'r');
  try {
    const stat = fileStat(fstatSync(fd, { bigint: true }));
    if (stat.size > BigInt(maxBytes)) return undefined;
    const hash = createHash('sha256');
    const chunk = Buffer.allocUnsafe(DIGEST_CHUNK_BYTES);
    let total = 0;
    for (let n = readSync(fd, chunk, 0, chunk.length, null); n > 0; n = readSync(fd, chunk, 0, chunk.length, null)) {
      total += n;
      // Grown past the bound while being read: the caller sees its fingerprint change and hashes again later.
      if (total > maxBytes) return undefined;
      hash.update(chunk.subarray(0, n));
    }
    // Written to while it was read: the digest may mix two contents, so it is no digest of either.
    const after = fileStat(fstatSync(fd, { bigint: true }));
    if (after.size !== stat.size || after.mtimeNs !== stat.mtimeNs || after.ctimeNs !== stat.ctimeNs) return undefined;
    return { stat, sha256: hash.digest('hex') };
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
  stat: (path) => now(() => fileStat(statSync(path, { bigint: true }))),
  lstat: (path) => now(() => lstatSync(path)),
  digest: (path, maxBytes) => now(() => digestSync(path, maxBytes)),
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
