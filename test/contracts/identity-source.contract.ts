// Shared suite every IdentitySource must pass (/proc read in-process, and the identity server over its socket).
// Run from test/integration/identity-sources.test.ts; a source is driven only through its interface, against real
// processes holding loopback connections: identities, verification of what policy paths name, injected code,
// every holder of a socket and the re-check of a known one.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { chmod, copyFile, mkdtemp, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { IdentitySource } from '../../src/identity/source.js';
import { type AcceptingServer, acceptingServer, bashHolding, type HeldClient, holdClient, lookupFor, realExe } from '../harness/identity-processes.js';

export interface IdentityUnderTest {
  readonly source: IdentitySource;
  cleanup(): Promise<void>;
}

const BASH = realExe('/bin/bash');
const NODE = realExe(process.execPath);
const PYTHON = realExe('/usr/bin/python3');
const SLEEP = realExe('/usr/bin/sleep');
/** A library every Debian has: loaded from its own place it runs nothing of the workload's. */
const SYSTEM_LIBRARY = '/lib/x86_64-linux-gnu/libm.so.6';
/** Lookups made at once by the concurrency case. */
const CONCURRENT_LOOKUPS = 24;
/**
 * A forked child runs bash's image until its exec of sleep, which sends no event: its executable is read again
 * this often, at most this many times, before the re-check (a loaded host can hold the exec back for seconds).
 */
const EXEC_POLL_MS = 10;
const MAX_EXEC_POLLS = 3_000;

/** Resolves once process `pid` runs `exe`, read from /proc; fails after MAX_EXEC_POLLS reads. */
async function untilExec(pid: number, exe: string): Promise<void> {
  for (let i = 0; i < MAX_EXEC_POLLS; i++) {
    if ((await readlink(`/proc/${pid}/exe`).catch(() => '')) === exe) return;
    await delay(EXEC_POLL_MS);
  }
  assert.fail(`process ${pid} never ran ${exe}`);
}

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

    it('verifies the executables a policy path names, and only those', async (t) => {
      const client = await holdClient(t, server, bashHolding(BASH, server.port));
      const result = await subject.source.lookup(lookupFor(client.socket, [BASH]));
      assert.ok(result.ok, JSON.stringify(result));
      assert.deepEqual([result.identity.verified, result.identity.distrusted], [[BASH], []]);
      const globbed = await subject.source.lookup({ ...lookupFor(client.socket), globs: [`${BASH.slice(0, BASH.lastIndexOf('/'))}/*`] });
      assert.ok(globbed.ok && globbed.identity.verified.includes(BASH), JSON.stringify(globbed));
    });

    it('distrusts a program bind-mounted over a listed path in a private user and mount namespace', async (t) => {
      const target = join(dir, 'listed-tool');
      await writeFile(target, '', { mode: 0o755 });
      const mount = `mount --bind ${BASH} ${target} && exec ${target} -c "exec 3<>/dev/tcp/127.0.0.1/${server.port}; echo ready; read -r _"`;
      const client = await holdClient(t, server, ['unshare', '-Urm', 'sh', '-c', mount]);
      const result = await subject.source.lookup(lookupFor(client.socket, [target]));
      assert.ok(result.ok, JSON.stringify(result));
      assert.deepEqual([result.identity.exe, result.identity.verified, result.identity.distrusted], [target, [], [{ path: target, failure: 'executable-unverified' }]]);
    });

    it('refuses a holder that runs with LD_PRELOAD, or maps a library others may write', async (t) => {
      const preloaded = await holdClient(t, server, ['env', `LD_PRELOAD=${SYSTEM_LIBRARY}`, ...bashHolding(BASH, server.port)]);
      const loader = await subject.source.lookup(lookupFor(preloaded.socket, [BASH]));
      assert.deepEqual(loader.ok ? 'ok' : loader.failure, 'loader-injection');
      const writable = join(dir, 'libshared.so');
      await copyFile(SYSTEM_LIBRARY, writable);
      await chmod(writable, 0o666);
      const loading = `import ctypes, socket, sys\nctypes.CDLL('${writable}')\ns = socket.create_connection(('127.0.0.1', ${server.port}))\nprint('ready', flush=True)\nsys.stdin.read()\n`;
      const mapped = await holdClient(t, server, [PYTHON, '-c', loading]);
      const code = await subject.source.lookup(lookupFor(mapped.socket, [PYTHON]));
      assert.ok(!code.ok && code.failure === 'writable-code' && code.detail.includes(writable), JSON.stringify(code));
    });

    it('reports every holder, and a re-check by the socket sees one that joined since', async (t) => {
      const script = `exec 3<>/dev/tcp/127.0.0.1/${server.port}; echo ready; read -r _; sleep 60 & echo "forked $!"; read -r _`;
      const client = await holdClient(t, server, [BASH, '-c', script]);
      const first = await subject.source.lookup(lookupFor(client.socket, [BASH]));
      assert.ok(first.ok && first.holders.length === 0, JSON.stringify(first));
      const forked = once(client.child.stdout as NodeJS.ReadableStream, 'data');
      client.child.stdin?.write('\n');
      const pid = Number(/forked (\d+)/.exec(String(await forked))?.[1]);
      await untilExec(pid, SLEEP);
      const again = await subject.source.lookup({ ...lookupFor(client.socket, [BASH]), socket: first.socket });
      assert.ok(again.ok, JSON.stringify(again));
      assert.deepEqual([again.socket, again.holders.map((h) => h.exe)], [first.socket, [SLEEP]]);
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
