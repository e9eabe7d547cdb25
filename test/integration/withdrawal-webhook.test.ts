// The withdrawal webhook against real loopback servers, http and https: the request it POSTs, tokens read
// afresh and never logged, non-2xx and timeout failures, the runner's retries, and config refused at build time.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createHookDelivery } from '../../src/supervisor/withdrawal-hook.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import {
  assertNoTokenLogged,
  captureLogger,
  listen,
  newToken,
  recorder,
  startRunner,
  storedWithdrawal,
  storeWithWithdrawal,
  tempDir,
  withdrawal,
} from '../harness/withdrawal-hooks.js';

after(assertNoTokenLogged);

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
