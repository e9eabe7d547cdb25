// Writing PEM files for pki/: atomic replace with an explicit mode, so a key is never readable by others,
// not even for the moment between create and chmod. Never decides what to write.
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { BoundaryError } from '../shared/errors.js';

export const KEY_FILE_MODE = 0o600;
export const CERT_FILE_MODE = 0o644;
const PKI_DIR_MODE = 0o700;

/** Writes through a temporary file in the same directory and renames it over the target. */
export async function writeFileAtomic(path: string, data: string, mode: number): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  // 'wx' refuses to follow a planted file or symlink; the mode applies at creation, before any byte lands.
  const handle = await open(temp, 'wx', mode);
  try {
    await handle.writeFile(data, 'utf8');
    await handle.chmod(mode);
    await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(temp, { force: true });
    throw err;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

/** Creates the directory (owner-only when new); an existing directory keeps its mode. */
export async function ensureDir(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: PKI_DIR_MODE });
}

export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Reads a PEM file; an unreadable file is PKI_INVALID naming the path (never the contents). */
export async function readPemFile(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new BoundaryError('PKI_INVALID', `cannot read ${path} (${code})`, { cause: err });
  }
}
