// External middleware services in attached mode (docs/supervisor.md#middleware-services): a real supervisor started
// with --middleware-config registers a real gRPC middleware service on a real attached boundary; a pushed policy naming
// it loads (its config validated by the service) and a request is denied by the service with its reason code; a policy
// naming an unregistered service is refused; after the registration is removed, the next policy naming it is refused.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ControlState } from '../../src/control/client.js';
import type { BoundaryError } from '../../src/shared/errors.js';
import { type AttachedBoundary, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor, type TestSupervisor } from '../harness/control.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { defaultBehaviour, type MiddlewareService, startMiddlewareService } from '../harness/middleware-service.js';
import { json, sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const registration = (port: number): string => `services:
  - name: acme/dlp
    grpc_endpoint: http://127.0.0.1:${port}
    allow_insecure_transport: true
    max_payload_bytes: 65536
    timeout: 1s
`;

const policy = (port: number, middleware: string, level = 'strict'): string => `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${port} }
    binaries: [{ path: "/**" }]
network_middlewares:
  dlp:
    middleware: ${middleware}
    config: { level: ${level} }
    endpoints: { include: [api.example.test] }
`;

describe('external middleware services registered by the supervisor', { timeout: SUITE_TIMEOUT_MS }, () => {
  let pki: TestPki;
  let origin: Origin;
  let service: MiddlewareService;
  let dir: string;
  let sup: TestSupervisor;
  let b: AttachedBoundary;

  before(async () => {
    pki = await makeTestPki();
    origin = await httpOrigin();
    service = await startMiddlewareService();
    dir = await mkdtemp(join(tmpdir(), 'boundary-attached-middleware-'));
    await writeFile(join(dir, 'middleware.yaml'), registration(service.port));
    sup = await startTestSupervisor(pki, { policies: { [pki.sandboxId]: policy(origin.port, 'acme/dlp') }, config: { middlewareConfig: join(dir, 'middleware.yaml') } });
    b = await startAttached(pki, sup);
  });

  after(async () => {
    await b?.close();
    await sup?.close();
    await Promise.all([origin?.close(), service?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const post = (path: string) => sendRequest({ proxyPort: b.proxyPort, method: 'POST', path: `http://api.example.test:${origin.port}${path}`, headers: { 'content-type': 'application/json' }, body: '{"ssn":"x"}' });
  /** The next policy generation after `from` was processed with an error whose issues name `code`. */
  const refusedAfter = (from: number, code: string) => (s: ControlState) =>
    (s.policy.generation ?? 0) > from && s.policy.lastError?.code === 'POLICY_INVALID' && s.policy.lastError.message.includes(`(${code})`);

  it('loads a pushed policy naming the service, validated by it, and the service denies a request with its reason code', async () => {
    await b.waitState((s) => s.policy.effective);
    assert.ok(service.validated.some((v) => v.middleware_name === 'acme/dlp'));
    const allowed = await post('/allow');
    assert.equal(allowed.status, 200, allowed.body);
    assert.equal(service.requests.length, 1);
    service.behaviour.evaluate = () => ({ decision: 'DECISION_DENY', reason_code: 'pii_found', reason: 'SECRET-REASON-TEXT' });
    try {
      const denied = await post('/deny');
      assert.equal(denied.status, 403);
      assert.equal(json(denied).reason_code, 'pii_found');
      assert.equal(denied.body.includes('SECRET-REASON-TEXT'), false);
      const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'middleware-denied' && e.http_request?.url?.path === '/deny');
      assert.equal((event.unmapped.middlewares as { reason_code?: string }[])[0]?.reason_code, 'pii_found');
    } finally {
      Object.assign(service.behaviour, defaultBehaviour());
    }
  });

  it('refuses a policy naming a service nobody registered: the supervisor keeps the last valid one, the boundary serves it', async () => {
    const held = b.state()?.policy.policyHash;
    await sup.writePolicy(pki.sandboxId, policy(origin.port, 'acme/other'));
    await sup.waitForLog((line) => line.includes('policy file rejected') && line.includes('(POLICY_MIDDLEWARE_EXTERNAL)'));
    assert.equal(b.state()?.policy.policyHash, held);
    assert.equal((await post('/still')).status, 200);
  });

  it('a config the service refuses fails the push on the boundary (POLICY_MIDDLEWARE_CONFIG); a valid one loads again', async () => {
    const before = b.state()?.policy.generation ?? 0;
    service.behaviour.validate = (config) => (config as { fields: { level?: { stringValue?: string } } }).fields.level?.stringValue !== 'bad';
    try {
      await sup.writePolicy(pki.sandboxId, policy(origin.port, 'acme/dlp', 'bad'));
      const state = await b.waitState(refusedAfter(before, 'POLICY_MIDDLEWARE_CONFIG'));
      assert.equal(state.policy.effective, false, 'fail_closed: the deny-all quarantine, not the refused policy');
      await sup.writePolicy(pki.sandboxId, policy(origin.port, 'acme/dlp', 'lenient'));
      await b.waitState((s) => s.policy.effective && (s.policy.generation ?? 0) > before + 1);
      assert.equal((await post('/again')).status, 200);
    } finally {
      Object.assign(service.behaviour, defaultBehaviour());
    }
  });

  it('after the supervisor restarts without the registration, a policy naming the service is refused', async () => {
    const plain = policy(origin.port, 'acme/dlp').split('network_middlewares:')[0] as string;
    const before = b.state()?.policy.generation ?? 0;
    await sup.writePolicy(pki.sandboxId, plain);
    await b.waitState((s) => s.policy.effective && (s.policy.generation ?? 0) > before);
    await writeFile(join(dir, 'middleware.yaml'), 'services: []\n');
    const session = b.state()?.sessionId;
    await sup.restart();
    const attached = await b.waitState((s) => s.phase === 'attached' && s.sessionId !== session && s.policy.effective);
    await sup.writePolicy(pki.sandboxId, policy(origin.port, 'acme/dlp', 'after'));
    await sup.waitForLog((line) => line.includes('policy file rejected') && line.includes('acme/dlp') && line.includes('(POLICY_MIDDLEWARE_EXTERNAL)'));
    assert.equal(b.state()?.policy.policyHash, attached.policy.policyHash);
  });

  it('a supervisor whose --middleware-config breaks a rule does not start (CONFIG_INVALID, by path)', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, `services:\n  - name: acme/dlp\n    grpc_endpoint: http://127.0.0.1:1\n    max_payload_bytes: 65536\n`);
    await assert.rejects(startTestSupervisor(pki, { config: { middlewareConfig: bad } }), (err: BoundaryError) => {
      assert.equal(err.code, 'CONFIG_INVALID');
      assert.deepEqual(err.issues.map((i) => i.path), ['services[0].grpc_endpoint']);
      return true;
    });
  });
});
