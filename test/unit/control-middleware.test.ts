// Middleware service registrations on the control channel (docs/supervisor.md#middleware-services): carried by the
// admission and policy pushes, checked on the boundary with --middleware-config's rules, absent meaning none.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createControlApplier } from '../../src/control/apply.js';
import { decodeMessage, encodeMessage, type WireMiddlewareService } from '../../src/control/messages.js';
import { registrationsFromWire } from '../../src/control/wire-middleware.js';
import type { MiddlewareRegistration } from '../../src/middleware/registrations.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, emptyPolicy } from '../../src/policy/store.js';
import type { BoundaryError } from '../../src/shared/errors.js';
import { testClock } from '../harness/clock.js';

const DLP: WireMiddlewareService = { name: 'acme/dlp', grpcEndpoint: 'http://127.0.0.1:7000', maxPayloadBytes: 65_536, timeoutMs: 1000, allowInsecureTransport: true };
const POLICY = 'version: 1\nnetwork_policies:\n  api:\n    endpoints:\n      - { host: api.example.test, port: 443 }\n';
const hash = parsePolicy(POLICY).hash;

function setup() {
  const registered: (readonly MiddlewareRegistration[])[] = [];
  const applier = createControlApplier({
    store: createPolicyStore(),
    parsePolicy,
    emptyPolicy,
    middleware: {
      async replace(wire) {
        registered.push(registrationsFromWire(wire, 'the test supervisor'));
      },
    },
    sink: { emit: () => undefined },
    now: testClock().now,
  });
  return { applier, registered };
}

const admitted = (extra: Record<string, unknown>) => ({
  kind: 'admitted' as const,
  sessionId: 's-1',
  generation: 1,
  policyHash: hash,
  policy: POLICY,
  credentialsHash: 'c0',
  settings: { failureMode: 'fail_closed' as const },
  ...extra,
});

describe('middleware service registrations from the supervisor', () => {
  it('rides on admission and policy pushes, and a service with an unknown key is refused on the wire', () => {
    const push = { kind: 'policy' as const, generation: 2, policyHash: hash, policy: POLICY, middleware: [DLP] };
    assert.deepEqual(decodeMessage(encodeMessage(push)), push);
    assert.deepEqual(decodeMessage(encodeMessage(admitted({ middleware: [DLP] }))).kind, 'admitted');
    assert.throws(
      () => decodeMessage(JSON.stringify({ ...push, middleware: [{ ...DLP, tls_ca_cert_path: '/etc/ca.pem' }] })),
      (err: BoundaryError) => err.code === 'CONTROL_MESSAGE_INVALID' && err.issues.some((i) => i.path === 'middleware[0].tls_ca_cert_path'),
    );
  });

  it('registers them before the policy, and a push without them registers none', async () => {
    const { applier, registered } = setup();
    await applier.applyAdmitted(admitted({ middleware: [DLP] }));
    assert.deepEqual(registered.at(-1)?.map((r) => [r.name, r.target, r.tls, r.timeoutMs]), [['acme/dlp', '127.0.0.1:7000', false, 1000]]);
    const outcome = await applier.applyPolicy({ kind: 'policy', generation: 2, policyHash: hash, policy: POLICY });
    assert.equal(outcome.status?.state, 'effective');
    assert.deepEqual(registered.at(-1), []);
  });

  it('checks them as --middleware-config is checked: a bad one fails the push with CONFIG_INVALID and nothing is registered', async () => {
    const { applier, registered } = setup();
    await applier.applyAdmitted(admitted({ middleware: [DLP] }));
    const cleartext = { ...DLP, allowInsecureTransport: false };
    const outcome = await applier.applyPolicy({ kind: 'policy', generation: 2, policyHash: hash, policy: POLICY, middleware: [cleartext, { ...DLP, timeoutMs: 5 }] });
    assert.equal(outcome.status?.state, 'failed');
    assert.equal(outcome.status?.error?.code, 'CONFIG_INVALID');
    assert.equal(registered.length, 1, 'the services registered before stay');
    assert.throws(
      () => registrationsFromWire([cleartext, { ...DLP, timeoutMs: 5 }], 'the test supervisor'),
      (err: BoundaryError) => err.code === 'CONFIG_INVALID' && err.issues.map((i) => i.path).join() === 'services[0].grpc_endpoint,services[1].timeout',
    );
  });
});
