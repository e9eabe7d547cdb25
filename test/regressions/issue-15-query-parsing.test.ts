// Regression of issue 15, "Query parsing differs from servers": the
// matcher split on `&` only, compared keys in one case and kept `+`, so `x=0;debug=1` (Python's old parse_qsl, some
// Java servers), `DEBUG=1` (ASP.NET), `debug[]=1` (PHP, Rails, qs) and `q=drop+table` (HTML forms) passed a deny
// that the origin's own parse would have hit. A deny now fires on any reading; an allow needs every reading to pass.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = '10';

const policy = (port: number): string => `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/search" }
          - allow: { method: GET, path: "/export", query: { format: { any: ["csv", "json"] } } }
        deny_rules:
          - { method: GET, path: "/search", query: { debug: "*" } }
          - { method: GET, path: "/search", query: { q: "drop table*" } }
    binaries: [{ path: "/**" }]
`;

describe('issue 15: query parsing as origins parse it', { timeout: SUITE_TIMEOUT_MS }, () => {
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

  /** curl through the proxy with the target sent as written; the status and what the origin saw. */
  async function get(target: string): Promise<{ status: number; upstream: string | undefined }> {
    const seen = origin.seen.length;
    const url = `http://api.example.test:${origin.port}${target}`;
    const { stdout } = await run('curl', ['-sS', '--path-as-is', '--globoff', '--max-time', CURL_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-o', '/dev/null', '-w', '%{http_code}', url]);
    return { status: Number(stdout), upstream: origin.seen[seen]?.url };
  }

  // [target, status]: a deny on key debug (any value) and on q matching `drop table*`.
  const denies: readonly (readonly [string, number])[] = [
    ['/search?q=books', 200],
    ['/search?debug=1', 403],
    ['/search?DEBUG=1', 403],
    ['/search?Debug=1', 403],
    ['/search?debug[]=1', 403],
    ['/search?debug%5B%5D=1', 403],
    ['/search?q=books;debug=1', 403],
    ['/search?q=books&x=1;DEBUG[0]=1', 403],
    ['/search?q=drop+table+users', 403],
    ['/search?q=drop%20table', 403],
    ['/search?%2564ebug=1', 403],
    ['/search?q=drop%2520table', 403],
    ['/search?debugger=1', 200],
    ['/search?q=debug', 200],
  ];
  for (const [target, status] of denies) {
    it(`${status === 403 ? 'denies' : 'relays'} ${target}`, async () => {
      const res = await get(target);
      assert.equal(res.status, status, `${target} -> ${res.status}`);
      assert.equal(res.upstream, status === 200 ? target : undefined);
      if (status === 403) await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'deny-rule-matched' && e.http_request?.url.path === '/search');
    });
  }

  // [target, status]: an allow that needs format to be csv or json.
  const allows: readonly (readonly [string, number])[] = [
    ['/export?format=csv', 200],
    ['/export?format=csv&format=json', 200],
    ['/export?format[]=json', 200],
    ['/export?format=csv&FORMAT=exe', 403],
    ['/export?format=csv;format=exe', 403],
    ['/export?format=csv&format[]=exe', 403],
    ['/export?FORMAT=csv', 403],
    ['/export?x=1;format=csv', 403],
  ];
  for (const [target, status] of allows) {
    it(`${status === 403 ? 'denies' : 'relays'} ${target} against the allow on format`, async () => {
      const res = await get(target);
      assert.equal(res.status, status, `${target} -> ${res.status}`);
      assert.equal(res.upstream, status === 200 ? target : undefined);
    });
  }
});
