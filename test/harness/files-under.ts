// Every file's text under a directory a live process writes to (a secret must appear in none). Files there are
// written to a temporary name and renamed: one that vanishes between the listing and the read means the
// directory is read again.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Readings of the directory before a vanishing file fails the caller. */
const MAX_READS = 10;

export async function textsUnder(dir: string): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      const texts: string[] = [];
      for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
        if (entry.isFile()) texts.push(await readFile(join(entry.parentPath, entry.name), 'latin1'));
      }
      return texts;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === MAX_READS) throw err;
    }
  }
}
