// Withdrawal hooks against real processes and real loopback servers: the command hook, the webhook (http and
// https), the runner's retries over the memory store, and the Kubernetes example hook (release-pod.mjs).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createMemoryStore } from '../../src/supervisor/store/memory.js';
import type { StoredWithdrawal, SupervisorStore } from '../../src/supervisor/store/store.js';
import { createHookRunner, HOOK_ERROR_AFTER_ATTEMPTS, type HookRunner } from '../../src/supervisor/hook-runner.js';
import { createHookDelivery } from '../../src/supervisor/withdrawal-hook.js';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { waiterList } from '../harness/waiters.js';

const WAIT_MS = 10_000;
const RETRY_BASE_MS = 5;
const POLL_MS = 50;
const RELEASE_POD = fileURLToPath(new URL('../../deploy/kubernetes/examples/release-pod.mjs', import.meta.url));

// Every line any logger in this file wrote: the tokens must appear in none of them.
const allLines: string[] = [];
const tokens: string[] = [];

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly err?: string;
  readonly attempts?: number;
  readonly withdrawalId?: string;
  readonly nextAttemptAt?: string;
}

// As test/harness/control.ts quietLogger(), without importing the supervisor that module builds on.
function captureLogger(): { logger: Logger; waitFor(predicate: (line: LogLine) => boolean, what: string): Promise<LogLine> } {
  const lines = waiterList<LogLine>();
  const logger = createLogger({
    format: 'json',
    level: 'debug',
    destination: {
      write: (line: string) => {
        allLines.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  });
  return { logger, waitFor: (predicate, what) => lines.waitFor(predicate, WAIT_MS, what) };
}

function newToken(): string {
  const token = randomBytes(24).toString('base64url');
  tokens.push(token);
  return token;
}

function withdrawal(overrides: Partial<StoredWithdrawal> = {}): StoredWithdrawal {
  return {
    id: 'w-1',
    sandboxId: 'sb-1',
    instanceId: 'sandbox-sb-1',
    reason: 'did not attach within the attach deadline (60 s)',
    at: Date.UTC(2025, 0, 2, 3, 4, 5),
    replicaId: 'r-1',
    hook: 'pending',
    attempts: 1,
    nextAttemptAt: null,
    lastError: null,
    deliveredAt: null,
    ...overrides,
  };
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-hook-'));
  after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function script(dir: string, name: string, body: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

type Handler = (req: Received, res: ServerResponse) => void;

/** Listens on loopback port 0; `cleanup` registers the close (a suite's before hook passes its own list). */
async function listen(server: ReturnType<typeof createHttpServer>, cleanup: (fn: () => Promise<void>) => void = after): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as AddressInfo).port;
}

/** A loopback server that records each request and answers with `handler` (default: 200). */
function recorder(handler: Handler = (_req, res) => res.end('{}')) {
  const requests = waiterList<Received>();
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(received);
      handler(received, res);
    });
  };
  return { requests, onRequest };
}

async function startRunner(store: SupervisorStore, deliver: (w: StoredWithdrawal) => Promise<void>, logger: Logger): Promise<HookRunner> {
  const runner = createHookRunner({ store, deliver, now: Date.now, logger, pollMs: POLL_MS, retryBaseMs: RETRY_BASE_MS, retryMaxMs: 4 * RETRY_BASE_MS });
  after(() => runner.close());
  runner.start();
  return runner;
}

/** A memory store holding one pending withdrawal, claimed the way the supervisor claims it. */
async function storeWithWithdrawal(instanceId: string): Promise<{ store: SupervisorStore; withdrawal: StoredWithdrawal }> {
  const store = createMemoryStore();
  await store.start();
  after(() => store.close());
  const at = Date.now();
  await store.expect('sb-1', instanceId, at - 1);
  const [claimed, ...rest] = await store.claimDue(at, 'r-1', true, () => 'did not attach within the attach deadline (1 s)');
  assert.equal(rest.length, 0);
  assert.ok(claimed !== undefined);
  return { store, withdrawal: claimed };
}

async function storedWithdrawal(store: SupervisorStore, id: string): Promise<StoredWithdrawal> {
  const found = (await store.withdrawals()).find((w) => w.id === id);
  assert.ok(found !== undefined, `withdrawal ${id} is in the store`);
  return found;
}

after(() => {
  for (const token of tokens) {
    const leaked = allLines.filter((line) => line.includes(token));
    assert.deepEqual(leaked, [], 'no log line carries a bearer token');
  }
});

describe('command hook', () => {
  it('runs argv without a shell, with the withdrawal on stdin and in BOUNDARY_* variables on top of the inherited env', async () => {
    const dir = await tempDir();
    const hook = await script(dir, 'hook.sh', 'cat > "$HOOK_OUT/stdin"\nenv | grep -e ^BOUNDARY_ -e ^HOOK_OUT | sort > "$HOOK_OUT/env"\nprintf "%s\\n" "$@" > "$HOOK_OUT/args"');
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: [hook, 'two words', '$HOME;'] }, { logger, env: { PATH: process.env.PATH, HOOK_OUT: dir } });
    await deliver(withdrawal({ attempts: 3 }));
    assert.deepEqual(JSON.parse(await readFile(join(dir, 'stdin'), 'utf8')), {
      id: 'w-1',
      sandboxId: 'sb-1',
      instanceId: 'sandbox-sb-1',
      reason: 'did not attach within the attach deadline (60 s)',
      at: '2025-01-02T03:04:05.000Z',
      attempt: 3,
    });
    assert.equal(
      await readFile(join(dir, 'env'), 'utf8'),
      [
        'BOUNDARY_INSTANCE_ID=sandbox-sb-1',
        'BOUNDARY_SANDBOX_ID=sb-1',
        'BOUNDARY_WITHDRAWAL_AT=2025-01-02T03:04:05.000Z',
        'BOUNDARY_WITHDRAWAL_ATTEMPT=3',
        'BOUNDARY_WITHDRAWAL_ID=w-1',
        'BOUNDARY_WITHDRAWAL_REASON=did not attach within the attach deadline (60 s)',
        `HOOK_OUT=${dir}`,
        '',
      ].join('\n'),
    );
    assert.equal(await readFile(join(dir, 'args'), 'utf8'), 'two words\n$HOME;\n');
  });

  it('reports a non-zero exit with its code and the last lines of stderr', async () => {
    const dir = await tempDir();
    const lines = Array.from({ length: 30 }, (_, i) => `echo "line ${i}" >&2`).join('\n');
    const hook = await script(dir, 'fail.sh', `${lines}\necho "pod not found" >&2\nexit 3`);
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: [hook] }, { logger });
    await assert.rejects(deliver(withdrawal()), (err: Error) => {
      assert.match(err.message, /exited with code 3: .*line 29 \| pod not found$/);
      assert.doesNotMatch(err.message, /line 1 \|/, 'only the last lines are quoted');
      return true;
    });
  });

  it('kills a command that does not finish within the timeout, with what it started', async () => {
    const dir = await tempDir();
    // The hook's `sleep` is the subject (a command that hangs), not a wait: the test awaits the rejection.
    const hook = await script(dir, 'hang.sh', 'echo "waiting for the API" >&2\nsleep 30 &\nwait');
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: [hook], timeoutMs: 200 }, { logger });
    const started = Date.now();
    await assert.rejects(deliver(withdrawal()), /no answer within 200 ms and was killed: waiting for the API/);
    assert.ok(Date.now() - started < 5_000, 'the timeout, not the sleep, ended the delivery');
  });

  it('reports a program that cannot be started', async () => {
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: ['/nonexistent/hook'] }, { logger });
    await assert.rejects(deliver(withdrawal()), /\/nonexistent\/hook could not run: ENOENT/);
  });

  it('is retried by the runner while it fails and marked delivered once it exits 0', async () => {
    const dir = await tempDir();
    const ready = join(dir, 'ready');
    const hook = await script(dir, 'until.sh', `[ -e "${ready}" ] && exit 0\necho "gate still held" >&2\nexit 3`);
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-retry');
    const runner = await startRunner(store, createHookDelivery({ command: [hook] }, { logger }), logger);
    const failed = await waitFor((l) => l.msg === 'withdrawal hook failed; will retry' && l.attempts === 2, 'second failure');
    assert.match(failed.err ?? '', /exited with code 3: gate still held/);
    assert.ok(failed.nextAttemptAt !== undefined && !Number.isNaN(Date.parse(failed.nextAttemptAt)));
    await writeFile(ready, '');
    runner.kick();
    const delivered = await waitFor((l) => l.msg === 'withdrawal hook delivered' && l.withdrawalId === pending.id, 'delivery');
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'delivered');
    assert.equal(stored.attempts, delivered.attempts);
    assert.ok(stored.attempts >= 3);
    assert.ok(stored.deliveredAt !== null);
    assert.match(stored.lastError ?? '', /code 3/);
  });
});

describe('webhook', () => {
  it('POSTs the withdrawal with its idempotency key and the token read afresh for each delivery', async () => {
    const dir = await tempDir();
    const tokenFile = join(dir, 'token');
    const [first, second] = [newToken(), newToken()];
    await writeFile(tokenFile, `${first}\n`);
    const { requests, onRequest } = recorder();
    const port = await listen(createHttpServer(onRequest));
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ webhook: { url: `http://127.0.0.1:${port}/hooks/withdrawn`, tokenFile } }, { logger });
    await deliver(withdrawal());
    await writeFile(tokenFile, second);
    await deliver(withdrawal({ id: 'w-2', attempts: 2 }));
    const [one, two] = requests.items;
    assert.equal(one?.method, 'POST');
    assert.equal(one?.url, '/hooks/withdrawn');
    assert.equal(one?.headers['content-type'], 'application/json');
    assert.equal(one?.headers['idempotency-key'], 'w-1');
    assert.equal(one?.headers.authorization, `Bearer ${first}`);
    assert.deepEqual(JSON.parse(one?.body ?? ''), {
      id: 'w-1',
      sandboxId: 'sb-1',
      instanceId: 'sandbox-sb-1',
      reason: 'did not attach within the attach deadline (60 s)',
      at: '2025-01-02T03:04:05.000Z',
      attempt: 1,
    });
    assert.equal(two?.headers['idempotency-key'], 'w-2');
    assert.equal(two?.headers.authorization, `Bearer ${second}`);
    assert.equal(JSON.parse(two?.body ?? '').attempt, 2);
  });

  it('sends no authorization header without a token file', async () => {
    const { requests, onRequest } = recorder();
    const port = await listen(createHttpServer(onRequest));
    const { logger } = captureLogger();
    await createHookDelivery({ webhook: { url: `http://127.0.0.1:${port}/` } }, { logger })(withdrawal());
    assert.equal(requests.items[0]?.headers.authorization, undefined);
  });

  it('reports a non-2xx status with a bounded body excerpt and never the token it sent', async () => {
    const dir = await tempDir();
    const tokenFile = join(dir, 'token');
    const token = newToken();
    await writeFile(tokenFile, token);
    // A receiver that echoes the request headers back, and then a lot more.
    const { onRequest } = recorder((req, res) => res.writeHead(403).end(`denied for ${req.headers.authorization} ${'x'.repeat(100_000)}`));
    const port = await listen(createHttpServer(onRequest));
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ webhook: { url: `http://127.0.0.1:${port}/hook?secret=1`, tokenFile } }, { logger });
    await assert.rejects(deliver(withdrawal()), (err: Error) => {
      assert.match(err.message, new RegExp(`^withdrawal webhook http://127.0.0.1:${port}/hook answered 403: denied for Bearer \\[redacted\\] x+$`));
      assert.ok(err.message.length < 5_000, 'the excerpt is bounded');
      assert.ok(!err.message.includes(token));
      return true;
    });
  });

  it('fails a webhook that does not answer within the timeout', async () => {
    const { onRequest } = recorder(() => {});
    const server = createHttpServer(onRequest);
    const port = await listen(server);
    after(() => server.closeAllConnections());
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ webhook: { url: `http://127.0.0.1:${port}/` }, timeoutMs: 200 }, { logger });
    await assert.rejects(deliver(withdrawal()), /no answer within 200 ms/);
  });

  it('is retried by the runner through 500s until a 200, then marked delivered', async () => {
    const dir = await tempDir();
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, newToken());
    let failuresLeft = 2;
    const { requests, onRequest } = recorder((_req, res) => {
      if (failuresLeft-- > 0) res.writeHead(500).end('database is down');
      else res.end();
    });
    const port = await listen(createHttpServer(onRequest));
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-webhook');
    const runner = await startRunner(store, createHookDelivery({ webhook: { url: `http://127.0.0.1:${port}/`, tokenFile } }, { logger }), logger);
    runner.kick();
    const failed = await waitFor((l) => l.msg === 'withdrawal hook failed; will retry', 'failure');
    assert.match(failed.err ?? '', /answered 500: database is down/);
    await waitFor((l) => l.msg === 'withdrawal hook delivered', 'delivery');
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'delivered');
    assert.equal(stored.attempts, 3);
    assert.deepEqual(
      requests.items.map((r) => [r.headers['idempotency-key'], JSON.parse(r.body).attempt]),
      [
        [pending.id, 1],
        [pending.id, 2],
        [pending.id, 3],
      ],
    );
  });

  describe('over https', () => {
    let pki: TestPki;
    let port: number;
    let dir: string;
    before(async () => {
      pki = await makeTestPki();
      dir = await mkdtemp(join(tmpdir(), 'boundary-hook-tls-'));
      await writeFile(join(dir, 'ca.pem'), pki.ca.certPem);
      await writeFile(join(dir, 'other-ca.pem'), pki.otherCa.certPem);
      const { onRequest } = recorder();
      port = await listen(createHttpsServer({ cert: pki.server.certPem, key: pki.server.keyPem }, onRequest), (fn) => closers.push(fn));
    });
    const closers: (() => Promise<void>)[] = [];
    after(async () => {
      for (const close of closers) await close();
      await rm(dir, { recursive: true, force: true });
    });

    it('verifies the receiver against the CA file', async () => {
      const { logger } = captureLogger();
      await createHookDelivery({ webhook: { url: `https://127.0.0.1:${port}/`, caFile: join(dir, 'ca.pem') } }, { logger })(withdrawal());
    });

    it('fails against a CA that did not sign the receiver, and without one (the default roots)', async () => {
      const { logger } = captureLogger();
      const wrong = createHookDelivery({ webhook: { url: `https://127.0.0.1:${port}/`, caFile: join(dir, 'other-ca.pem') } }, { logger });
      await assert.rejects(wrong(withdrawal()), /withdrawal webhook https:\/\/127\.0\.0\.1:\d+\/ failed: .*(certificate|UNABLE_TO|SELF_SIGNED)/i);
      const defaults = createHookDelivery({ webhook: { url: `https://127.0.0.1:${port}/` } }, { logger });
      await assert.rejects(defaults(withdrawal()), /failed: .*(certificate|UNABLE_TO|SELF_SIGNED)/i);
    });
  });

  it('refuses a config that cannot work when it is built', () => {
    const { logger } = captureLogger();
    assert.throws(() => createHookDelivery({}, { logger }), /needs a command, a webhook or both/);
    assert.throws(() => createHookDelivery({ command: [] }, { logger }), /needs a program/);
    assert.throws(() => createHookDelivery({ webhook: { url: 'ftp://example.test/' } }, { logger }), /must be http: or https:/);
    assert.throws(() => createHookDelivery({ webhook: { url: 'http://u:p@example.test/' } }, { logger }), /must not carry credentials/);
    assert.throws(() => createHookDelivery({ webhook: { url: 'https://example.test/', tokenFile: '/nonexistent/token' } }, { logger }), /cannot read \/nonexistent\/token: ENOENT/);
    assert.throws(() => createHookDelivery({ command: ['true'], timeoutMs: 0 }, { logger }), /positive integer/);
  });
});

describe('runner', () => {
  it('delivers a withdrawal claimed with hook=true and the store shows it delivered', async () => {
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-runner');
    assert.equal(pending.hook, 'pending');
    const seen: StoredWithdrawal[] = [];
    await startRunner(store, async (w) => void seen.push(w), logger);
    const line = await waitFor((l) => l.msg === 'withdrawal hook delivered', 'delivery');
    assert.equal(line.withdrawalId, pending.id);
    assert.equal(line.attempts, 1);
    assert.deepEqual(
      seen.map((w) => [w.id, w.attempts]),
      [[pending.id, 1]],
    );
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'delivered');
    assert.equal(stored.attempts, 1);
  });

  it(`keeps retrying a failing hook, and logs at error from attempt ${HOOK_ERROR_AFTER_ATTEMPTS}`, async () => {
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-stuck');
    const runner = await startRunner(store, async () => Promise.reject(new Error('receiver is down')), logger);
    const line = await waitFor((l) => l.level === 50, 'error line');
    assert.equal(line.attempts, HOOK_ERROR_AFTER_ATTEMPTS);
    assert.equal(line.msg, 'withdrawal hook keeps failing; retrying until acknowledged');
    const before = await waitFor((l) => l.attempts === HOOK_ERROR_AFTER_ATTEMPTS - 1, 'the attempt before');
    assert.equal(before.level, 40);
    assert.equal(line.err, 'receiver is down');
    await runner.close();
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'pending');
    assert.equal(stored.lastError, 'receiver is down');
  });

  it('close() waits for the delivery in flight and records its result', async () => {
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-close');
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const started = waiterList<string>();
    const runner = await startRunner(
      store,
      async (w) => {
        started.push(w.id);
        await gate;
      },
      logger,
    );
    await started.waitFor((id) => id === pending.id, WAIT_MS, 'delivery start');
    const closing = runner.close();
    release();
    await closing;
    await waitFor((l) => l.msg === 'withdrawal hook delivered', 'delivery');
    assert.equal((await storedWithdrawal(store, pending.id)).hook, 'delivered');
  });
});

describe('release-pod.mjs (the Kubernetes example hook)', () => {
  let pki: TestPki;
  let saDir: string;
  let token: string;
  let port: number;
  let status: Map<string, number>;
  const requests = waiterList<Received>();

  before(async () => {
    pki = await makeTestPki();
    saDir = await mkdtemp(join(tmpdir(), 'boundary-sa-'));
    token = newToken();
    await writeFile(join(saDir, 'token'), `${token}\n`);
    await writeFile(join(saDir, 'ca.crt'), pki.ca.certPem);
    status = new Map();
    const { onRequest } = recorder((req, res) => {
      requests.push(req);
      const code = status.get(`${req.method} ${req.url}`) ?? 200;
      res.writeHead(code, { 'content-type': 'application/json' }).end(code === 200 ? '{"kind":"Pod"}' : `{"kind":"Status","code":${code}}`);
    });
    port = await listen(createHttpsServer({ cert: pki.server.certPem, key: pki.server.keyPem }, onRequest), (fn) => closers.push(fn));
  });
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closers) await close();
    await rm(saDir, { recursive: true, force: true });
  });

  function run(args: string[], instanceId = 'sandbox-sb-1'): Promise<{ code: number; stdout: string; stderr: string }> {
    requests.items.length = 0;
    const env = { PATH: process.env.PATH, RELEASE_POD_API_URL: `https://127.0.0.1:${port}`, RELEASE_POD_SA_DIR: saDir, BOUNDARY_INSTANCE_ID: instanceId, BOUNDARY_WITHDRAWAL_ID: 'w-9' };
    return new Promise((resolve) => {
      execFile(process.execPath, [RELEASE_POD, ...args], { env, timeout: WAIT_MS }, (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
      });
    });
  }

  const summary = (r: Received) => ({ method: r.method, path: r.url, authorization: r.headers.authorization, contentType: r.headers['content-type'], body: r.body });

  it('ungate removes the named scheduling gate with one strategic merge patch', async () => {
    const result = await run(['ungate', '--gate', 'boundary.example/attached', '--namespace', 'agents']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(requests.items.map(summary), [
      {
        method: 'PATCH',
        path: '/api/v1/namespaces/agents/pods/sandbox-sb-1',
        authorization: `Bearer ${token}`,
        contentType: 'application/strategic-merge-patch+json',
        body: '{"spec":{"schedulingGates":[{"$patch":"delete","name":"boundary.example/attached"}]}}',
      },
    ]);
  });

  it('delete removes the pod and then its PVC', async () => {
    const result = await run(['delete', '--pvc', '{instance}-workspace']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(requests.items.map(summary), [
      { method: 'DELETE', path: '/api/v1/namespaces/default/pods/sandbox-sb-1', authorization: `Bearer ${token}`, contentType: undefined, body: '' },
      {
        method: 'DELETE',
        path: '/api/v1/namespaces/default/persistentvolumeclaims/sandbox-sb-1-workspace',
        authorization: `Bearer ${token}`,
        contentType: undefined,
        body: '',
      },
    ]);
    assert.match(result.stdout, /delete pod default\/sandbox-sb-1: done; delete PVC default\/sandbox-sb-1-workspace: done \(withdrawal w-9\)/);
  });

  it('exits 0 when the pod and PVC are already gone, so a repeated delivery converges', async () => {
    status.set('DELETE /api/v1/namespaces/default/pods/sandbox-gone', 404);
    status.set('DELETE /api/v1/namespaces/default/persistentvolumeclaims/sandbox-gone-workspace', 404);
    status.set('PATCH /api/v1/namespaces/default/pods/sandbox-gone', 404);
    const deleted = await run(['delete', '--pvc', '{instance}-workspace'], 'sandbox-gone');
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /already gone.*already gone/);
    const ungated = await run(['ungate', '--gate', 'g'], 'sandbox-gone');
    assert.equal(ungated.code, 0, ungated.stderr);
  });

  it('exits 1 with the API status when the API refuses, and 2 on bad usage', async () => {
    status.set('DELETE /api/v1/namespaces/default/pods/sandbox-forbidden', 403);
    const refused = await run(['delete'], 'sandbox-forbidden');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /answered 403/);
    assert.ok(!refused.stderr.includes(token));
    const usage = await run(['ungate']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--gate/);
    const badName = await run(['delete'], '../secrets');
    assert.equal(badName.code, 2);
    assert.equal(requests.items.length, 0, 'a bad name never reaches the API');
  });
});
