// The boot epoch of the synthetic pool, persisted in the state directory and advanced before each start,
// so that synthetic addresses a workload cached before a restart fall outside the new window.
// Fails closed: a corrupt or unreadable epoch file is an error, never a silent reset to 0.

import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BoundaryError } from '../shared/errors.js';

export const EPOCH_FILE_NAME = 'synthetic-epoch';
const EPOCH_TEXT = /^(0|[1-9][0-9]{0,15})\n?$/;

/** Reads `<stateDir>/synthetic-epoch` (absent: -1), writes and returns the next epoch. */
export async function advanceEpoch(options: { readonly stateDir: string }): Promise<number> {
  const path = join(options.stateDir, EPOCH_FILE_NAME);
  const previous = await readEpoch(path);
  const next = previous + 1;
  if (!Number.isSafeInteger(next)) throw new BoundaryError('DNS_EPOCH_INVALID', `${path}: epoch ${previous} cannot advance`);
  try {
    await mkdir(options.stateDir, { recursive: true, mode: 0o700 });
    // Write then rename: a crash mid-write leaves the old epoch, never a torn file.
    const temporary = `${path}.tmp`;
    await writeFile(temporary, `${next}\n`, { mode: 0o600 });
    await rename(temporary, path);
  } catch (err) {
    throw new BoundaryError('DNS_EPOCH_INVALID', `${path}: cannot persist epoch ${next}: ${(err as Error).message}`, { cause: err });
  }
  return next;
}

async function readEpoch(path: string): Promise<number> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return -1;
    throw new BoundaryError('DNS_EPOCH_INVALID', `${path}: unreadable: ${(err as Error).message}`, { cause: err });
  }
  if (!EPOCH_TEXT.test(text)) throw new BoundaryError('DNS_EPOCH_INVALID', `${path}: not a non-negative integer`);
  const value = Number(text.trim());
  if (!Number.isSafeInteger(value)) throw new BoundaryError('DNS_EPOCH_INVALID', `${path}: epoch out of range`);
  return value;
}
