// Interop of boundary's own HTTP/2 client (src/http2/h2-client.ts and friends) with an independent HTTP/2 server:
// nginx (ngx_http_v2 and its own HPACK, not nghttp2) as a TLS origin on loopback, with a certificate from a test CA.
// curl --http2 goes through boundary with interception on (CONNECT, and once transparently): response headers
// and body as nginx sent them, a 2 MiB download (the client's receive windows and WINDOW_UPDATEs), parallel streams
// on one boundary→nginx session, a 1 MiB PUT that nginx's DAV module writes to a file (the request body under
// nginx's flow control), and a 404. nginx's access log says which protocol and which connection each request came on.
// Root only (nginx runs as root here, in one process, without daemonising); set BOUNDARY_NGINX_DEBUG=1 for nginx's
// debug log (every frame it sends and receives) in the error log that a failing test prints.

import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, watch } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { issueCertificate } from '../../src/pki/issue.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { type LoggedChild, spawnLogged } from '../harness/child-lines.js';
import { stopChild } from '../harness/netns-pair.js';
import { freePort } from '../harness/supervisor-cli.js';
import { DEADLINE_MS, withinDeadline } from '../harness/waiters.js';

const run = promisify(execFile);
// No proxy variable reaches a client unless the test gives it one.
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
const HOST = 'nginx.example.test';
/** nginx binds, writes its pid file and serves within this on a loaded machine. */
const NGINX_START_TIMEOUT_MS = 15_000;
const CURL_MAX_TIME_S = '30';
const BIG_BYTES = 2 * 1024 * 1024;
const UPLOAD_BYTES = 1024 * 1024;
const SMALL_BODY = 'hello from nginx over h2\n';
/** The second nginx server's keepalive_requests, and the requests sent to it at once: several connections' worth. */
const SHORT_KEEPALIVE_REQUESTS = 4;
const SHORT_PARALLEL = 24;
/** A few hundred characters, Huffman-friendly and not, so that nginx's HPACK string coding is exercised. */
const LONG_VALUE = Array.from({ length: 12 }, (_, i) => `segment-${i}_ABCDEFGHIJKLMNOPQRSTUVWXYZ/0123456789=~`).join(',');
const EXTRA_HEADERS: Readonly<Record<string, readonly string[]>> = {
  'x-interop': ['nginx-h2'],
  'x-long': [LONG_VALUE],
  'set-cookie': ['first=1; Path=/', 'second=two; Path=/; HttpOnly'],
  'cache-control': ['no-store'],
};

function findNginx(): string | undefined {
  for (const dir of [...ENV.PATH.split(delimiter), '/usr/sbin', '/usr/local/sbin']) {
    const candidate = join(dir, 'nginx');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function nginxSkip(): string | false {
  if (process.getuid?.() !== 0) return 'nginx interop test skipped: needs root (nginx runs as root here)';
  if (findNginx() === undefined) return 'nginx interop test skipped: nginx is not installed (apt-get install nginx-light)';
  return false;
}

/** [major, minor, patch] of `nginx -v` (printed on stderr). */
function nginxVersion(bin: string): readonly number[] {
  const { stderr } = spawnSync(bin, ['-v'], { encoding: 'utf8', env: ENV });
  const match = /nginx\/(\d+)\.(\d+)\.(\d+)/.exec(stderr ?? '');
  if (match === null) throw new Error(`cannot read the nginx version from ${JSON.stringify(stderr)}`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

function atLeast(version: readonly number[], wanted: readonly number[]): boolean {
  for (let i = 0; i < wanted.length; i++) {
    const have = version[i] ?? 0;
    const want = wanted[i] ?? 0;
    if (have !== want) return have > want;
  }
  return true;
}

function nginxConf(dir: string, port: number, shortPort: number, version: readonly number[], debug: boolean): string {
  // `listen ... http2` became the `http2` directive in 1.25.1; the old form still works there, with a warning.
  const modernHttp2 = atLeast(version, [1, 25, 1]);
  const headers = Object.entries(EXTRA_HEADERS)
    .flatMap(([name, values]) => values.map((value) => `      add_header ${name} '${value}' always;`))
    .join('\n');
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
lock_file ${dir}/nginx.lock;
error_log ${dir}/error.log ${debug ? 'debug' : 'info'};
events { worker_connections 128; }
http {
  default_type application/octet-stream;
  log_format interop escape=json '{"protocol":"$server_protocol","alpn":"$ssl_alpn_protocol","connection":$connection,'
    '"method":"$request_method","uri":"$request_uri","host":"$host","via":"$http_via","status":$status,'
    '"bytes_sent":$body_bytes_sent,"content_length":"$content_length"}';
  access_log ${dir}/access.log interop;
  client_body_temp_path ${dir}/temp/body;
  proxy_temp_path ${dir}/temp/proxy;
  fastcgi_temp_path ${dir}/temp/fastcgi;
  uwsgi_temp_path ${dir}/temp/uwsgi;
  scgi_temp_path ${dir}/temp/scgi;
  server {
    listen 127.0.0.1:${port} ssl${modernHttp2 ? '' : ' http2'};
${modernHttp2 ? '    http2 on;\n' : ''}    server_name ${HOST};
    ssl_certificate ${dir}/cert.pem;
    ssl_certificate_key ${dir}/key.pem;
    root ${dir}/www;
    client_max_body_size 4m;
    client_body_buffer_size 16k;
    location = /small {
      default_type text/plain;
${headers}
      return 200 '${SMALL_BODY.replace('\n', '\\n')}';
    }
    location = /big { }
    location /upload/ { dav_methods PUT; }
    location /status/ { return 404; }
  }
  # A connection ends after ${SHORT_KEEPALIVE_REQUESTS} requests: GOAWAY, and the streams already on their way refused.
  server {
    listen 127.0.0.1:${shortPort} ssl${modernHttp2 ? '' : ' http2'};
${modernHttp2 ? '    http2 on;\n' : ''}    server_name ${HOST};
    ssl_certificate ${dir}/cert.pem;
    ssl_certificate_key ${dir}/key.pem;
    keepalive_requests ${SHORT_KEEPALIVE_REQUESTS};
    location = /small {
      default_type text/plain;
      return 200 '${SMALL_BODY.replace('\n', '\\n')}';
    }
  }
}
`;
}

interface AccessEntry {
  readonly protocol: string;
  readonly alpn: string;
  readonly connection: number;
  readonly method: string;
  readonly uri: string;
  readonly host: string;
  readonly via: string;
  readonly status: number;
  readonly bytes_sent: number;
  readonly content_length: string;
}

/** Resolves once `check` returns something: asked now and on each change in `dir`, as no line tells when nginx wrote it. */
async function whenFile<T>(dir: string, check: () => Promise<T | undefined>, what: string, gone?: Promise<unknown>, ms = DEADLINE_MS): Promise<T> {
  const watcher = watch(dir);
  try {
    const found = new Promise<T>((resolve, reject) => {
      let asking = false;
      let again = false;
      const ask = (): void => {
        if (asking) {
          again = true;
          return;
        }
        asking = true;
        check().then(
          (value) => {
            asking = false;
            if (value !== undefined) resolve(value);
            else if (again) {
              again = false;
              ask();
            }
          },
          (err: unknown) => reject(err),
        );
      };
      watcher.on('change', ask);
      watcher.on('error', reject);
      gone?.then(() => reject(new Error(`nginx exited while waiting for ${what}`)));
      ask();
    });
    return await withinDeadline(found, what, ms);
  } finally {
    watcher.close();
  }
}

interface Curl {
  readonly code: string;
  readonly version: string;
  /** Response header fields (names lower case), each with every value in order. */
  readonly headers: ReadonlyMap<string, readonly string[]>;
}

function parseHeaders(text: string): Map<string, string[]> {
  const fields = new Map<string, string[]>();
  // The last head in the file is the final response.
  const heads = text.split(/\r?\n\r?\n/).filter((h) => h.trim() !== '');
  for (const line of (heads.at(-1) ?? '').split(/\r?\n/).slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    fields.set(name, [...(fields.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  return fields;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

describe('HTTP/2 upstream interop with nginx (ngx_http_v2) through inspection', { skip: nginxSkip() }, () => {
  let dir = '';
  let port = 0;
  let shortPort = 0;
  let nginx: LoggedChild | undefined;
  let b: RunningBoundary | undefined;
  let caFile = '';
  let big = Buffer.alloc(0);
  let serial = 0;

  const boundary = (): RunningBoundary => {
    assert.ok(b !== undefined, 'boundary started');
    return b;
  };

  /** curl through boundary (CONNECT unless `via` gives other args); the body goes to a file in the temp dir. */
  async function curl(path: string, extra: readonly string[] = [], via?: readonly string[]): Promise<Curl & { body: Buffer }> {
    const n = ++serial;
    const headerFile = join(dir, 'client', `h${n}`);
    const bodyFile = join(dir, 'client', `b${n}`);
    const { stdout } = await run(
      'curl',
      [
        '-sS', '--max-time', CURL_MAX_TIME_S, '--noproxy', '', '--http2', '--cacert', caFile,
        ...(via ?? ['--proxy', `http://127.0.0.1:${boundary().proxyPort}`]),
        '-D', headerFile, '-o', bodyFile, '-w', '%{http_code} %{http_version}', ...extra,
        `https://${HOST}:${port}${path}`,
      ],
      { env: ENV },
    );
    const [code = '', version = ''] = stdout.trim().split(' ');
    const [headers, body] = await Promise.all([readFile(headerFile, 'utf8'), readFile(bodyFile).catch(() => Buffer.alloc(0))]);
    return { code, version, headers: parseHeaders(headers), body };
  }

  async function entries(): Promise<AccessEntry[]> {
    const text = await readFile(join(dir, 'access.log'), 'utf8');
    // Whole lines only: a line nginx is still writing has no newline yet.
    return text
      .split('\n')
      .slice(0, -1)
      .map((line) => JSON.parse(line) as AccessEntry);
  }

  /** The access log lines for these request URIs, once nginx has written all of them (it logs after the last byte). */
  function logged(uris: readonly string[]): Promise<AccessEntry[]> {
    return whenFile(
      dir,
      async () => {
        const all = await entries();
        const found = uris.map((uri) => all.find((e) => e.uri === uri));
        return found.every((e) => e !== undefined) ? (found as AccessEntry[]) : undefined;
      },
      `nginx access log lines for ${uris.join(' ')}`,
      nginx?.exited(),
    );
  }

  /** Runs a test body; a failure carries the tail of nginx's error log (its frames, with BOUNDARY_NGINX_DEBUG=1). */
  async function withNginxLog(body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (err) {
      const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
      const boundaryLog = b?.log.lines().slice(-20).join('\n') ?? '';
      if (err instanceof Error) err.message += `\n--- nginx error.log (tail) ---\n${log.slice(-8_000)}\n--- boundary log (last 20 lines) ---\n${boundaryLog}`;
      throw err;
    }
  }

  function assertHttp2Upstream(entry: AccessEntry): void {
    assert.equal(entry.protocol, 'HTTP/2.0', 'nginx was spoken to in HTTP/2');
    assert.equal(entry.alpn, 'h2');
    assert.equal(entry.host, HOST);
    assert.equal(entry.via, '2 boundary', 'the request came through boundary');
  }

  before(async () => {
    const bin = findNginx() as string;
    const version = nginxVersion(bin);
    dir = await mkdtemp(join(tmpdir(), 'boundary-nginx-'));
    await Promise.all(['temp', 'www/upload', 'client'].map((sub) => mkdir(join(dir, sub), { recursive: true })));
    const pki = await makeTestPki();
    const cert = await issueCertificate({ ca: pki.ca, kind: 'server', names: [HOST], now: Date.now });
    big = randomBytes(BIG_BYTES);
    port = await freePort();
    shortPort = await freePort();
    await Promise.all([
      writeFile(join(dir, 'cert.pem'), cert.certPem),
      writeFile(join(dir, 'key.pem'), cert.keyPem, { mode: 0o600 }),
      writeFile(join(dir, 'www', 'big'), big),
      writeFile(join(dir, 'nginx.conf'), nginxConf(dir, port, shortPort, version, process.env.BOUNDARY_NGINX_DEBUG === '1')),
    ]);
    // -e (1.19.5+) keeps even the errors before the configuration is read out of the package's log paths.
    const early = atLeast(version, [1, 19, 5]) ? ['-e', join(dir, 'error.log')] : [];
    nginx = spawnLogged([bin, '-p', dir, '-c', join(dir, 'nginx.conf'), ...early], { label: 'nginx', env: ENV });
    // nginx writes its pid file after it has bound the listening socket.
    const exited = nginx.exited();
    await whenFile(dir, async () => (existsSync(join(dir, 'nginx.pid')) ? true : undefined), 'nginx pid file', exited, NGINX_START_TIMEOUT_MS).catch(
      async (err: Error) => {
        const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
        throw new Error(`${err.message}\nstderr: ${nginx?.stderr()}\nerror.log: ${log}`);
      },
    );
    b = await startBoundary({
      upstreamCaPem: pki.ca.certPem,
      names: { [HOST]: ['127.0.0.1'] },
      policy: `version: 1
network_policies:
  nginx:
    endpoints:
      - host: ${HOST}
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/small" }
          - allow: { method: GET, path: "/big" }
          - allow: { method: GET, path: "/status/**" }
          - allow: { method: PUT, path: "/upload/**" }
      - host: ${HOST}
        port: ${shortPort}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/small" }
    binaries: [{ path: "/**" }]
`,
    });
    caFile = join(dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem as string);
  });

  after(async () => {
    try {
      await b?.close();
    } finally {
      if (nginx !== undefined) await stopChild(nginx.child);
      if (dir !== '') await rm(dir, { recursive: true, force: true });
    }
  });

  it('GET /small: status, the extra headers (two Set-Cookie, a long value) and the body as nginx sent them', () =>
    withNginxLog(async () => {
      const res = await curl('/small');
      assert.equal(res.code, '200');
      assert.equal(res.version, '2');
      assert.equal(res.body.toString('utf8'), SMALL_BODY);
      for (const [name, values] of Object.entries(EXTRA_HEADERS)) assert.deepEqual(res.headers.get(name), values, `response field ${name}`);
      assert.deepEqual(res.headers.get('content-type'), ['text/plain']);
      assert.match(res.headers.get('server')?.[0] ?? '', /^nginx/);
      const [entry] = await logged(['/small']);
      assertHttp2Upstream(entry!);
      assert.equal(entry!.status, 200);
    }));

  it('GET /big: 2 MiB arrive complete through the client receive windows (sha256)', () =>
    withNginxLog(async () => {
      const res = await curl('/big');
      assert.equal(res.code, '200');
      assert.equal(res.version, '2');
      assert.equal(res.body.length, BIG_BYTES);
      assert.equal(sha256(res.body), sha256(big));
      assert.deepEqual(res.headers.get('content-length'), [String(BIG_BYTES)]);
      const [entry] = await logged(['/big']);
      assertHttp2Upstream(entry!);
      assert.equal(entry!.bytes_sent, BIG_BYTES);
    }));

  it('runs parallel streams (curl --parallel) on one boundary→nginx session, every one complete', () =>
    withNginxLog(async () => {
      const paths = [1, 2, 3, 4].flatMap((i) => [`/big?p=${i}`, `/small?p=${i}`]);
      const outputs = paths.map((_, i) => join(dir, 'client', `parallel-${i}`));
      const { stdout } = await run(
        'curl',
        [
          '-sS', '--max-time', CURL_MAX_TIME_S, '--noproxy', '', '--http2', '--cacert', caFile, '--proxy', `http://127.0.0.1:${boundary().proxyPort}`,
          '--parallel', '--parallel-max', String(paths.length), '-w', '%{url_effective} %{http_code} %{http_version}\\n',
          ...paths.flatMap((path, i) => [`https://${HOST}:${port}${path}`, '-o', outputs[i]!]),
        ],
        { env: ENV },
      );
      const results = new Map(stdout.trim().split('\n').map((line) => {
        const [url = '', code = '', version = ''] = line.split(' ');
        return [new URL(url).pathname + new URL(url).search, `${code} ${version}`] as const;
      }));
      for (const path of paths) assert.equal(results.get(path), '200 2', `${path} through boundary`);
      const bodies = await Promise.all(outputs.map((file) => readFile(file)));
      paths.forEach((path, i) => {
        if (path.startsWith('/big')) assert.equal(sha256(bodies[i]!), sha256(big), `${path} complete`);
        else assert.equal(bodies[i]!.toString('utf8'), SMALL_BODY, `${path} complete`);
      });
      const seen = await logged(paths);
      for (const entry of seen) assertHttp2Upstream(entry);
      assert.deepEqual(new Set(seen.map((e) => e.status)), new Set([200]));
      assert.equal(new Set(seen.map((e) => e.connection)).size, 1, `one nginx connection for all: ${seen.map((e) => `${e.uri}@${e.connection}`).join(' ')}`);
    }));

  it(`nginx ending its connections every ${SHORT_KEEPALIVE_REQUESTS} requests (GOAWAY) loses no request: refused streams are sent again`, () =>
    withNginxLog(async () => {
      const paths = Array.from({ length: SHORT_PARALLEL }, (_, i) => `/small?k=${i}`);
      const { stdout } = await run(
        'curl',
        [
          '-sS', '--max-time', CURL_MAX_TIME_S, '--noproxy', '', '--http2', '--cacert', caFile, '--proxy', `http://127.0.0.1:${boundary().proxyPort}`,
          '--parallel', '--parallel-max', String(paths.length), '-w', '%{http_code}\\n', '-o', '/dev/null',
          ...paths.flatMap((path) => [`https://${HOST}:${shortPort}${path}`, '-o', '/dev/null']),
        ],
        { env: ENV },
      );
      assert.deepEqual(stdout.trim().split('\n'), paths.map(() => '200'), 'every request answered 200 through boundary');
      const seen = await logged(paths);
      assert.equal(seen.length, paths.length);
      assert.ok(new Set(seen.map((e) => e.connection)).size >= Math.ceil(paths.length / SHORT_KEEPALIVE_REQUESTS), 'nginx really ended its connections');
    }));

  it('PUT of 1 MiB: nginx reads the whole body under its flow control and writes it intact', () =>
    withNginxLog(async () => {
      const payload = randomBytes(UPLOAD_BYTES);
      const file = join(dir, 'client', 'upload.bin');
      await writeFile(file, payload);
      const res = await curl('/upload/one.bin', ['--upload-file', file]);
      assert.equal(res.code, '201', 'nginx created the file');
      assert.equal(res.version, '2');
      const stored = join(dir, 'www', 'upload', 'one.bin');
      assert.equal((await stat(stored)).size, UPLOAD_BYTES);
      assert.equal(sha256(await readFile(stored)), sha256(payload));
      const [entry] = await logged(['/upload/one.bin']);
      assertHttp2Upstream(entry!);
      assert.equal(entry!.method, 'PUT');
      assert.equal(entry!.status, 201);
    }));

  it('GET /status/404 comes back 404 with nginx error page', () =>
    withNginxLog(async () => {
      const res = await curl('/status/404');
      assert.equal(res.code, '404');
      assert.equal(res.version, '2');
      assert.match(res.body.toString('utf8'), /404 Not Found/);
      const [entry] = await logged(['/status/404']);
      assertHttp2Upstream(entry!);
      assert.equal(entry!.status, 404);
    }));

  it('a denied stream never reaches nginx, and the session serves the next one', () =>
    withNginxLog(async () => {
      const denied = await curl('/secret?denied=1');
      assert.equal(denied.code, '403');
      const res = await curl('/small?after=denied');
      assert.equal(res.code, '200');
      const [entry] = await logged(['/small?after=denied']);
      assertHttp2Upstream(entry!);
      assert.equal((await entries()).some((e) => e.uri.startsWith('/secret')), false);
    }));

  it('curl --http2 transparently, through the synthetic address policy DNS handed out', () =>
    withNginxLog(async () => {
      const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(boundary().dnsPort), '+short', HOST, 'A'], { env: ENV });
      const synthetic = stdout.trim();
      assert.match(synthetic, /^127\.77\./);
      const res = await curl('/small?captured=1', [], ['--resolve', `${HOST}:${port}:${synthetic}`]);
      assert.equal(res.code, '200');
      assert.equal(res.version, '2');
      assert.equal(res.body.toString('utf8'), SMALL_BODY);
      assert.deepEqual(res.headers.get('set-cookie'), EXTRA_HEADERS['set-cookie']);
      const [entry] = await logged(['/small?captured=1']);
      assertHttp2Upstream(entry!);
    }));
});
