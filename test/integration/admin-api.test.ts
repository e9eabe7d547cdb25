// The boundary's admin API: /v1/explain answers like `policy explain --json` against the live policy, /v1/denials
// lists recent denials without a query value or placeholder, and `policy explain --from-event` replays a real
// logged denial line.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { denialsRoute, explainRoute } from '../../src/app/admin-api.js';
import { policyCommand } from '../../src/app/cli/policy.js';
import { createPolicyStore } from '../../src/policy/store.js';
import { createPolicyTexts } from '../../src/policy/texts.js';
import { createDenialRing } from '../../src/telemetry/denials.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { startBoundary } from '../harness/boundary.js';
import { sendRequest } from '../harness/proxy-client.js';

const POLICY = `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: 80
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: /v1/ok }
    binaries: [{ path: /** }]
`;
const QUERY_VALUE = 'QV-7f3a9c-never-logged';
const PLACEHOLDER = 'openshell:resolve:env:API_TOKEN';

function get(port: number, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function cli(cwd: string, ...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: {},
    cwd,
    signal: new AbortController().signal,
    now: () => 0,
  };
  return { code: await policyCommand(argv, io), stdout, stderr };
}

describe('boundary admin API callers', () => {
  it('answers /v1/explain and /v1/denials to loopback peers only, in every spelling, and refuses others before reading the query', async () => {
    const deps = { store: createPolicyStore(), texts: createPolicyTexts(), ring: createDenialRing(), permanent: () => undefined, binaryIdentity: 'required' as const };
    const query = new URLSearchParams({ url: 'https://api.example.test/' });
    for (const route of [explainRoute(deps), denialsRoute(deps)]) {
      for (const address of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1']) {
        assert.notEqual((await route.answer(query, { address })).status, 403, `${route.path} from ${address}`);
      }
      for (const address of ['10.244.1.2', '192.168.1.5', 'fd00::1', '::ffff:10.0.0.1', undefined]) {
        const refused = await route.answer(new URLSearchParams('bogus=1'), { address });
        assert.deepEqual([refused.status, (refused.body as { error?: string }).error], [403, 'ADMIN_LOOPBACK_ONLY'], `${route.path} from ${address}`);
      }
    }
  });
});

describe('boundary admin API', () => {
  it('answers /v1/explain like policy explain --json, with the live generation and hash', async (t) => {
    const b = await startBoundary({ policy: POLICY });
    t.after(() => b.close());
    const url = 'http://api.example.test/v1/other?x=1';
    const live = await get(b.adminPort, `/v1/explain?url=${encodeURIComponent(url)}&method=POST`);
    assert.equal(live.status, 200);
    const offline = await cli(b.dir, 'explain', b.policyPath, url, '--method', 'POST', '--json');
    const { generation, policyHash, ...rest } = live.body;
    assert.deepEqual(rest, JSON.parse(offline.stdout));
    assert.equal(generation, b.boundary.store.current().generation);
    assert.equal(policyHash, b.boundary.store.current().hash);
    assert.equal(typeof rest.suggestion, 'string');
  });

  it('refuses a missing or bad parameter with 400 and a coded error', async (t) => {
    const b = await startBoundary({ policy: POLICY });
    t.after(() => b.close());
    for (const [path, parameter] of [
      ['/v1/explain', 'url'],
      ['/v1/explain?url=ftp://x.test/', 'url'],
      ['/v1/explain?url=http://x.test/&method=GE%20T', 'method'],
      ['/v1/explain?url=http://x.test/&binary=relative', 'binary'],
      ['/v1/explain?url=http://x.test/&url=http://y.test/', 'url'],
      ['/v1/explain?url=http://x.test/&verbose=1', 'verbose'],
      ['/v1/denials?last=-1', 'last'],
      ['/v1/denials?last=ten', 'last'],
    ] as const) {
      const reply = await get(b.adminPort, path);
      assert.equal(reply.status, 400, path);
      assert.equal(reply.body.error, 'ADMIN_REQUEST_INVALID', path);
      assert.equal(reply.body.parameter, parameter, path);
    }
  });

  it('lists recent denials with query keys only, never a query value or placeholder, and a suggestion', async (t) => {
    const b = await startBoundary({ policy: POLICY });
    t.after(() => b.close());
    const response = await sendRequest({
      proxyPort: b.proxyPort,
      path: `http://api.example.test/v1/items/${PLACEHOLDER}?api_key=${QUERY_VALUE}&${PLACEHOLDER}=${QUERY_VALUE}&page=2`,
    });
    assert.equal(response.status, 403);
    const reply = await get(b.adminPort, '/v1/denials?last=5');
    assert.equal(reply.status, 200);
    const text = JSON.stringify(reply.body);
    assert.ok(!text.includes(QUERY_VALUE), 'no query value');
    assert.ok(!text.includes(PLACEHOLDER) && !text.includes('openshell'), 'no placeholder');
    const denials = reply.body.denials as Record<string, unknown>[];
    assert.equal(denials.length, 1);
    const [denial] = denials;
    assert.equal(denial?.adapter, 'forward');
    assert.equal(denial?.reason, 'no-rule-matched');
    assert.equal(denial?.policy, 'api');
    assert.equal(denial?.method, 'GET');
    assert.equal(denial?.host, 'api.example.test');
    assert.equal(denial?.port, 80);
    assert.equal(denial?.path, '/v1/items/[CREDENTIAL]');
    assert.deepEqual(denial?.queryKeys, ['api_key', '[CREDENTIAL]', 'page']);
    assert.equal(typeof denial?.suggestion, 'string');
    assert.match(String(denial?.suggestion), /network_policies:/);
    assert.equal(reply.body.generation, b.boundary.store.current().generation);
    // The capped form: last above the cap still answers.
    assert.equal((await get(b.adminPort, '/v1/denials?last=100000')).status, 200);
    assert.ok(!b.log.text().includes(QUERY_VALUE), 'the log holds no query value either');
  });

  it('replays a logged denial line with policy explain --from-event, as explain would answer for its fields', async (t) => {
    const b = await startBoundary({ policy: POLICY });
    t.after(() => b.close());
    await sendRequest({ proxyPort: b.proxyPort, method: 'DELETE', path: `http://api.example.test/v1/ok?force=${QUERY_VALUE}` });
    const line = b.log.lines().find((l) => l.includes('"replay"'));
    assert.ok(line !== undefined, 'a denial line carries replay fields');
    assert.ok(!line.includes(QUERY_VALUE));
    const eventFile = join(b.dir, 'denial.jsonl');
    await writeFile(eventFile, `${b.log.lines().join('\n')}\n`);
    const replayed = await cli(b.dir, 'explain', b.policyPath, '--from-event', eventFile, '--json');
    const direct = await cli(b.dir, 'explain', b.policyPath, 'http://api.example.test:80/v1/ok?force=', '--method', 'DELETE', '--json');
    assert.equal(replayed.code, 1);
    assert.equal(replayed.stdout, direct.stdout);
    assert.match(replayed.stderr, /replaying DELETE http:\/\/api\.example\.test:80\/v1\/ok\?force= from/);
    assert.match(replayed.stderr, /unmapped\.replay\.method/);
    assert.match(replayed.stderr, /unmapped\.replay\.query_keys/);
    // A bare OCSF object works the same way.
    const bare = join(b.dir, 'bare.json');
    await writeFile(bare, JSON.stringify((JSON.parse(line) as { ocsf: unknown }).ocsf));
    assert.equal((await cli(b.dir, 'explain', b.policyPath, '--from-event', bare, '--json')).stdout, direct.stdout);
  });
});
