// Two real executables as boundary's clients, for the binary identity tests: curl (forward, CONNECT with
// --proxytunnel, or straight to a synthetic address) and python3's http.client (the same three ways, and a
// tunnel held open across a policy reload). Each returns the HTTP status it got, or how the connection failed.

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** Bounds a hang only: a client's whole exchange, on a host loaded enough to stretch it far past its usual moment. */
const CLIENT_TIMEOUT_S = 60;

/** What a client saw: `200`, `403`, ... or `ERR <why>` when no response came. */
export interface Seen {
  readonly status: string;
  readonly body: string;
}

export type Route = { readonly via: 'forward' | 'connect'; readonly proxyPort: number } | { readonly via: 'direct'; readonly ip: string };

// One request per line of stdin after the first (`hold`): the same connection, so the same tunnel.
const PYTHON_CLIENT = `
import http.client, sys, urllib.parse
via, where, url, hold = sys.argv[1], sys.argv[2], sys.argv[3], len(sys.argv) > 4
u = urllib.parse.urlsplit(url)
if via == 'direct':
    c = http.client.HTTPConnection(where, u.port, timeout=${CLIENT_TIMEOUT_S})
else:
    c = http.client.HTTPConnection('127.0.0.1', int(where), timeout=${CLIENT_TIMEOUT_S})
    if via == 'connect':
        c.set_tunnel(u.hostname, u.port)
path = url if via == 'forward' else u.path
def get():
    try:
        c.request('GET', path, headers={'Host': '%s:%d' % (u.hostname, u.port)})
        r = c.getresponse()
        print(r.status, r.read().decode()[:4000].replace('\\n', ' '), flush=True)
    except Exception as e:
        print('ERR', type(e).__name__, str(e).replace('\\n', ' '), flush=True)
get()
while hold and sys.stdin.readline():
    get()
`;

/** Writes the python client where every uid can read it; returns its path. */
export async function writePythonClient(dir: string): Promise<string> {
  const path = join(dir, 'client.py');
  await writeFile(path, PYTHON_CLIENT, { mode: 0o644 });
  return path;
}

function parse(line: string): Seen {
  const [status = '', ...rest] = line.trim().split(' ');
  return status === 'ERR' ? { status: `ERR ${rest.join(' ')}`, body: '' } : { status, body: rest.join(' ') };
}

function where(route: Route): string {
  return route.via === 'direct' ? route.ip : String(route.proxyPort);
}

export async function pythonGet(script: string, route: Route, url: string): Promise<Seen> {
  const { stdout } = await run('/usr/bin/python3', [script, route.via, where(route), url]);
  return parse(stdout);
}

/** curl (or `exe`, a copy or a script that runs curl with these arguments) with the route's proxy settings. */
export async function curlGet(route: Route, url: string, exe: readonly string[] = ['curl']): Promise<Seen> {
  const routeArgs =
    route.via === 'direct'
      ? ['--noproxy', '*', '--resolve', `${new URL(url).hostname}:${new URL(url).port}:${route.ip}`]
      : ['--noproxy', '', '-x', `http://127.0.0.1:${route.proxyPort}`, ...(route.via === 'connect' ? ['--proxytunnel'] : [])];
  const args = ['-sS', '--max-time', String(CLIENT_TIMEOUT_S), '-w', '\n%{http_code}', ...routeArgs, url];
  const result = await run(exe[0] as string, [...exe.slice(1), ...args]).then(
    (r) => ({ ok: true as const, stdout: r.stdout, stderr: r.stderr }),
    (err: { stdout?: string; stderr?: string; code?: number }) => ({ ok: false as const, stdout: err.stdout ?? '', stderr: err.stderr ?? '', code: err.code }),
  );
  const cut = result.stdout.lastIndexOf('\n');
  const status = result.stdout.slice(cut + 1);
  // A CONNECT refusal is curl's exit 56 with the proxy's status in %{http_code}; a dropped capture, no status.
  if (status === '000' || status === '') return { status: `ERR curl ${result.ok ? 0 : result.code}: ${result.stderr.trim()}`, body: '' };
  return { status, body: result.stdout.slice(0, cut) };
}

/** A python client that keeps its connection (and tunnel) and sends one more request per next() call. */
export interface HeldPython {
  readonly first: Promise<Seen>;
  next(): Promise<Seen>;
  stop(): void;
}

export function pythonHeld(script: string, route: Route, url: string): HeldPython {
  const child: ChildProcess = spawn('/usr/bin/python3', [script, route.via, where(route), url, 'hold'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const waiter = waiting.shift();
      if (waiter === undefined) lines.push(line);
      else waiter(line);
    }
  });
  const nextLine = (): Promise<Seen> =>
    new Promise<string>((resolve) => {
      const line = lines.shift();
      if (line === undefined) waiting.push(resolve);
      else resolve(line);
    }).then(parse);
  return {
    first: nextLine(),
    next() {
      child.stdin?.write('again\n');
      return nextLine();
    },
    stop() {
      child.stdin?.end();
      child.kill('SIGKILL');
    },
  };
}
