// Issue 28 (red-team report against boundary), "the supervisor pushes every provider's credentials to every sandbox":
// each sandbox's boundary is now given only the providers its policy binds (credential_binding, provider endpoints
// its policy reaches, SigV4 keys through a binding), at attach and on every push; a policy edit that binds a
// provider delivers it, one that unbinds it withdraws it, and a sandbox whose policy stops parsing gets nothing
// new. Two sandboxes with different policies, real boundaries, a real supervisor over mTLS, each store.

import assert from 'node:assert/strict';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { canonicalPlaceholder } from '../../src/credentials/placeholder.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { SupervisorConfig } from '../../src/supervisor/supervisor.js';
import { type AttachedBoundary, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor } from '../harness/control.js';
import { withStateDir } from '../harness/state-dir.js';
import { type PostgresServer, postgresSkip, startPostgres } from '../harness/postgres.js';
import { sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const NAMES = ['a.example.test', 'api.wild.example.test', 'b.example.test', 's3.example.test'];

const SECRETS = {
  ALPHA_TOKEN: 'alpha-secret-2f9d0c',
  WILD_TOKEN: 'wild-secret-71ab3e',
  BETA_TOKEN: 'beta-secret-c04e19',
  GAMMA_TOKEN: 'gamma-secret-9ad2f7',
  DELTA_TOKEN: 'delta-secret-55e0b8',
  AWS_ACCESS_KEY_ID: 'AKIDISSUE28EXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-issue-28-do-not-leak',
} as const;
const ROTATED_BETA = 'beta-secret-rotated-3310aa';
const EPSILON = 'epsilon-secret-8c1d42';

function credentialsYaml(port: number, rotated = false): string {
  return `providers:
  alpha:
    env: { ALPHA_TOKEN: "${SECRETS.ALPHA_TOKEN}" }
    endpoints: [{ host: a.example.test, port: ${port} }]
  wild:
    env: { WILD_TOKEN: "${SECRETS.WILD_TOKEN}" }
    endpoints: [{ host: api.wild.example.test, port: ${port} }]
  beta:
    env: { BETA_TOKEN: "${rotated ? ROTATED_BETA : SECRETS.BETA_TOKEN}" }
    endpoints: [{ host: b.example.test, port: ${port} }]
  gamma:
    env: { GAMMA_TOKEN: "${SECRETS.GAMMA_TOKEN}" }
  delta:
    env: { DELTA_TOKEN: "${SECRETS.DELTA_TOKEN}" }
  aws:
    env: { AWS_ACCESS_KEY_ID: "${SECRETS.AWS_ACCESS_KEY_ID}", AWS_SECRET_ACCESS_KEY: "${SECRETS.AWS_SECRET_ACCESS_KEY}" }
${rotated ? `  epsilon:\n    env: { EPSILON_TOKEN: "${EPSILON}" }\n    endpoints: [{ host: b.example.test, port: ${port} }]\n` : ''}`;
}

function rest(host: string, port: number, extra = ''): string {
  return `      - host: "${host}"
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules: [{ allow: { method: GET, path: "/**" } }]
${extra}`;
}

/** sb-a reaches alpha's and wild's endpoints; `bind` adds a credential_binding to its first endpoint. */
function policyA(port: number, options: { bind?: string; path?: string } = {}): string {
  const binding = options.bind === undefined ? '' : `        credential_binding: { provider: ${options.bind} }\n`;
  return `version: 1
network_policies:
  a:
    endpoints:
${rest('a.example.test', port, binding).replace('"/**"', `"${options.path ?? '/**'}"`)}${rest('*.wild.example.test', port)}    binaries: [{ path: "/**" }]
`;
}

/** sb-b reaches beta's endpoint, binds gamma there, and signs s3.example.test with the aws provider. */
function policyB(port: number): string {
  return `version: 1
network_policies:
  b:
    endpoints:
${rest('b.example.test', port, '        credential_binding: { provider: gamma }\n')}${rest(
    's3.example.test',
    port,
    '        credential_signing: sigv4\n        signing_service: s3\n        signing_region: us-east-1\n        credential_binding: { provider: aws }\n',
  )}    binaries: [{ path: "/**" }]
`;
}

/** Provider -> key -> value, as the boundary's credential source holds them now. */
function held(b: AttachedBoundary): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const provider of b.boundary.credentials.current().providers.values()) {
    out[provider.name] = Object.fromEntries([...provider.keys].map(([key, secret]) => [key, secret.reveal()]));
  }
  return out;
}

const pick = (...keys: (keyof typeof SECRETS)[]) => Object.fromEntries(keys.map((k) => [k, SECRETS[k]]));

async function use(b: AttachedBoundary, host: string, port: number, key: string) {
  return sendRequest({ proxyPort: b.proxyPort, path: `http://${host}:${port}/issue-28/x`, headers: { authorization: `Bearer ${canonicalPlaceholder(key)}` } });
}

/** A placeholder of a key this boundary was not given: 500 credential_unavailable (unknown-key), nothing upstream. */
async function refusedHere(b: AttachedBoundary, origin: Origin, host: string, key: string): Promise<void> {
  const seen = origin.seen.length;
  const response = await use(b, host, origin.port, key);
  assert.equal(response.status, 500, `${key} at ${host}: ${response.body}`);
  assert.equal((JSON.parse(response.body) as { error: string }).error, 'credential_unavailable');
  const event = await b.log.waitFor((e) => e.action_id !== undefined && e.unmapped?.credential_reason !== undefined && e.http_request?.url?.hostname === host && !refusals.has(e));
  refusals.add(event);
  assert.equal(event.unmapped?.credential_reason, 'unknown-key');
  assert.equal(origin.seen.length, seen, 'nothing reached the origin');
}
const refusals = new Set<unknown>();

async function scenario(t: TestContext, pki: TestPki, origin: Origin, store: Partial<SupervisorConfig>): Promise<void> {
  const port = origin.port;
  const dir = await mkdtemp(join(tmpdir(), 'boundary-issue-28-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const credentialsFile = join(dir, 'credentials.yaml');
  const writeCredentials = async (text: string) => {
    await writeFile(`${credentialsFile}.tmp`, text);
    await rename(`${credentialsFile}.tmp`, credentialsFile);
  };
  await writeCredentials(credentialsYaml(port));
  const sup = await startTestSupervisor(pki, {
    policies: { 'sb-a': policyA(port), 'sb-b': policyB(port) },
    config: { credentialsFile, ...store },
  });
  t.after(() => sup.close());
  const names = Object.fromEntries(NAMES.map((name) => [name, ['127.0.0.1']]));
  const identity = async (sandboxId: string): Promise<TestPki> => ({
    ...pki,
    sandboxId,
    client: await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId, trustDomain: pki.trustDomain, now: Date.now }),
  });
  const a = await startAttached(await identity('sb-a'), sup, { names });
  t.after(() => a.close());
  const b = await startAttached(await identity('sb-b'), sup, { names });
  t.after(() => b.close());
  await a.waitState((s) => s.policy.effective);
  await b.waitState((s) => s.policy.effective);

  // At attach: each boundary holds exactly what its policy binds.
  assert.deepEqual(held(a), { alpha: pick('ALPHA_TOKEN'), wild: pick('WILD_TOKEN') });
  assert.deepEqual(held(b), { beta: pick('BETA_TOKEN'), gamma: pick('GAMMA_TOKEN'), aws: pick('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY') });

  assert.equal((await use(a, 'a.example.test', port, 'ALPHA_TOKEN')).status, 200);
  assert.equal(origin.seen.at(-1)?.headers.authorization, `Bearer ${SECRETS.ALPHA_TOKEN}`);
  assert.equal((await use(a, 'api.wild.example.test', port, 'WILD_TOKEN')).status, 200);
  assert.equal(origin.seen.at(-1)?.headers.authorization, `Bearer ${SECRETS.WILD_TOKEN}`);
  assert.equal((await use(b, 'b.example.test', port, 'GAMMA_TOKEN')).status, 200);
  assert.equal(origin.seen.at(-1)?.headers.authorization, `Bearer ${SECRETS.GAMMA_TOKEN}`);
  const signed = await sendRequest({ proxyPort: b.proxyPort, path: `http://s3.example.test:${port}/bucket/key` });
  assert.equal(signed.status, 200);
  assert.match(String(origin.seen.at(-1)?.headers.authorization), new RegExp(`^AWS4-HMAC-SHA256 Credential=${SECRETS.AWS_ACCESS_KEY_ID}/`));
  // The other sandbox's placeholders fail closed where they were never delivered.
  await refusedHere(a, origin, 'a.example.test', 'BETA_TOKEN');
  await refusedHere(a, origin, 'a.example.test', 'AWS_ACCESS_KEY_ID');
  await refusedHere(b, origin, 'b.example.test', 'ALPHA_TOKEN');
  await refusedHere(b, origin, 'b.example.test', 'DELTA_TOKEN');

  // A policy edit that binds delta delivers it; the edit that unbinds it withdraws it.
  const bound = policyA(port, { bind: 'delta' });
  await sup.writePolicy('sb-a', bound);
  await a.waitState((s) => s.policy.policyHash === parsePolicy(bound).hash);
  assert.deepEqual(held(a), { alpha: pick('ALPHA_TOKEN'), wild: pick('WILD_TOKEN'), delta: pick('DELTA_TOKEN') });
  assert.equal((await use(a, 'a.example.test', port, 'DELTA_TOKEN')).status, 200);
  assert.equal(origin.seen.at(-1)?.headers.authorization, `Bearer ${SECRETS.DELTA_TOKEN}`);
  const unbound = policyA(port, { path: '/issue-28/*' });
  await sup.writePolicy('sb-a', unbound);
  await a.waitState((s) => s.policy.policyHash === parsePolicy(unbound).hash);
  assert.deepEqual(held(a), { alpha: pick('ALPHA_TOKEN'), wild: pick('WILD_TOKEN') });
  await refusedHere(a, origin, 'a.example.test', 'DELTA_TOKEN');

  // sb-a's policy stops parsing (its broken text would bind beta): the last valid one stays, and a credentials
  // change that rotates beta and adds epsilon reaches sb-b only.
  const revisionA = a.boundary.credentials.current().revision;
  await sup.writePolicy('sb-a', `${policyA(port, { bind: 'beta' })}    not_a_field: true\n`);
  await sup.waitForLog((line) => line.includes('sb-a.yaml') && line.includes('policy file rejected'));
  await writeCredentials(credentialsYaml(port, true));
  await b.waitState(() => held(b).epsilon !== undefined && held(b).beta?.BETA_TOKEN === ROTATED_BETA);
  // The supervisor handles sb-a's changes in order: once this later valid edit is effective, every earlier one was.
  const later = policyA(port, { path: '/issue-28/**' });
  await sup.writePolicy('sb-a', later);
  await a.waitState((s) => s.policy.policyHash === parsePolicy(later).hash);
  assert.equal(a.boundary.credentials.current().revision, revisionA, 'sb-a was sent no credentials at all');
  assert.deepEqual(held(a), { alpha: pick('ALPHA_TOKEN'), wild: pick('WILD_TOKEN') });
  await refusedHere(a, origin, 'a.example.test', 'EPSILON_TOKEN');
  assert.ok(!a.log.text().includes(ROTATED_BETA) && !b.log.text().includes(ROTATED_BETA), 'no secret in a log line');
}

describe('issue 28: each sandbox is given only the credentials its policy binds', () => {
  let pki: TestPki;
  let origin: Origin;
  before(async () => {
    pki = await makeTestPki();
    origin = await httpOrigin();
  });
  after(() => origin.close());

  it('with the memory store', async (t) => {
    await scenario(t, pki, origin, {});
  });

  it('with the file store (--state-dir)', async (t) => {
    await withStateDir(t, 'boundary-issue-28-state-', (stateDir) => scenario(t, pki, origin, { stateDir }));
  });

  describe('with the PostgreSQL store', { skip: postgresSkip() }, () => {
    let server: PostgresServer | undefined;
    before(async () => {
      server = await startPostgres();
    });
    after(() => server?.stop());

    it('two sandboxes on one database', async (t) => {
      if (server === undefined) throw new Error('the PostgreSQL server did not start');
      await scenario(t, pki, origin, { databaseUrl: await server.createDatabase('issue_28') });
    });
  });
});
