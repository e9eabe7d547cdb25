// Attached mode from the outside: the boundary binary attaching to the reference supervisor and exiting 0 on
// SIGTERM, and how a supervisor name that does not resolve is reported (NET:FAIL, log line, /readyz).
// Loopback only; no sleeps.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { before, describe, it } from 'node:test';
import { withDnsPort } from '../../src/app/cli/run.js';
import type { ControlLookup } from '../../src/control/dial.js';
import { httpGet, restPolicy, startAttached, writeTlsDir } from '../harness/attached-boundary.js';
import { TEST_SYNTHETIC_CIDR } from '../harness/boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor } from '../harness/control.js';
import { withStateDir } from '../harness/state-dir.js';
import { stopChild } from '../harness/netns-pair.js';

describe('the boundary binary in attached mode', () => {
  it('attaches, logs its listeners, turns ready and exits 0 on SIGTERM', async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(8080, '/**') } });
    t.after(() => sup.close());
    const tlsDir = await writeTlsDir(pki);
    t.after(() => rm(tlsDir, { recursive: true, force: true }));
    // boundary writes its state there: removed after the hook that stops it.
    await withStateDir(t, 'boundary-state-', async (stateDir) => {
      const root = join(import.meta.dirname, '../..');
      const child: ChildProcess = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          'src/app/main.ts',
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
      t.after(() => stopChild(child));
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
