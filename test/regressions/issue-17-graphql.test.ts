// Regression of issue 17, "GraphQL inspection": `protocol: graphql` endpoints denied every request
// (unsupported-l7-protocol). Now a request is parsed with graphql-js (POST bodies held up to
// graphql_max_body_bytes before anything goes upstream, GET envelopes from the query) and decided by operation
// type, name and root fields, batches and persisted queries included (docs/policy.md#graphql-inspection).
// A real graphql-js server behind boundary; curl as the client, forward HTTP and CONNECT with TLS interception.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { fetch, ProxyAgent } from 'undici';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { type GraphqlOrigin, graphqlOrigin, graphqlTlsOrigin, persistedHash } from '../harness/graphql-origin.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';

const run = promisify(execFile);
const SECRET = 'gql-secret-token-17';
const VIEWER = 'query Viewer { viewer { login } }';
/** The endpoint's graphql_max_body_bytes: small, so an over-limit body is cheap to send. */
const LIMIT = 2048;

const policy = (port: number, tlsPort: number): string => `version: 1
network_policies:
  github_graphql:
    endpoints:
      - host: api.example.test
        ports: [${port}, ${tlsPort}]
        path: /graphql
        protocol: graphql
        enforcement: enforce
        graphql_max_body_bytes: ${LIMIT}
        persisted_queries: allow_registered
        graphql_persisted_queries:
          ${persistedHash(VIEWER)}: { operation_type: query, operation_name: Viewer, fields: [viewer] }
        rules:
          - allow: { operation_type: query, fields: [viewer] }
          - allow: { operation_type: query, operation_name: "Repo*", fields: [repository] }
          - allow: { operation_type: mutation, fields: [createIssue] }
        deny_rules:
          - { operation_type: mutation, fields: [deleteRepository] }
    binaries: [{ path: "/**" }]
`;

interface Reply {
  readonly code: number;
  readonly body: string;
}

describe('issue 17: GraphQL inspection through boundary (real graphql-js server, curl)', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: GraphqlOrigin;
  let secure: GraphqlOrigin;
  let b: RunningBoundary;
  let dir: string;
  let caFile: string;
  let source: FileCredentialSource;

  before(async () => {
    const pki = await makeTestPki();
    plain = await graphqlOrigin({ persisted: [VIEWER] });
    secure = await graphqlTlsOrigin({ ca: pki.ca, persisted: [VIEWER] });
    dir = await mkdtemp(join(tmpdir(), 'boundary-gql-'));
    const providers = `providers:\n  gh:\n    env:\n      GH_TOKEN: "${SECRET}"\n    endpoints:\n      - { host: api.example.test, port: ${plain.port} }\n      - { host: api.example.test, port: ${secure.port} }\n`;
    source = (await credentialsFile(dir, providers)).source;
    b = await startBoundary({ policy: policy(plain.port, secure.port), upstreamCaPem: pki.ca.certPem, credentials: source });
    caFile = join(dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await source?.close();
    await Promise.all([plain?.close(), secure?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const routes = [
    { name: 'forward HTTP', origin: () => plain, url: (p: string) => `http://api.example.test:${plain.port}${p}`, tls: [] as string[] },
    { name: 'CONNECT + TLS interception', origin: () => secure, url: (p: string) => `https://api.example.test:${secure.port}${p}`, tls: ['--cacert'] },
  ];

  it('answers fetch (undici, the engine of Node fetch) through a ProxyAgent: allowed query, denied mutation', async () => {
    const dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}`, requestTls: { ca: b.caPem ?? '' } });
    try {
      const ask = (query: string) =>
        fetch(`https://api.example.test:${secure.port}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }), dispatcher });
      const ok = await ask(VIEWER);
      assert.equal(ok.status, 200);
      assert.deepEqual(await ok.json(), { data: { viewer: { login: 'octo' } } });
      const no = await ask('mutation { deleteRepository(id: "1") }');
      assert.equal(no.status, 403);
      assert.equal(((await no.json()) as { reason: string }).reason, 'deny-rule-matched');
    } finally {
      await dispatcher.close();
    }
  });

  for (const route of routes) {
    const curl = async (args: string[], path = '/graphql'): Promise<Reply> => {
      const tls = route.tls.length === 0 ? [] : ['--cacert', caFile];
      const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, ...tls, '-w', '\n%{http_code}', ...args, route.url(path)], {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      });
      const cut = stdout.lastIndexOf('\n');
      return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
    };
    const post = (body: unknown, extra: string[] = []): Promise<Reply> =>
      curl(['-H', 'content-type: application/json', ...extra, '--data-binary', typeof body === 'string' ? body : JSON.stringify(body)]);
    /** The request is denied with `status`, nothing reached the server, and the denial's event names policy and reason. */
    const denied = async (reply: Reply, status: number, reason: string): Promise<Record<string, unknown>> => {
      assert.equal(reply.code, status, reply.body);
      const body = JSON.parse(reply.body) as Record<string, unknown>;
      assert.equal(body.reason ?? 'graphql-rejected', reason);
      return body;
    };

    describe(route.name, () => {
      it('relays an allowed query to the GraphQL server, with the credential placeholder resolved', async () => {
        const seen = route.origin().seen.length;
        const reply = await post({ query: VIEWER }, ['-H', `authorization: Bearer ${PH}GH_TOKEN`]);
        assert.equal(reply.code, 200, reply.body);
        assert.deepEqual(JSON.parse(reply.body), { data: { viewer: { login: 'octo' } } });
        const got = route.origin().seen[seen];
        assert.equal(got?.headers.authorization, `Bearer ${SECRET}`);
        const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Allowed' && e.unmapped.reason_code === 'rule-allowed');
        assert.equal(event.firewall_rule?.name, 'github_graphql');
      });

      it('G6: relays a chunked allowed POST re-framed with Content-Length, after reading it whole', async () => {
        const seen = route.origin().seen.length;
        const reply = await post({ query: VIEWER }, ['-H', 'transfer-encoding: chunked']);
        assert.equal(reply.code, 200, reply.body);
        const got = route.origin().seen[seen];
        assert.equal(got?.headers['transfer-encoding'], undefined);
        assert.equal(got?.headers['content-length'], String(Buffer.byteLength(JSON.stringify({ query: VIEWER }))));
      });

      it('relays an allowed GET query (form-encoded, + as space)', async () => {
        const reply = await curl([], `/graphql?query=${encodeURIComponent(VIEWER).replaceAll('%20', '+')}`);
        assert.equal(reply.code, 200, reply.body);
        assert.deepEqual(JSON.parse(reply.body), { data: { viewer: { login: 'octo' } } });
      });

      it('denies a mutation a deny rule names (403 policy_denied), sending nothing upstream', async () => {
        const seen = route.origin().seen.length;
        const body = await denied(await post({ query: 'mutation Delete { deleteRepository(id: "1") }' }), 403, 'deny-rule-matched');
        assert.equal(body.error, 'policy_denied');
        assert.equal(body.policy, 'github_graphql');
        assert.equal(body.protocol, 'graphql');
        assert.match(String(body.detail), /deleteRepository/);
        assert.equal(route.origin().seen.length, seen);
        await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Denied' && e.unmapped.reason_code === 'deny-rule-matched' && e.firewall_rule?.name === 'github_graphql');
      });

      it('allows a mutation an allow rule names, aliases read as field names', async () => {
        const reply = await post({ query: 'mutation Create { made: createIssue(title: "t") { id title } }' });
        assert.equal(reply.code, 200, reply.body);
        assert.deepEqual(JSON.parse(reply.body), { data: { made: { id: '1', title: 't' } } });
      });

      it('decides operation names by glob: RepoLookup is allowed, Other is not', async () => {
        const ok = await post({ query: 'query RepoLookup { repository(owner: "o", name: "r") { id } }' });
        assert.equal(ok.code, 200, ok.body);
        await denied(await post({ query: 'query Other { repository(owner: "o", name: "r") { id } }' }), 403, 'no-rule-matched');
      });

      it('needs every root field allowed: viewer with adminAuditLog is denied, fragments included', async () => {
        const seen = route.origin().seen.length;
        await denied(await post({ query: '{ viewer { login } adminAuditLog }' }), 403, 'no-rule-matched');
        await denied(await post({ query: 'query Q { ...F } fragment F on Query { viewer { login } adminAuditLog }' }), 403, 'no-rule-matched');
        assert.equal(route.origin().seen.length, seen);
      });

      it('decides a batch as a whole: all allowed goes, one denied item denies it', async () => {
        const ok = await post([{ query: VIEWER }, { query: 'mutation { createIssue(title: "x") { id } }' }]);
        assert.equal(ok.code, 200, ok.body);
        assert.equal((JSON.parse(ok.body) as unknown[]).length, 2);
        const seen = route.origin().seen.length;
        await denied(await post([{ query: VIEWER }, { query: 'mutation { deleteRepository(id: "1") }' }]), 403, 'deny-rule-matched');
        assert.equal(route.origin().seen.length, seen);
      });

      it('refuses a body over graphql_max_body_bytes with 400 invalid_graphql_request, declared or chunked', async () => {
        const seen = route.origin().seen.length;
        const big = { query: `${VIEWER}\n#${'x'.repeat(LIMIT)}` };
        const declared = await post(big);
        assert.equal(declared.code, 400, declared.body);
        assert.equal((JSON.parse(declared.body) as { error: string }).error, 'invalid_graphql_request');
        const chunked = await post(big, ['-H', 'transfer-encoding: chunked']);
        assert.equal(chunked.code, 400, chunked.body);
        assert.equal(route.origin().seen.length, seen);
        await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'graphql-rejected');
      });

      it('denies what cannot be parsed, several operations without a name, and methods other than GET/POST', async () => {
        const seen = route.origin().seen.length;
        await denied(await post({ query: 'query {' }), 403, 'graphql-rejected');
        await denied(await post('not json'), 403, 'graphql-rejected');
        await denied(await post({ query: 'query A { viewer { login } } query B { viewer { login } }' }), 403, 'graphql-rejected');
        await denied(await curl(['-X', 'PUT', '--data-binary', JSON.stringify({ query: VIEWER })]), 403, 'graphql-rejected');
        assert.equal(route.origin().seen.length, seen);
      });

      it('decides a hash-only persisted query by the registry: registered goes, unknown is denied', async () => {
        const extensions = (hash: string): string => JSON.stringify({ persistedQuery: { version: 1, sha256Hash: hash } });
        const ok = await curl([], `/graphql?operationName=Viewer&extensions=${encodeURIComponent(extensions(persistedHash(VIEWER)))}`);
        assert.equal(ok.code, 200, ok.body);
        assert.deepEqual(JSON.parse(ok.body), { data: { viewer: { login: 'octo' } } });
        const missing = await denied(await post({ operationName: 'Viewer', extensions: JSON.parse(extensions('missing')) }), 403, 'no-rule-matched');
        assert.match(String(missing.detail), /persisted query is not registered/);
      });
    });
  }
});
