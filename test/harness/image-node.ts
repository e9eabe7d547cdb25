// imageNode(): a Node binary of the major the container image ships (the Dockerfile's last FROM node:N-*),
// so the pod end-to-end test runs the pod's processes on the runtime users deploy. This process's own node
// when the majors agree; otherwise the `node` package of that major from the npm registry, installed once
// into a world-readable cache directory (processes of other uids execute it).

import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pathExists } from '../../src/pki/files.js';

const run = promisify(execFile);
const NPM_INSTALL_TIMEOUT_MS = 240_000;

/** The Node major of the image's runtime stage. */
export async function imageNodeMajor(dockerfile: string): Promise<number> {
  const froms = [...(await readFile(dockerfile, 'utf8')).matchAll(/^FROM\s+node:(\d+)\S*/gm)];
  const last = froms.at(-1);
  if (last === undefined) throw new Error(`${dockerfile} has no FROM node:<major> line`);
  return Number(last[1]);
}

export async function imageNode(dockerfile: string): Promise<{ path: string; version: string }> {
  const major = await imageNodeMajor(dockerfile);
  if (Number(process.versions.node.split('.')[0]) === major) return { path: process.execPath, version: process.version };
  const dir = join(tmpdir(), `boundary-node-${major}`);
  const binary = join(dir, 'node_modules', 'node', 'bin', 'node');
  if (!(await pathExists(binary))) await install(major, dir, binary);
  const { stdout } = await run(binary, ['--version']);
  if (!stdout.startsWith(`v${major}.`)) throw new Error(`${binary} is ${stdout.trim()}, not Node ${major}`);
  return { path: binary, version: stdout.trim() };
}

/**
 * Installs into a folder of its own, then renames it into place: test files run two at a time, and two of them may
 * install at once. The rename is atomic, so a folder in place is whole, unless an older harness, which installed in
 * place, was stopped halfway: that one is replaced.
 */
async function install(major: number, dir: string, binary: string): Promise<void> {
  const own = await mkdtemp(`${dir}.`);
  try {
    await run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', own, `node@${major}`], { timeout: NPM_INSTALL_TIMEOUT_MS });
    await chmod(own, 0o755);
    const placed = await rename(own, dir).then(
      () => true,
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
        return false;
      },
    );
    if (placed || (await pathExists(binary))) return;
    await rm(dir, { recursive: true, force: true });
    await rename(own, dir);
  } finally {
    await rm(own, { recursive: true, force: true });
  }
}
