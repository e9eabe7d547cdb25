// Shared suite every IdentitySource must pass (/proc read in-process, and the identity server over its socket).
// Run from test/integration/identity-sources.test.ts; a source is driven only through its interface, against real
// processes holding loopback connections.

import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { IdentitySource } from '../../src/identity/source.js';
import { type AcceptingServer, acceptingServer, bashHolding, type HeldClient, holdClient, lookupFor, realExe } from '../harness/identity-processes.js';

export interface IdentityUnderTest {
  readonly source: IdentitySource;
  cleanup(): Promise<void>;
}

const BASH = realExe('/bin/bash');
const NODE = realExe(process.execPath);
/** Lookups made at once by the concurrency case. */
const CONCURRENT_LOOKUPS = 24;

export function runIdentitySourceContract(label: string, make: () => Promise<IdentityUnderTest>): void {
  describe(`IdentitySource contract: ${label}`, () => {
    let subject: IdentityUnderTest;
    let server: AcceptingServer;
    let dir: string;
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'boundary-identity-contract-'));
      server = await acceptingServer();
      subject = await make();
      await subject.source.start();
    });
    after(async () => {
      await subject.source.close();
      await subject.cleanup();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('has no problem once started', () => {
      assert.equal(subject.source.problem(), undefined);
    });

    it('names the process holding the client end, with its ancestors and resolved policy paths', async (t) => {
      const client = await holdClient(t, server, bashHolding(BASH, server.port));
      const link = join(dir, 'bash-link');
      await symlink(BASH, link);
      const result = await subject.source.lookup(lookupFor(client.socket, [link, BASH]));
      assert.ok(result.ok, JSON.stringify(result));
      assert.deepEqual(
        { pid: result.identity.pid, exe: result.identity.exe, parent: result.identity.ancestors[0], resolved: result.identity.resolved },
        { pid: client.child.pid, exe: BASH, parent: NODE, resolved: [[link, BASH]] },
      );
    });

    it('answers a connection nobody holds with socket-not-found', async (t) => {
      const client = await holdClient(t, server, bashHolding(BASH, server.port));
      const result = await subject.source.lookup({ ...lookupFor(client.socket), client: { ip: '127.0.0.1', port: 1 } });
      assert.deepEqual(result.ok ? 'ok' : result.failure, 'socket-not-found');
    });

    it(`answers ${CONCURRENT_LOOKUPS} lookups made at once, each with its own process`, async (t) => {
      const clients: HeldClient[] = [];
      for (let i = 0; i < 4; i++) clients.push(await holdClient(t, server, bashHolding(BASH, server.port)));
      const asked = Array.from({ length: CONCURRENT_LOOKUPS }, (_, i) => clients[i % clients.length] as HeldClient);
      const results = await Promise.all(asked.map((c) => subject.source.lookup(lookupFor(c.socket))));
      assert.deepEqual(
        results.map((r) => (r.ok ? r.identity.pid : r.failure)),
        asked.map((c) => c.child.pid),
      );
    });

    it('fails closed once closed', async (t) => {
      const client = await holdClient(t, server, bashHolding(BASH, server.port));
      const late = await make();
      await late.source.start();
      await late.source.close();
      const result = await late.source.lookup(lookupFor(client.socket));
      await late.cleanup();
      assert.deepEqual(result.ok ? 'ok' : result.failure, 'source-unavailable');
    });
  });
}
