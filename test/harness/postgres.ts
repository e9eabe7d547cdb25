// A throwaway PostgreSQL server for one test file: initdb into a temporary directory, listen on a unix socket
// there only (no TCP), and remove everything on stop(). Uses the Debian package's binaries; never the system service.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const POSTGRES_ROOT = '/usr/lib/postgresql';
/** initdb plus the first start of an empty cluster; generous for a loaded CI machine. */
export const POSTGRES_START_TIMEOUT_MS = 30_000;
/** After SIGQUIT (immediate shutdown) the server gets this long before SIGKILL. */
export const POSTGRES_STOP_TIMEOUT_MS = 5_000;
/** Enough for several store instances per test (pool plus listener each). */
export const POSTGRES_MAX_CONNECTIONS = 200;
/** The server's output kept for error messages. */
const MAX_LOG_TAIL_CHARS = 4_000;
const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const READY_LINE = 'ready to accept connections';
export const POSTGRES_SKIP_REASON = 'PostgreSQL is not installed (apt-get install postgresql)';

export interface PostgresServer {
  /** `postgresql://postgres@/DB?host=SOCKETDIR`; DB defaults to `postgres`. */
  connectionString(database?: string): string;
  /** Creates an empty database and returns its connection string. */
  createDatabase(name: string): Promise<string>;
  /** Kills the server and removes its directory; safe to call more than once and after a failed start. */
  stop(): Promise<void>;
}

/** The bin directory of the highest installed PostgreSQL version, or undefined when none is installed. */
export function findPostgresBin(): string | undefined {
  if (!existsSync(POSTGRES_ROOT)) return undefined;
  const versions = readdirSync(POSTGRES_ROOT)
    .filter((name) => /^\d+(\.\d+)?$/.test(name))
    .sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const bin = join(POSTGRES_ROOT, version, 'bin');
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'postgres'))) return bin;
  }
  return undefined;
}

/** For `describe(name, { skip: postgresSkip() })`: false when PostgreSQL can run, else the one-line reason. */
export function postgresSkip(): string | false {
  return findPostgresBin() === undefined ? POSTGRES_SKIP_REASON : false;
}

/** PostgreSQL refuses to run as root, so as root the server runs as the package's `postgres` user. */
function runAs(): { wrap: (bin: string, args: string[]) => [string, string[]]; uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return { wrap: (bin, args) => [bin, args] };
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  const wrap = (bin: string, args: string[]): [string, string[]] => [
    'setpriv',
    ['--reuid', 'postgres', '--regid', 'postgres', '--init-groups', bin, ...args],
  ];
  return { wrap, uid, gid };
}

function run(name: string, command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-MAX_LOG_TAIL_CHARS);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${name} exited with ${signal ?? code}:\n${output}`));
    });
  });
}

/** Starts a server; rejects (having cleaned up) when initdb fails or the server is not ready in time. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = findPostgresBin();
  if (bin === undefined) throw new Error(POSTGRES_SKIP_REASON);
  const dir = await mkdtemp(join(tmpdir(), 'boundary-pg-'));
  const data = join(dir, 'data');
  const user = runAs();
  let server: ChildProcess | undefined;
  let stopped = false;

  async function stop(): Promise<void> {
    if (stopped) return;
    stopped = true;
    const child = server;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // Immediate shutdown: the data is thrown away anyway, so no checkpoint is worth waiting for.
      child.kill('SIGQUIT');
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), POSTGRES_STOP_TIMEOUT_MS);
      });
      if ((await Promise.race([exited, late])) === 'late') {
        child.kill('SIGKILL');
        await exited;
      }
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  }

  const connectionString = (database = 'postgres') =>
    `postgresql://postgres@/${encodeURIComponent(database)}?host=${encodeURIComponent(dir)}`;

  try {
    if (user.uid !== undefined && user.gid !== undefined) await chown(dir, user.uid, user.gid);
    // --no-sync only skips flushing the freshly created template files; the server itself runs with fsync on.
    const [initCommand, initArgs] = user.wrap(join(bin, 'initdb'), [
      '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync',
    ]);
    await run('initdb', initCommand, initArgs);
    const [command, args] = user.wrap(join(bin, 'postgres'), [
      '-D', data,
      '-c', 'listen_addresses=',
      '-c', `unix_socket_directories=${dir}`,
      '-c', 'fsync=on',
      '-c', `max_connections=${POSTGRES_MAX_CONNECTIONS}`,
    ]);
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    server = child;
    await waitReady(child);
    return {
      connectionString,
      async createDatabase(name: string): Promise<string> {
        if (!DATABASE_NAME.test(name)) throw new Error(`database name ${JSON.stringify(name)} is not a plain identifier`);
        const client = new pg.Client({ connectionString: connectionString() });
        await client.connect();
        try {
          await client.query(`CREATE DATABASE ${name}`);
        } finally {
          await client.end();
        }
        return connectionString(name);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Resolves when the server logs that it accepts connections; rejects when it exits first or takes too long. */
function waitReady(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(
      () => finish(new Error(`PostgreSQL was not ready within ${POSTGRES_START_TIMEOUT_MS} ms:\n${log}`)),
      POSTGRES_START_TIMEOUT_MS,
    );
    const onData = (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-MAX_LOG_TAIL_CHARS);
      if (log.includes(READY_LINE)) finish();
    };
    const onExit = (code: number | null, signal: string | null) =>
      finish(new Error(`PostgreSQL exited with ${signal ?? code} before it was ready:\n${log}`));
    function finish(err?: Error) {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      // Keep draining the server's output so a full pipe never blocks it.
      child.stderr?.resume();
      child.stdout?.resume();
      if (err === undefined) resolve();
      else reject(err);
    }
    child.stderr?.on('data', onData);
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', (err) => finish(err));
  });
}
