// Both IdentitySources through one contract (test/contracts/identity-source.contract.ts): /proc read by this
// process (on its worker thread), and `boundary identity serve`'s server on a unix socket in front of the same.
// Then the socket's own behaviour: its file mode, a stale socket, a server that restarts, one that never answers
// and one that answers garbage, each failing closed with its code.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createIdentityServer } from '../../src/identity/server.js';
import { createSocketIdentitySource } from '../../src/identity/socket-source.js';
import { MAX_IDENTITY_MESSAGE_BYTES } from '../../src/identity/wire.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { runIdentitySourceContract } from '../contracts/identity-source.contract.js';
import { type AcceptingServer, acceptingServer, bashHolding, holdClient, lookupFor, realExe, TEST_IDENTITY_LOOKUP_TIMEOUT_MS, testProcSource } from '../harness/identity-processes.js';

const BASH = realExe('/bin/bash');
const quiet = () => createLogger({ format: 'json', level: 'silent', destination: { write: () => true } });
/**
 * Short, so the never-answering server's case takes a moment, not IDENTITY_LOOKUP_TIMEOUT_MS. Only a source facing a
 * server that never answers has it; every other source waits TEST_IDENTITY_LOOKUP_TIMEOUT_MS, a hang bound, so a
 * loaded host slows its answers without turning them into timeouts.
 */
const SILENT_SERVER_TIMEOUT_MS = 300;

async function servedSource(dir: string) {
  const socketPath = join(dir, `identity-${Math.random().toString(16).slice(2)}.sock`);
  const server = createIdentityServer({ socketPath, source: testProcSource(), logger: quiet() });
  await server.start();
  return { socketPath, server, source: createSocketIdentitySource({ socketPath, connectWaitMs: 2_000, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS }) };
}

let shared: string;
before(async () => {
  shared = await mkdtemp(join(tmpdir(), 'boundary-identity-sock-'));
});
after(() => rm(shared, { recursive: true, force: true }));

runIdentitySourceContract('proc (worker thread)', async () => ({ source: testProcSource(), cleanup: async () => undefined }));

runIdentitySourceContract('identity server over a unix socket', async () => {
  const { server, source } = await servedSource(shared);
  return { source, cleanup: () => server.close() };
});

describe('the identity socket', () => {
  let origin: AcceptingServer;
  before(async () => {
    origin = await acceptingServer();
  });
  after(() => origin.close());

  it('is mode 0660, replaces a stale socket and refuses to replace anything else', async () => {
    const first = await servedSource(shared);
    assert.equal((await stat(first.socketPath)).mode & 0o777, 0o660);
    // The server went away without removing its socket (a killed container): the next one takes the path over.
    const again = createIdentityServer({ socketPath: first.socketPath, source: testProcSource(), logger: quiet() });
    await again.start();
    await again.close();
    await first.server.close();
    const file = join(shared, 'not-a-socket');
    await writeFile(file, 'x');
    const refused = createIdentityServer({ socketPath: file, source: testProcSource(), logger: quiet() });
    await assert.rejects(refused.start(), { code: 'CONFIG_INVALID' });
    await refused.close();
  });

  it('fails lookups closed while the server is down, and reconnects when it is back', async (t) => {
    const client = await holdClient(t, origin, bashHolding(BASH, origin.port));
    const { socketPath, server, source } = await servedSource(shared);
    t.after(() => source.close());
    await source.start();
    assert.ok((await source.lookup(lookupFor(client.socket))).ok);
    await server.close();
    const down = await source.lookup(lookupFor(client.socket));
    assert.deepEqual(down.ok ? 'ok' : down.failure, 'source-unavailable');
    assert.match(source.problem() ?? '', /identity socket/);
    const back = createIdentityServer({ socketPath, source: testProcSource(), logger: quiet() });
    t.after(() => back.close());
    await back.start();
    const again = await source.lookup(lookupFor(client.socket));
    assert.ok(again.ok, JSON.stringify(again));
    assert.equal(source.problem(), undefined);
  });

  it('times out against a server that never answers, and drops one that answers garbage', async (t) => {
    const client = await holdClient(t, origin, bashHolding(BASH, origin.port));
    const socketPath = join(shared, 'fake.sock');
    let reply = '';
    const peers: Socket[] = [];
    const fake = createServer((peer) => {
      peers.push(peer);
      peer.on('data', () => {
        if (reply !== '') peer.write(reply);
      });
    });
    fake.listen(socketPath);
    await once(fake, 'listening');
    t.after(() => {
      for (const peer of peers) peer.destroy();
      fake.close();
    });
    const silentSource = createSocketIdentitySource({ socketPath, timeoutMs: SILENT_SERVER_TIMEOUT_MS });
    t.after(() => silentSource.close());
    await silentSource.start();
    const silent = await silentSource.lookup(lookupFor(client.socket));
    assert.deepEqual(silent.ok ? 'ok' : silent.failure, 'timeout');
    await silentSource.close();
    // The answers from here on are wrong, not late: a source that waits long enough to see them, however slow the host.
    const source = createSocketIdentitySource({ socketPath, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS });
    t.after(() => source.close());
    await source.start();
    reply = '{"id":1,"result":{"ok":true,"identity":{"pid":"one"}}}\n';
    const garbage = await source.lookup(lookupFor(client.socket));
    assert.deepEqual(garbage.ok ? 'ok' : garbage.failure, 'source-unavailable');
    assert.match(source.problem() ?? '', /identity\.pid/);
    reply = `${'x'.repeat(MAX_IDENTITY_MESSAGE_BYTES)}\n`;
    const huge = await source.lookup(lookupFor(client.socket));
    assert.deepEqual(huge.ok ? 'ok' : huge.failure, 'source-unavailable');
  });
});
