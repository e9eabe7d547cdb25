// Whether a process runs the file its executable's path names (docs/identity.md#verification): the file behind
// /proc/<pid>/exe must be the one at that path as a trusted view of the file system shows it (device and inode),
// and its content must be the one pinned for the path on first use (SHA-256, hashed once per file fingerprint).
// Never a hash in a detail: failures name paths only.

import type { Distrusted } from '../policy/binary-identity.js';
import type { FileStat } from './proc-fs.js';
import type { ChainLink, ProcContext } from './proc-process.js';

/** Paths pinned per identity source; a path not pinned yet beyond this is refused (`pin-table-full`). */
export const MAX_PINNED_PATHS = 4_096;
/** Files whose digest is remembered by fingerprint; the oldest is dropped beyond this (and hashed again if seen). */
export const MAX_FINGERPRINTS = 4_096;
/** An executable larger than this is not hashed, so it cannot be verified. */
export const MAX_HASHED_EXECUTABLE_BYTES = 1_073_741_824;

interface Fingerprint {
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly sha256: string;
}

export interface VerifyState {
  /** (view root dev:ino, path) -> the SHA-256 first seen there. Kept for the source's life. */
  readonly pins: Map<string, string>;
  /** dev:ino -> the digest of that file while its fingerprint (size, mtime, ctime) stays the same. */
  readonly fingerprints: Map<string, Fingerprint>;
  /** The reader's own user namespace (`user:[n]`), read once; null when it cannot be read. */
  readerUserns?: string | null;
}

export interface VerifyContext extends ProcContext {
  readonly verify: VerifyState;
}

/** A process's user namespace, or undefined when it cannot be read. */
function userNamespace(ctx: ProcContext, pid: number | 'self'): Promise<string | undefined> {
  return ctx.fs.readlink(`${ctx.root}/${pid}/ns/user`).then(
    (ns) => ns,
    () => undefined,
  );
}

async function readerUserns(ctx: VerifyContext): Promise<string | null> {
  if (ctx.verify.readerUserns === undefined) ctx.verify.readerUserns = (await userNamespace(ctx, 'self')) ?? null;
  return ctx.verify.readerUserns;
}

/**
 * Where the paths of `links[from]` are looked up: its own root when it shares the reader's user namespace (its
 * mount namespace was then made by the runtime, which the workload cannot do without CAP_SYS_ADMIN), else the root
 * of its nearest ancestor that does; undefined when none does. A private mount namespace needs a private user
 * namespace first, so a bind mount made there is never the view a path is checked in.
 */
export async function viewOf(ctx: VerifyContext, links: readonly ChainLink[], from: number, seen: Map<number, string | undefined>): Promise<number | undefined> {
  const reader = await readerUserns(ctx);
  if (reader === null) return undefined;
  for (const link of links.slice(from)) {
    if (!seen.has(link.pid)) seen.set(link.pid, await userNamespace(ctx, link.pid));
    if (seen.get(link.pid) === reader) return link.pid;
  }
  return undefined;
}

/** dev:ino of a process's root directory: one key per file system view (a container's, the host's). */
export async function rootKey(ctx: ProcContext, pid: number): Promise<string | undefined> {
  return ctx.fs.stat(`${ctx.root}/${pid}/root`).then(
    (s) => `${s.dev}:${s.ino}`,
    () => undefined,
  );
}

function sameFingerprint(a: Pick<FileStat, 'size' | 'mtimeNs' | 'ctimeNs'>, b: Pick<FileStat, 'size' | 'mtimeNs' | 'ctimeNs'>): boolean {
  return a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

/** The digest of the running file: from its fingerprint when unchanged, else hashed through /proc/<pid>/exe. */
async function contentHash(ctx: VerifyContext, pid: number, exe: FileStat): Promise<string | undefined> {
  const key = `${exe.dev}:${exe.ino}`;
  const known = ctx.verify.fingerprints.get(key);
  if (known !== undefined && sameFingerprint(known, exe)) return known.sha256;
  const read = await ctx.fs.digest(`${ctx.root}/${pid}/exe`, MAX_HASHED_EXECUTABLE_BYTES).catch(() => undefined);
  // Another file by now (an exec), or one written to since it was stat'd or while it was read: not verified this time.
  if (read === undefined || read.stat.dev !== exe.dev || read.stat.ino !== exe.ino || !sameFingerprint(read.stat, exe)) return undefined;
  ctx.verify.fingerprints.delete(key);
  ctx.verify.fingerprints.set(key, { size: exe.size, mtimeNs: exe.mtimeNs, ctimeNs: exe.ctimeNs, sha256: read.sha256 });
  if (ctx.verify.fingerprints.size > MAX_FINGERPRINTS) ctx.verify.fingerprints.delete(ctx.verify.fingerprints.keys().next().value as string);
  return read.sha256;
}

/** Verifies one executable of the chain, seen through the view of process `view`; undefined when it passes. */
export async function verifyExecutable(ctx: VerifyContext, link: ChainLink & { readonly exe: string }, view: number | undefined): Promise<Distrusted | undefined> {
  const distrust = (failure: Distrusted['failure']): Distrusted => ({ path: link.exe, failure });
  if (view === undefined) return distrust('executable-unverified');
  // stat through the magic link: the file the process runs, whatever path it is known by.
  const exe = await ctx.fs.stat(`${ctx.root}/${link.pid}/exe`).catch(() => undefined);
  if (exe === undefined) return distrust('executable-unverified');
  const root = await rootKey(ctx, view);
  if (root === undefined) return distrust('executable-unverified');
  if (!link.deleted) {
    // The file the path names where the workload's runtime put it, not where the process says it is.
    const at = await ctx.fs.stat(`${ctx.root}/${view}/root${link.exe}`).catch(() => undefined);
    if (at === undefined || at.dev !== exe.dev || at.ino !== exe.ino) return distrust('executable-unverified');
  }
  const sha256 = await contentHash(ctx, link.pid, exe);
  if (sha256 === undefined) return distrust('executable-unverified');
  const key = `${root}\0${link.exe}`;
  const pinned = ctx.verify.pins.get(key);
  if (pinned !== undefined) return pinned === sha256 ? undefined : distrust('executable-changed');
  // A file no longer at its path is accepted only as the content pinned there before; it never pins.
  if (link.deleted) return distrust('executable-unverified');
  if (ctx.verify.pins.size >= MAX_PINNED_PATHS) return distrust('pin-table-full');
  ctx.verify.pins.set(key, sha256);
  return undefined;
}
