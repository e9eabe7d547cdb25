// Regression of issue 15, "Risky path encodings pass through": `%5C`,
// `%00`, `%252e` and segments ending in a space or `.` reached origins that read them as `\`-as-`/`, a string end, a
// second escape or the segment without them, past deny rules. Through a real boundary with real curl (--path-as-is).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { head, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openTunnel, readAll, statusOf } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = '10';

// api: the defaults. other: the same rules with the two per-endpoint options on.
const policy = (port: number): string => `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
        deny_rules:
          - { method: GET, path: "/admin" }
          - { method: GET, path: "/admin/**" }
      - host: other.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        allow_encoded_backslash: true
        allow_encoded_nul: true
        rules:
          - allow: { method: GET, path: "/**" }
        deny_rules:
          - { method: GET, path: "/admin" }
    binaries: [{ path: "/**" }]
`;

describe('issue 15: risky path encodings', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: Origin;
  let b: RunningBoundary;

  before(async () => {
    origin = await httpOrigin();
    b = await startBoundary({ policy: policy(origin.port) });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  /** curl through the proxy with the target sent byte for byte; the status and what the origin saw. */
  async function get(host: string, path: string): Promise<{ status: number; upstream: string | undefined }> {
    const seen = origin.seen.length;
    const url = `http://${host}:${origin.port}${path}`;
    const { stdout } = await run('curl', ['-sS', '--path-as-is', '--max-time', CURL_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-o', '/dev/null', '-w', '%{http_code}', url]);
    return { status: Number(stdout), upstream: origin.seen[seen]?.url };
  }

  /** 400 from the canonicaliser itself (one more event naming `problem`), not from the HTTP parser. */
  async function refused(path: string, problem: string, host = 'api.example.test'): Promise<void> {
    const named = () =>
      b.log.events().filter((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'bad-request' && e.unmapped.reason === `request target refused: ${problem}`).length;
    const before = named();
    const { status, upstream } = await get(host, path);
    assert.equal(status, 400, `${path} -> ${status}`);
    assert.equal(upstream, undefined, 'nothing reached the origin');
    await b.log.waitFor(() => named() > before);
  }

  for (const [path, problem] of [
    ['/a%5Cb', 'encoded-backslash'],
    ['/public%5c..%5cadmin', 'encoded-backslash'],
    ['/public\\..\\admin', 'encoded-backslash'],
    ['/admin%00.png', 'encoded-nul'],
    ['/%252e%252e/admin', 'double-encoded'],
    ['/%2561dmin', 'double-encoded'],
    ['/%25%36%31dmin', 'double-encoded'],
    ['/x/..%20/admin', 'dot-segment-lookalike'],
    ['/x/.../admin', 'dot-segment-lookalike'],
  ] as const) {
    it(`refuses ${path} with 400 (${problem}) by default`, async () => {
      await refused(path, problem);
    });
  }

  for (const path of ['/admin.', '/admin%20', '/admin..', '/admin.%20', '/admin%2E', '/admin./x', '/x/../admin%20/y']) {
    it(`denies ${path} by the deny rule on /admin, as Windows and IIS read it`, async () => {
      const { status, upstream } = await get('api.example.test', path);
      assert.equal(status, 403, `${path} -> ${status}`);
      assert.equal(upstream, undefined, 'nothing reached the origin');
    });
  }

  it('does not fold case: /ADMIN. is relayed (policy check warns about the deny rule instead)', async () => {
    assert.deepEqual(await get('api.example.test', '/ADMIN.'), { status: 200, upstream: '/ADMIN.' });
  });

  it('relays a path whose last segment ends in a dot when no rule tells the readings apart', async () => {
    const { status, upstream } = await get('api.example.test', '/wiki/Washington,_D.C.');
    assert.equal(status, 200);
    assert.equal(upstream, '/wiki/Washington,_D.C.', 'sent as written, never stripped');
  });

  it('relays %5C, a raw backslash and %00 on an endpoint that allows them, as %5C and %00', async () => {
    assert.deepEqual(await get('other.example.test', '/files/a%5cb\\c'), { status: 200, upstream: '/files/a%5Cb%5Cc' });
    assert.deepEqual(await get('other.example.test', '/files/a%00b'), { status: 200, upstream: '/files/a%00b' });
    // The options keep the escape; they never decode it into a separator or past a deny rule.
    assert.equal((await get('other.example.test', '/admin')).status, 403);
  });

  it('keeps refusing double encoding on that endpoint: no option makes %25XX safe to match', async () => {
    await refused('/%2561dmin', 'double-encoded', 'other.example.test');
  });

  it('passes %25 that nothing can decode twice', async () => {
    assert.deepEqual(await get('api.example.test', '/rate/100%25'), { status: 200, upstream: '/rate/100%25' });
  });

  it('never relays a raw NUL: the HTTP parser refuses the request before any policy', async () => {
    const seen = origin.seen.length;
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${origin.port}`);
    tunnel.socket.write(head(`GET /admin\u0000.png HTTP/1.1\nHost: api.example.test:${origin.port}\nConnection: close`));
    const text = await readAll(tunnel.socket);
    assert.equal(statusOf(text), 400, text.slice(0, 200));
    assert.equal(origin.seen.length, seen, 'nothing reached the origin');
  });
});
