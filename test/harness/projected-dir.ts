// projectedDir(): a directory laid out exactly as the kubelet projects a ConfigMap or Secret volume, and
// update() publishes a new version the way its atomic writer does: a new `..<timestamp>` directory, a
// `..data_tmp` symlink to it renamed over `..data`, user-visible `name -> ..data/name` symlinks, old dir removed.

import { mkdir, mkdtemp, readdir, readlink, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEADLINE_MS } from './waiters.js';

export interface ProjectedDir {
  readonly dir: string;
  /** The user-visible path of `name` (a symlink into `..data`). */
  path(name: string): string;
  /** Publishes `files` as the new content of the volume; names not in it disappear. */
  update(files: Readonly<Record<string, string>>): Promise<void>;
  remove(): Promise<void>;
}

let serial = 0;

/** `..2026_12_01_10_00_00.123456789`-style names, unique within the process. */
function timestampDir(): string {
  serial++;
  return `..2026_12_01_10_00_${String(serial % 60).padStart(2, '0')}.${String(123_456_789 + serial)}`;
}

export async function projectedDir(files: Readonly<Record<string, string>>, options: { dir?: string } = {}): Promise<ProjectedDir> {
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'boundary-configmap-')));
  await mkdir(dir, { recursive: true });

  async function update(next: Readonly<Record<string, string>>): Promise<void> {
    const data = join(dir, '..data');
    const old = await readlink(data).catch(() => undefined);
    const stamp = timestampDir();
    await mkdir(join(dir, stamp));
    for (const [name, text] of Object.entries(next)) await writeFile(join(dir, stamp, name), text);
    // Relative targets, as the kubelet writes them: the volume is mounted elsewhere in the container.
    await symlink(stamp, join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), data);
    for (const name of Object.keys(next)) await symlink(join('..data', name), join(dir, name)).catch(ignoreExists);
    for (const entry of await readdir(dir)) {
      if (!entry.startsWith('..') && !(entry in next)) await unlink(join(dir, entry));
    }
    if (old !== undefined) await rm(join(dir, old), { recursive: true, force: true });
  }

  await update(files);
  return {
    dir,
    path: (name) => join(dir, name),
    update,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

function ignoreExists(err: NodeJS.ErrnoException): void {
  if (err.code !== 'EEXIST') throw err;
}

/** How long a test waits for a watcher to pick a change up before it fails (fs events carry no promise). */
export const RELOAD_DEADLINE_MS = DEADLINE_MS;

