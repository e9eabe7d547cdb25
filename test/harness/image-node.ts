// imageNode(): a Node binary of the major the container image ships (the Dockerfile's last FROM node:N-*),
// so the pod end-to-end test runs the pod's processes on the runtime users deploy. This process's own node
// when the majors agree; otherwise the `node` package of that major from the npm registry, installed once
// into a world-readable cache directory (processes of other uids execute it).

import { execFile } from 'node:child_process';
import { access, chmod, mkdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

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
  const present = await access(binary).then(
    () => true,
    () => false,
  );
  if (!present) {
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', dir, `node@${major}`], { timeout: NPM_INSTALL_TIMEOUT_MS });
    await chmod(dir, 0o755);
  }
  const { stdout } = await run(binary, ['--version']);
  if (!stdout.startsWith(`v${major}.`)) throw new Error(`${binary} is ${stdout.trim()}, not Node ${major}`);
  return { path: binary, version: stdout.trim() };
}
