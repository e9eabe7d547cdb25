// Denials a client can read (docs/destinations.md#denial-responses): real clients through the proxy on loopback see the
// short reason in the status line, where a CONNECT client shows it and never the JSON body. curl prints only the code
// in its error (`CONNECT tunnel failed, response 403`), so it is read from curl's verbose head; python's http.client and
// urllib put the phrase in the exception text itself.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { MAX_REASON_PHRASE_LENGTH, safeReasonPhrase } from '../../src/chain/denials.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
const CLIENT_TIMEOUT_S = '10';
const PHRASE = 'Forbidden by policy: no endpoint for other.test:443';

let origin: Origin;
let b: RunningBoundary;

before(async () => {
  origin = await httpOrigin();
  b = await startBoundary({
    policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
    binaries: [{ path: "/**" }]
`,
  });
});

after(async () => {
  await b?.close();
  await origin?.close();
});

/** curl through the proxy; resolves even on failure, with its exit code. */
async function curl(args: string[]): Promise<{ exit: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('curl', ['-sS', '--max-time', CLIENT_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, ...args]);
    return { exit: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { exit: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

// Prints the exception text each stdlib client raises for the denial.
const PYTHON = `
import http.client, sys, urllib.request, urllib.error
proxy_port, target = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPSConnection("127.0.0.1", proxy_port, timeout=10)
c.set_tunnel(target, 443)
try:
    c.request("GET", "/")
except OSError as e:
    print("http.client:", e)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": "http://127.0.0.1:%d" % proxy_port, "http": "http://127.0.0.1:%d" % proxy_port}))
try:
    opener.open("https://%s/" % target, timeout=10)
except urllib.error.URLError as e:
    print("urllib https:", e.reason)
try:
    opener.open("http://%s/x?secret=hunter2" % target, timeout=10)
except urllib.error.HTTPError as e:
    print("urllib http:", e.code, e.reason)
`;

describe('denial reason phrases with real clients', () => {
  it('curl: the CONNECT 403 carries the reason in its status line', async () => {
    const out = await curl(['-v', 'https://other.test/']);
    assert.notEqual(out.exit, 0);
    assert.match(out.stderr, /CONNECT tunnel failed, response 403/);
    assert.ok(out.stderr.includes(`< HTTP/1.1 403 ${PHRASE}\r\n`), out.stderr);
  });

  it('curl: a forward denial carries the reason too, and the JSON body is unchanged', async () => {
    const out = await curl(['-v', `http://other.test/path?token=hunter2`]);
    assert.ok(out.stderr.includes('< HTTP/1.1 403 Forbidden by policy: no endpoint for other.test:80\r\n'), out.stderr);
    const body = JSON.parse(out.stdout) as { error: string; reason: string };
    assert.equal(body.error, 'policy_denied');
    assert.equal(body.reason, 'no-endpoint-matched');
    assert.doesNotMatch(out.stderr.split('\n').filter((line) => line.startsWith('< HTTP')).join('\n'), /hunter2|token/);
  });

  it('curl: an L7 denial names the method and target, never the path or query', async () => {
    const out = await curl(['-v', `http://api.example.test:${origin.port}/secret/[CREDENTIAL]?key=hunter2`, '-g']);
    const status = out.stderr.split('\n').find((line) => line.startsWith('< HTTP/1.1 ')) ?? '';
    assert.equal(status.trim(), `< HTTP/1.1 403 Forbidden by policy: no rule allows GET on api.example.test:${origin.port}`);
  });

  it('python http.client and urllib show the phrase in their exception', async () => {
    const { stdout } = await run('python3', ['-c', PYTHON, String(b.proxyPort), 'other.test']);
    const lines = stdout.trim().split('\n');
    assert.deepEqual(lines, [
      `http.client: Tunnel connection failed: 403 ${PHRASE}`,
      `urllib https: Tunnel connection failed: 403 ${PHRASE}`,
      'urllib http: 403 Forbidden by policy: no endpoint for other.test:80',
    ]);
  });

  it('keeps every phrase to SP and visible ASCII, bounded', () => {
    assert.equal(safeReasonPhrase(403, ' by policy: a\r\nSet-Cookie: x\u00e9'), 'Forbidden by policy: a??Set-Cookie: x?');
    const long = safeReasonPhrase(403, ` ${'x'.repeat(500)}`);
    assert.equal(long.length, MAX_REASON_PHRASE_LENGTH);
    assert.ok(long.endsWith('...'));
  });
});
