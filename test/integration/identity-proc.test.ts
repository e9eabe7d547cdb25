// The /proc walk with real processes on loopback (docs/identity.md#how-a-connection-maps-to-a-process): the owner
// of a socket, its ancestors and argv paths; every holder of a shared socket (B14), and forks that policy cannot tell
// apart; deleted and oddly named executables (B13, B17); policy paths resolved through symlinks; the ways a walk
// fails closed; and one read of the socket tables per batch of waiting lookups.

import assert from 'node:assert/strict';
import { chmod, copyFile, mkdir, mkdtemp, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SYNC_PROC_FS, type ProcFs } from '../../src/identity/proc-fs.js';
import { createProcIdentitySource } from '../../src/identity/proc-source.js';
import type { IdentityResult, IdentitySource } from '../../src/identity/source.js';
import { type AcceptingServer, acceptingServer, bashHolding, holdClient, lookupFor, realExe, TEST_IDENTITY_LOOKUP_TIMEOUT_MS, testProcSource } from '../harness/identity-processes.js';

const BASH = realExe('/bin/bash');
const PYTHON = realExe('/usr/bin/python3');
const NODE = realExe(process.execPath);

function identity(result: IdentityResult) {
  assert.ok(result.ok, result.ok ? '' : `${result.failure}: ${result.detail}`);
  return result.identity;
}

describe('process identity from /proc', () => {
  let dir: string;
  let server: AcceptingServer;
  let source: IdentitySource;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-identity-'));
    server = await acceptingServer();
    source = testProcSource();
    await source.start();
    // The worker thread's first start (slow from TypeScript sources on a loaded machine) is not a lookup's cost.
    await source.lookup({ client: { ip: '127.0.0.1', port: 1 }, proxy: { ip: '127.0.0.1', port: 1 }, paths: [] });
  });
  after(async () => {
    await source.close();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('names the owner, its ancestors up from this test process, and its argv paths', async (t) => {
    const script = join(dir, 'hold.py');
    await writeFile(script, `import socket, sys\ns = socket.create_connection(('127.0.0.1', ${server.port}))\nprint('ready', flush=True)\nsys.stdin.read()\n`);
    const client = await holdClient(t, server, ['/usr/bin/python3', script]);
    const found = identity(await source.lookup(lookupFor(client.socket)));
    assert.equal(found.pid, client.child.pid);
    assert.equal(found.exe, PYTHON, 'a script is its interpreter to the kernel');
    assert.equal(found.ancestors[0], NODE, 'the process that spawned it is the first ancestor');
    assert.ok(found.cmdlinePaths.includes(script), `the script is on the command line: ${found.cmdlinePaths.join(', ')}`);
  });

  it('reports every holder of a socket shared with an exec()d child, so that each is judged (B14)', async (t) => {
    const client = await holdClient(t, server, bashHolding(BASH, server.port, 'sleep 60 & '));
    const result = await source.lookup(lookupFor(client.socket));
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual([result.identity.pid, result.identity.exe], [client.child.pid, BASH]);
    assert.deepEqual(
      result.holders.map((h) => [h.exe, h.ancestors[0]]),
      [[realExe('/usr/bin/sleep'), BASH]],
    );
  });

  it('accepts a socket shared with a fork() that runs the same program: policy could not tell them apart', async (t) => {
    const forked = `import os, socket, sys\ns = socket.create_connection(('127.0.0.1', ${server.port}))\nif os.fork() == 0:\n  sys.stdin.read(); os._exit(0)\nprint('ready', flush=True)\nsys.stdin.read()\n`;
    const client = await holdClient(t, server, ['/usr/bin/python3', '-c', forked]);
    const found = identity(await source.lookup(lookupFor(client.socket)));
    assert.equal(found.pid, client.child.pid, 'the lowest pid of the owners is reported');
    assert.equal(found.exe, PYTHON);
  });

  it('reports a replaced executable by its path, without " (deleted)" (B13)', async (t) => {
    const copy = join(dir, 'bash-copy');
    await copyFile(BASH, copy);
    await chmod(copy, 0o755);
    const client = await holdClient(t, server, bashHolding(copy, server.port));
    await unlink(copy);
    await copyFile(BASH, copy);
    const found = identity(await source.lookup(lookupFor(client.socket)));
    assert.equal(found.exe, copy);
    await unlink(copy);
    assert.equal(identity(await source.lookup(lookupFor(client.socket))).exe, copy, 'deleted and not replaced: the suffix comes off too');
  });

  it('keeps a live executable whose name really ends in " (deleted)" (B17)', async (t) => {
    const odd = join(dir, 'tool (deleted)');
    await copyFile(BASH, odd);
    await chmod(odd, 0o755);
    const client = await holdClient(t, server, bashHolding(odd, server.port));
    assert.equal(identity(await source.lookup(lookupFor(client.socket))).exe, odd);
  });

  it('resolves policy paths through symlinks in the owner\'s root, and leaves the others out', async (t) => {
    const links = join(dir, 'links');
    await mkdir(links);
    await symlink(BASH, join(links, 'abs'));
    await symlink('abs', join(links, 'rel'));
    await symlink('../links/rel', join(links, 'chain'));
    await symlink('loop-b', join(links, 'loop-a'));
    await symlink('loop-a', join(links, 'loop-b'));
    const client = await holdClient(t, server, bashHolding(BASH, server.port));
    const paths = ['abs', 'rel', 'chain', 'loop-a', 'missing'].map((n) => join(links, n));
    const found = identity(await source.lookup(lookupFor(client.socket, [...paths, BASH])));
    assert.deepEqual(new Map(found.resolved), new Map(paths.slice(0, 3).map((p) => [p, BASH])));
  });

  it('fails closed with a code: no socket, no /proc, no visible owner', async (t) => {
    const client = await holdClient(t, server, bashHolding(BASH, server.port));
    const gone = lookupFor(client.socket);
    const missing = await source.lookup({ ...gone, client: { ip: '127.0.0.1', port: 1 } });
    assert.ok(!missing.ok && missing.failure === 'socket-not-found', JSON.stringify(missing));
    const empty = await mkdtemp(join(dir, 'empty-proc-'));
    const blind = testProcSource({ procRoot: empty });
    await blind.start();
    assert.match(blind.problem() ?? '', /net\/tcp/);
    const none = await blind.lookup(gone);
    await blind.close();
    assert.ok(!none.ok && none.failure === 'proc-unavailable', JSON.stringify(none));
    // The socket tables of this network namespace, but none of its processes: another PID namespace.
    const netOnly = await mkdtemp(join(dir, 'net-only-'));
    await symlink('/proc/self/net', join(netOnly, 'net'));
    const other = createProcIdentitySource({ now: Date.now, procRoot: netOnly, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS });
    const unseen = await other.lookup(gone);
    await other.close();
    assert.ok(!unseen.ok && unseen.failure === 'owner-not-found', JSON.stringify(unseen));
  });

  it('reads the socket tables once for a batch of lookups waiting together', async (t) => {
    let tableReads = 0;
    const counting: ProcFs = {
      ...SYNC_PROC_FS,
      readText(path, maxBytes) {
        if (path.endsWith('/net/tcp')) tableReads++;
        return SYNC_PROC_FS.readText(path, maxBytes);
      },
    };
    const counted = createProcIdentitySource({ now: Date.now, fs: counting, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS });
    t.after(() => counted.close());
    const clients = [];
    for (let i = 0; i < 8; i++) clients.push(await holdClient(t, server, bashHolding(BASH, server.port)));
    const results = await Promise.all(clients.map((c) => counted.lookup(lookupFor(c.socket))));
    assert.deepEqual(
      results.map((r) => (r.ok ? r.identity.pid : r.failure)),
      clients.map((c) => c.child.pid),
    );
    assert.equal(tableReads, 1, 'one read of /proc/net/tcp served all eight');
  });
});
