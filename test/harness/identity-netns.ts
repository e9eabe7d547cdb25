// The real `boundary run` inside a network namespace this harness creates, with an HTTP origin beside it that
// records what reached it, for the binary identity attack tests (issue 28). boundary runs as root and reads /proc
// itself, or asks `boundary identity serve` on a unix socket; clients run as uid 65534 through `ip netns exec`
// (each in a mount namespace of its own, as a pod's containers are). close() removes everything, even after a failure.

import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { promisify } from 'node:util';
import { type LoggedChild, type LogLine, spawnLogged } from './child-lines.js';
import { isDnsReady, MAIN, PROJECT_ROOT, spawnBoundaryCli } from './cli-boundary.js';
import { asUid, CLEAN_ENV } from './netns-pair.js';

const run = promisify(execFile);
/** The workload's uid: not boundary's, not root. */
export const CLIENT_UID = 65534;
/** Fixed inside the namespace, which is the test's own. */
export const PROXY_PORT = 3128;
export const PROXY_URL = `http://127.0.0.1:${PROXY_PORT}`;
const CLIENT_TIMEOUT_MS = 30_000;
/** Names boundary's hosts file sends to the origin on loopback. */
export const TEST_NAMES = ['api.example.test', 'py.example.test', 'tool.example.test', 'any.example.test', 'shell.example.test', 'rest.example.test'] as const;

// Answers every method on every path with what it saw, and prints one JSON line per request.
const ORIGIN_SCRIPT = `
import { createServer } from 'node:http';
const server = createServer((req, res) => {
  console.log(JSON.stringify({ saw: req.method + ' ' + req.url }));
  req.resume();
  req.on('end', () => res.end('origin saw ' + req.method + ' ' + req.url));
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
process.on('SIGTERM', () => process.exit(0));
`;

export type IdentitySourceKind = 'proc' | 'server';

export interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface IdentityNetns {
  readonly ns: string;
  /** World-readable temp dir (mode 0755, root's): policies, scripts and test files. */
  readonly dir: string;
  readonly originPort: number;
  readonly boundary: LoggedChild;
  /** `boundary identity serve`, when it is the source. */
  readonly identity: LoggedChild | undefined;
  /** Every `METHOD path` the origin was sent so far. */
  originSaw(): string[];
  /** argv in the namespace as CLIENT_UID (cwd /, a clean env plus `env`); never rejects. */
  asClient(argv: readonly string[], env?: Readonly<Record<string, string>>): Promise<Ran>;
  /** curl through the proxy as CLIENT_UID: `exe` is curl or a copy of it; the status is the last stdout line. */
  curl(url: string, options?: { readonly exe?: readonly string[]; readonly env?: Readonly<Record<string, string>> }): Promise<Ran & { readonly status: string }>;
  /** The decision event (or finding, with `finding`) of the newest matching line after `since` lines. */
  event(since: number, predicate: (unmapped: Record<string, unknown>, line: LogLine) => boolean): Promise<LogLine>;
  close(): Promise<void>;
}

export interface IdentityNetnsOptions {
  /** A few letters: keeps the namespaces of test files that run at the same time apart. */
  readonly tag: string;
  readonly source: IdentitySourceKind;
  /** The policy YAML, given the origin's port and the temp dir. */
  readonly policy: (originPort: number, dir: string) => string;
  /** Files the test needs before boundary starts (built binaries, copies). */
  readonly setup?: (dir: string) => Promise<void>;
}

/** A policy entry for the tests: one of TEST_NAMES on the origin's port, and its binaries as written. */
export interface TestEntry {
  readonly host: (typeof TEST_NAMES)[number];
  readonly binaries: readonly string[];
  /** Methods a REST endpoint allows on every path: the endpoint is then inspected, each request decided. */
  readonly methods?: readonly string[];
}

export function policyYaml(port: number, entries: Readonly<Record<string, TestEntry>>): string {
  const lines = Object.entries(entries).map(([key, e]) => {
    const rules = e.methods === undefined ? '' : `, protocol: rest, enforcement: enforce, rules: [${e.methods.map((m) => `{ allow: { method: ${m}, path: "/**" } }`).join(', ')}]`;
    return `  ${key}:\n    endpoints: [{ host: ${e.host}, port: ${port}${rules} }]\n    binaries: [${e.binaries.map((b) => `{ path: "${b}" }`).join(', ')}]\n`;
  });
  return `version: 1\nnetwork_policies:\n${lines.join('')}`;
}

/** The same cases against each identity source, each with a namespace and a boundary of its own; `env()` in a case. */
export function describeEachSource(title: string, options: Omit<IdentityNetnsOptions, 'source'> & { readonly skip: string | undefined }, cases: (env: () => IdentityNetns) => void): void {
  for (const source of ['proc', 'server'] as const) {
    describe(`${title} (${source})`, { skip: options.skip }, () => {
      let env: IdentityNetns | undefined;
      before(async () => {
        env = await startIdentityNetns({ ...options, tag: `${options.tag}${source[0]}`, source });
      });
      after(() => env?.close());
      cases(() => env as IdentityNetns);
    });
  }
}

export async function startIdentityNetns(options: IdentityNetnsOptions): Promise<IdentityNetns> {
  const ns = `${options.tag}i-${process.pid}`;
  const cleanups: (() => Promise<unknown>)[] = [];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  };
  try {
    cleanups.push(() => run('ip', ['netns', 'del', ns]));
    await run('ip', ['netns', 'add', ns]);
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    const dir = await mkdtemp(join(tmpdir(), 'boundary-issue28-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await chmod(dir, 0o755);
    await writeFile(join(dir, 'origin.mjs'), ORIGIN_SCRIPT);
    await writeFile(join(dir, 'hosts'), `127.0.0.1 ${TEST_NAMES.join(' ')}\n`);
    await options.setup?.(dir);
    const inNs = ['ip', 'netns', 'exec', ns];
    const origin = spawnLogged([...inNs, process.execPath, join(dir, 'origin.mjs')], { label: 'origin' });
    cleanups.push(() => origin.stop());
    const originPort = Number((await origin.waitFor((l) => typeof l.port === 'number')).port);
    await writeFile(join(dir, 'policy.yaml'), options.policy(originPort, dir));
    const flags = [
      '--policy', join(dir, 'policy.yaml'),
      '--proxy-listen', `127.0.0.1:${PROXY_PORT}`,
      '--admin-listen', '127.0.0.1:9901',
      '--dns-listen', '127.0.0.1:5353',
      '--synthetic-cidr', '127.77.0.0/16',
      '--hosts', join(dir, 'hosts'),
      // Nothing listens there: every answer comes from --hosts.
      '--upstream-dns', '127.0.0.1:5399',
      '--unsafe-allow-loopback-upstream',
      '--state-dir', join(dir, 'state'),
    ];
    let identity: LoggedChild | undefined;
    if (options.source === 'server') {
      const socket = join(dir, 'identity.sock');
      const server = spawnLogged([...inNs, process.execPath, '--import', 'tsx', MAIN, 'identity', 'serve', '--socket', socket], { cwd: PROJECT_ROOT, label: 'identity' });
      cleanups.push(() => server.stop());
      await server.waitFor((l) => l.msg === 'identity server listening');
      identity = server;
      flags.push('--identity-socket', socket);
    }
    const boundary = spawnBoundaryCli(flags, { prefix: inNs });
    cleanups.push(() => boundary.stop());
    await boundary.waitFor(isDnsReady);
    const asClient = (argv: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<Ran> =>
      run(inNs[0] as string, [...inNs.slice(1), ...asUid(CLIENT_UID), 'env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...argv], { env: CLEAN_ENV, cwd: '/', timeout: CLIENT_TIMEOUT_MS }).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
      );
    return {
      ns,
      dir,
      originPort,
      boundary,
      identity,
      originSaw: () => origin.lines.flatMap((l) => (typeof l.saw === 'string' ? [l.saw] : [])),
      asClient,
      async curl(url, { exe = ['curl'], env } = {}) {
        const ran = await asClient([...exe, '-sS', '--max-time', '10', '--noproxy', '', '-x', PROXY_URL, '-w', '\n%{http_code}', url], env);
        return { ...ran, status: ran.stdout.slice(ran.stdout.lastIndexOf('\n') + 1) };
      },
      event(since, predicate) {
        return boundary.waitFor((line) => boundary.lines.indexOf(line) >= since && line.ocsf?.unmapped !== undefined && predicate(line.ocsf.unmapped, line));
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
