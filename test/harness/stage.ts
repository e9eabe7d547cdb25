// stageBoundary(): the image's build of boundary (tsc, then scripts/bundle.ts), world-readable, for tests that run
// it as another uid or in a pod. The checkout may sit under a directory only root can enter (/root/x, mode 0700),
// where such a uid reaches neither src/ nor node_modules/; the copy lives under os.tmpdir() instead. Offline.

import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { promisify } from 'node:util';
import { bundleBoundary } from '../../scripts/bundle.js';
import { PROJECT_ROOT } from './cli-boundary.js';

const run = promisify(execFile);
// Read and search for everyone; execute bits are kept where a file already had one.
const WORLD_READ = 0o444;
const WORLD_EXEC = 0o111;
const OTHERS_SEARCH = 0o001;

export interface StagedBoundary {
  /** World-readable copy laid out as the image's /app: dist/ (the bundle), package.json, policies/, proto/, node_modules/ (production deps only). */
  readonly dir: string;
  /** join(dir, 'dist/app/main.js') */
  readonly main: string;
}

let staged: Promise<StagedBoundary> | undefined;

/** Builds once per test process (memoized): tsc and the bundle into a fresh mkdtemp(os.tmpdir()) dir, copies what `node dist/app/main.js` needs, chmods it so any uid can read and execute it; removed at process exit. */
export function stageBoundary(): Promise<StagedBoundary> {
  staged ??= build();
  return staged;
}

async function build(): Promise<StagedBoundary> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-stage-'));
  // Synchronous: an 'exit' listener cannot wait for a promise.
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  await assertTraversable(dirname(dir));
  const tsc = join(PROJECT_ROOT, 'node_modules/typescript/bin/tsc');
  const compiled = join(dir, 'tsc');
  // The same files as the image's tsc, which also type-checks: npm test has done that before any test runs.
  await run(process.execPath, [tsc, '-p', 'tsconfig.json', '--noCheck', '--outDir', compiled], { cwd: PROJECT_ROOT });
  await bundleBoundary(compiled, join(dir, 'dist'));
  await rm(compiled, { recursive: true });
  await cp(join(PROJECT_ROOT, 'package.json'), join(dir, 'package.json'));
  await cp(join(PROJECT_ROOT, 'policies'), join(dir, 'policies'), { recursive: true });
  await cp(join(PROJECT_ROOT, 'proto'), join(dir, 'proto'), { recursive: true });
  for (const pkg of await productionPackages()) await copyPackage(pkg, join(dir, relative(PROJECT_ROOT, pkg)));
  await openToAll(dir);
  return { dir, main: join(dir, 'dist/app/main.js') };
}

/** Installed production dependency directories (nested ones too), as `npm ls` resolves them from the lock. */
async function productionPackages(): Promise<string[]> {
  const { stdout } = await run('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: PROJECT_ROOT });
  return stdout.split('\n').filter((line) => line.startsWith(join(PROJECT_ROOT, 'node_modules') + sep));
}

/** One package without its own node_modules/: each nested dependency is listed, and copied, on its own. */
async function copyPackage(from: string, to: string): Promise<void> {
  const nested = join(from, 'node_modules');
  await mkdir(dirname(to), { recursive: true });
  await cp(from, to, { recursive: true, filter: (source) => source !== nested && !source.startsWith(nested + sep) });
}

async function openToAll(path: string): Promise<void> {
  const info = await stat(path);
  if (info.isDirectory()) {
    await chmod(path, info.mode | WORLD_READ | WORLD_EXEC);
    for (const entry of await readdir(path)) await openToAll(join(path, entry));
  } else {
    await chmod(path, info.mode | WORLD_READ | (info.mode & WORLD_EXEC ? WORLD_EXEC : 0));
  }
}

/** A TMPDIR under a closed directory would hide the copy as surely as the checkout: say so, do not hang later. */
async function assertTraversable(dir: string): Promise<void> {
  for (let at = dir; ; at = dirname(at)) {
    if (((await stat(at)).mode & OTHERS_SEARCH) === 0) throw new Error(`stageBoundary: ${at} is not searchable by other uids; set TMPDIR to a directory that is (e.g. /tmp)`);
    if (dirname(at) === at) return;
  }
}
