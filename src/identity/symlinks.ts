// Non-glob policy paths as the owner's own file system resolves them (docs/identity.md#symlinks): the kernel names
// `/usr/bin/python3.11` where a policy says `/usr/bin/python3`, so the resolved path is matched beside the written
// one. Walked by hand under /proc/<pid>/root: an absolute link target must stay inside that root, and realpath
// would leave it for the reader's own.

import type { ProcFs } from './proc-fs.js';

/** Links followed for one path, as the kernel's own limit (ELOOP). */
export const MAX_SYMLINK_HOPS = 40;
/** Resolutions remembered, per (root, path); the oldest is dropped beyond this. */
export const MAX_CACHED_RESOLUTIONS = 4_096;
/** A remembered resolution is used this long: a link changed in the workload's image is seen within it. */
export const SYMLINK_CACHE_TTL_MS = 60_000;

interface Resolution {
  readonly at: number;
  readonly path: string | undefined;
}

export interface LinkCache {
  readonly entries: Map<string, Resolution>;
  readonly now: () => number;
}

/** `path` with every symlink under `rootDir` followed; undefined when a part is missing, unreadable or loops. */
export async function resolveInRoot(fs: ProcFs, rootDir: string, path: string): Promise<string | undefined> {
  let pending = path.split('/').filter((p) => p !== '');
  let done: string[] = [];
  let hops = 0;
  while (pending.length > 0) {
    const [part = '', ...rest] = pending;
    pending = rest;
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const here = `${rootDir}/${[...done, part].join('/')}`;
    let link: boolean;
    try {
      link = (await fs.lstat(here)).isSymbolicLink();
    } catch {
      return undefined;
    }
    if (!link) {
      done.push(part);
      continue;
    }
    if (++hops > MAX_SYMLINK_HOPS) return undefined;
    const target = await fs.readlink(here).catch(() => undefined);
    if (target === undefined) return undefined;
    // Absolute: from the process's root; relative: from the link's directory (`done`), `..` taken lexically.
    if (target.startsWith('/')) done = [];
    pending = [...target.split('/').filter((p) => p !== ''), ...pending];
  }
  return `/${done.join('/')}`;
}

/** [path, resolved] for each of `paths` that resolves to something else inside the process's root. */
export async function resolvePaths(fs: ProcFs, cache: LinkCache, procRoot: string, pid: number, paths: readonly string[]): Promise<[string, string][]> {
  if (paths.length === 0) return [];
  const rootDir = `${procRoot}/${pid}/root`;
  let rootKey: string;
  try {
    const root = await fs.stat(rootDir);
    rootKey = `${root.dev}:${root.ino}`;
  } catch {
    // No access to its root (or it exited): the paths are compared as written.
    return [];
  }
  const out: [string, string][] = [];
  for (const path of paths) {
    const key = `${rootKey}\0${path}`;
    let hit = cache.entries.get(key);
    if (hit === undefined || cache.now() - hit.at > SYMLINK_CACHE_TTL_MS) {
      hit = { at: cache.now(), path: await resolveInRoot(fs, rootDir, path) };
      cache.entries.delete(key);
      cache.entries.set(key, hit);
      if (cache.entries.size > MAX_CACHED_RESOLUTIONS) cache.entries.delete(cache.entries.keys().next().value as string);
    }
    if (hit.path !== undefined && hit.path !== path) out.push([path, hit.path]);
  }
  return out;
}
