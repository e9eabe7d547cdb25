// A real squid (Debian's /usr/sbin/squid) on 127.0.0.1 as the corporate upstream proxy of boundary's tests: its own
// squid.conf, pid file and logs in a temp dir squid's user can write, CONNECT allowed from loopback to the test's
// ports only, optionally behind Basic proxy auth (basic_ncsa_auth over an htpasswd file made here). Names it is
// asked to CONNECT to come from a hosts file of the test's own; its DNS points at loopback, so nothing leaves the host.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { freePort } from './supervisor-cli.js';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export const SQUID = '/usr/sbin/squid';
const NCSA_HELPER = '/usr/lib/squid/basic_ncsa_auth';
/** Bounds squid's start and the wait for an access log line; both are normally well under a second. */
const SQUID_WAIT_MS = 30_000;
/** Pause between readiness probes and access log reads while waiting. */
const POLL_MS = 50;
/** Squids started at once must not share their shared-memory segments, which squid names after its service name. */
let squidsStarted = 0;

export interface AccessLine {
  /** `TCP_TUNNEL/200`, `TCP_DENIED/407`, ... */
  readonly result: string;
  readonly method: string;
  /** For a CONNECT, the authority asked for. */
  readonly url: string;
  /** The proxy-auth user, or `-`. */
  readonly user: string;
}

export interface Squid {
  readonly port: number;
  readonly url: string;
  /** Every access log line so far (squid writes one when a transaction ends: for a tunnel, when it closes). */
  accessLog(): Promise<AccessLine[]>;
  /** Waits until the access log has at least `count` lines matching `match`. */
  waitForLines(match: (line: AccessLine) => boolean, count?: number): Promise<AccessLine[]>;
  close(): Promise<void>;
}

export interface SquidOptions {
  /** Ports CONNECT may reach. */
  readonly ports: readonly number[];
  /** Basic proxy auth with this one user. */
  readonly auth?: { readonly user: string; readonly password: string };
  /** Lines of squid's hosts file (`127.0.0.1 api.example.test`), for CONNECT by name. */
  readonly hosts?: readonly string[];
  /** Serve https_port with this certificate (an `https://` proxy) instead of http_port. */
  readonly tls?: { readonly certPem: string; readonly keyPem: string };
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function parseAccessLine(line: string): AccessLine {
  // squid native format: time elapsed client result/status bytes method url user hierarchy type
  const fields = line.trim().split(/\s+/);
  return { result: fields[3] ?? '', method: fields[5] ?? '', url: fields[6] ?? '', user: fields[7] ?? '' };
}

export async function startSquid(options: SquidOptions): Promise<Squid> {
  // Squid started as root drops to `proxy`: its directory must be that user's, wherever the checkout lives.
  const dir = await mkdtemp(join(tmpdir(), 'boundary-squid-'));
  if (userInfo().uid === 0) {
    await chown(dir, Number(execFileSync('id', ['-u', 'proxy'])), Number(execFileSync('id', ['-g', 'proxy'])));
  }
  const port = await freePort();
  const auth: string[] = [];
  if (options.auth !== undefined) {
    // MD5-crypt ($1$), which basic_ncsa_auth checks through crypt(3).
    const hash = execFileSync('openssl', ['passwd', '-1', '-stdin'], { input: options.auth.password }).toString().trim();
    await writeFile(join(dir, 'htpasswd'), `${options.auth.user}:${hash}\n`, { mode: 0o644 });
    auth.push(
      `auth_param basic program ${NCSA_HELPER} ${join(dir, 'htpasswd')}`,
      'auth_param basic children 1 startup=1 idle=1',
      'auth_param basic realm boundary-test',
      'acl authed proxy_auth REQUIRED',
    );
  }
  let listen = `http_port 127.0.0.1:${port}`;
  if (options.tls !== undefined) {
    await writeFile(join(dir, 'proxy-cert.pem'), options.tls.certPem, { mode: 0o644 });
    await writeFile(join(dir, 'proxy-key.pem'), options.tls.keyPem, { mode: 0o644 });
    listen = `https_port 127.0.0.1:${port} tls-cert=${join(dir, 'proxy-cert.pem')} tls-key=${join(dir, 'proxy-key.pem')}`;
  }
  await writeFile(join(dir, 'hosts'), `${(options.hosts ?? []).join('\n')}\n`, { mode: 0o644 });
  const conf = [
    listen,
    `pid_filename ${join(dir, 'squid.pid')}`,
    `access_log stdio:${join(dir, 'access.log')} squid`,
    `cache_log ${join(dir, 'cache.log')}`,
    'cache_store_log none',
    'cache deny all',
    'cache_mem 1 MB',
    `coredump_dir ${dir}`,
    'logfile_rotate 0',
    'shutdown_lifetime 0 seconds',
    'pinger_enable off',
    'netdb_filename none',
    `hosts_file ${join(dir, 'hosts')}`,
    // Names outside the hosts file go nowhere: no query leaves the host.
    'dns_nameservers 127.0.0.1',
    ...auth,
    'acl from_loopback src 127.0.0.0/8',
    'acl CONNECT method CONNECT',
    `acl test_ports port ${options.ports.join(' ')}`,
    `http_access allow from_loopback CONNECT test_ports${options.auth === undefined ? '' : ' authed'}`,
    'http_access deny all',
  ].join('\n');
  await writeFile(join(dir, 'squid.conf'), `${conf}\n`, { mode: 0o644 });
  // Each test file is a process of its own: the pid keeps the name unique between files, the count within one.
  const service = `boundary${process.pid}x${++squidsStarted}`;
  const child: ChildProcess = spawn(SQUID, ['-N', '-n', service, '-f', join(dir, 'squid.conf')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = once(child, 'exit');
  const started = Date.now();
  // Ready once cache.log says so: a probe connection would be a line of its own in the access log.
  while (!/Accepting HTTPS? Socket connections/.test(await readFile(join(dir, 'cache.log'), 'utf8').catch(() => ''))) {
    if (child.exitCode !== null || Date.now() - started > SQUID_WAIT_MS) {
      child.kill('SIGKILL');
      const cacheLog = await readFile(join(dir, 'cache.log'), 'utf8').catch(() => '');
      await rm(dir, { recursive: true, force: true });
      throw new Error(`squid did not start: ${stderr}\n${cacheLog}`);
    }
    await delay(POLL_MS);
  }
  const accessLog = async (): Promise<AccessLine[]> => {
    const text = await readFile(join(dir, 'access.log'), 'utf8').catch(() => '');
    return text.split('\n').filter((l) => l.trim() !== '').map(parseAccessLine);
  };
  let closed: Promise<void> | undefined;
  return {
    port,
    url: `${options.tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}`,
    accessLog,
    async waitForLines(match, count = 1) {
      const since = Date.now();
      for (;;) {
        const lines = (await accessLog()).filter(match);
        if (lines.length >= count) return lines;
        if (Date.now() - since > SQUID_WAIT_MS) throw new Error(`squid logged ${lines.length} of ${count} lines: ${JSON.stringify(await accessLog())}`);
        await delay(POLL_MS);
      }
    },
    close() {
      closed ??= (async () => {
        if (child.exitCode === null) {
          child.kill('SIGTERM');
          await exited;
        }
        await rm(dir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}

/** Several squids at once; if one fails to start, the others are stopped, so a failed hook leaves no process behind. */
export async function startSquids<const T extends readonly SquidOptions[]>(options: T): Promise<{ [K in keyof T]: Squid }> {
  const results = await Promise.allSettled(options.map((o) => startSquid(o)));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed === undefined) return results.map((r) => (r as PromiseFulfilledResult<Squid>).value) as { [K in keyof T]: Squid };
  await Promise.all(results.map((r) => (r.status === 'fulfilled' ? r.value.close() : undefined)));
  throw failed.reason;
}
