// Code a process may run besides its executable (docs/identity.md#injected-code): loader variables in its
// environment, and executable mappings of files the workload could have written. Either means the process is not
// only the program its path names, so an endpoint that lists specific programs refuses it. Names paths, never
// contents.

import type { ProcContext } from './proc-process.js';

/** Environment variables that make the dynamic loader run code the program did not name. */
export const LOADER_VARIABLES = ['LD_PRELOAD', 'LD_LIBRARY_PATH', 'LD_AUDIT'] as const;
/** An environment larger than this cannot be checked whole, so the process is refused. */
export const MAX_ENVIRON_BYTES = 1_048_576;
/** /proc/<pid>/maps read whole up to this (about 100,000 mappings); a larger map is refused. */
export const MAX_MAPS_BYTES = 16_777_216;
/** Distinct mapped files checked per process; more is refused. */
export const MAX_CHECKED_MAPPINGS = 1_024;
/** A mapped file found root-owned and unwritable is taken as such this long, per (view, path, inode). */
export const MAPPING_CACHE_TTL_MS = 60_000;
export const MAX_CACHED_MAPPINGS = 4_096;

/** S_IFMT and S_IFREG. */
const FILE_TYPE_MASK = 0o170_000;
const REGULAR_FILE = 0o100_000;
/** Group or other may write. */
const SHARED_WRITE_BITS = 0o022;
const DELETED_SUFFIX = ' (deleted)';
/** address perms offset dev inode path: perms is `r-xp`, the path may hold spaces. */
const MAPS_LINE = /^\S+ (\S{4}) \S+ \S+ (\d+) +(\/.*)$/;

export interface MappingCache {
  readonly entries: Map<string, number>;
  readonly now: () => number;
}

/** The loader variable set (non-empty) in the process's environment, or a sentence on why it cannot be read whole. */
export async function loaderVariable(ctx: ProcContext, pid: number): Promise<string | undefined> {
  let environ: string;
  try {
    environ = await ctx.fs.readText(`${ctx.root}/${pid}/environ`, MAX_ENVIRON_BYTES + 1);
  } catch {
    return 'its environment cannot be read';
  }
  if (Buffer.byteLength(environ) > MAX_ENVIRON_BYTES) return `its environment is larger than ${MAX_ENVIRON_BYTES} bytes`;
  for (const entry of environ.split('\0')) {
    for (const name of LOADER_VARIABLES) if (entry.length > name.length + 1 && entry.startsWith(`${name}=`)) return `${name} is set`;
  }
  return undefined;
}

/**
 * The first executable mapping of a file the workload could have written, or undefined when there is none. A
 * mapped file passes when, in the trusted view, its path holds a regular file with the mapping's inode, owned by
 * root and not writable by group or others (the device is not compared: overlayfs reports the layer's device in
 * maps and its own in stat). Deleted files and memfds never pass; the main executable is verified on its own.
 */
export async function writableMapping(ctx: ProcContext, pid: number, exe: string, view: { pid: number; key: string }, cache: MappingCache): Promise<string | undefined> {
  let maps: string;
  try {
    maps = await ctx.fs.readText(`${ctx.root}/${pid}/maps`, MAX_MAPS_BYTES + 1);
  } catch {
    return 'its memory map cannot be read';
  }
  if (Buffer.byteLength(maps) > MAX_MAPS_BYTES) return `its memory map is larger than ${MAX_MAPS_BYTES} bytes`;
  const files = new Map<string, string>();
  for (const line of maps.split('\n')) {
    const match = MAPS_LINE.exec(line);
    if (match === null || match[1]?.[2] !== 'x' || match[2] === '0') continue;
    const path = match[3] as string;
    if (path === exe || path === `${exe}${DELETED_SUFFIX}`) continue;
    files.set(`${path}\0${match[2]}`, path);
    if (files.size > MAX_CHECKED_MAPPINGS) return `it maps more than ${MAX_CHECKED_MAPPINGS} executable files`;
  }
  for (const [key, path] of files) {
    const inode = key.slice(path.length + 1);
    if (path.endsWith(DELETED_SUFFIX)) return path;
    const cached = `${view.key}\0${key}`;
    const at = cache.entries.get(cached);
    if (at !== undefined && cache.now() - at <= MAPPING_CACHE_TTL_MS) continue;
    const s = await ctx.fs.stat(`${ctx.root}/${view.pid}/root${path}`).catch(() => undefined);
    if (s === undefined || (s.mode & FILE_TYPE_MASK) !== REGULAR_FILE || String(s.ino) !== inode || s.uid !== 0 || (s.mode & SHARED_WRITE_BITS) !== 0) return path;
    cache.entries.delete(cached);
    cache.entries.set(cached, cache.now());
    if (cache.entries.size > MAX_CACHED_MAPPINGS) cache.entries.delete(cache.entries.keys().next().value as string);
  }
  return undefined;
}
