import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { EPOCH_FILE_NAME } from '../../src/dns/epoch.js';
import { cidrContains, parseCidr, parseIp } from '../../src/net/ip.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { dnsAddressOf, isDnsReady, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { type EchoServer, echoServer } from '../harness/servers.js';

const run = promisify(execFile);

async function dig(port: number, ...args: string[]): Promise<{ status: string; answers: string[] }> {
  const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(port), '+tries=1', '+time=3', '+noall', '+comments', '+answer', ...args]);
  const status = /status: ([A-Z]+)/.exec(stdout)?.[1] ?? 'none';
  const answers = stdout
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith(';'))
    .map((l) => l.split(/\s+/).at(-1) ?? '');
  return { status, answers };
}

function policyFor(port: number): string {
  return `version: 1
network_policies:
  echo:
    endpoints:
      - host: echo.example.test
        port: ${port}
        protocol: tcp
    binaries: [{ path: "/**" }]
`;
}

function connectOutcome(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-dns-e2e-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('policy DNS served by boundary run (createBoundary)', () => {
  let b: RunningBoundary;
  let echo: EchoServer;

  before(async () => {
    echo = await echoServer();
    b = await startBoundary({ names: { 'echo.example.test': ['127.0.0.1'] }, policy: policyFor(echo.port) });
  });

  after(async () => {
    await b?.close();
    await echo?.close();
  });

  it('answers an allowed name with one address of the synthetic window, over UDP and TCP', async () => {
    const window = parseCidr(b.boundary.transparent.pool()?.windows[4] ?? '')!;
    const udp = await dig(b.dnsPort!, 'echo.example.test', 'A');
    assert.equal(udp.status, 'NOERROR');
    assert.equal(udp.answers.length, 1);
    assert.ok(cidrContains(window, parseIp(udp.answers[0]!)!), `${udp.answers[0]} in ${b.boundary.transparent.pool()?.windows[4]}`);
    const tcp = await dig(b.dnsPort!, '+tcp', 'ECHO.example.test', 'A');
    assert.deepEqual(tcp.answers, udp.answers);
  });

  it('refuses a name no endpoint covers, asking the resolver nothing', async () => {
    const calls = b.resolver.calls.length;
    assert.equal((await dig(b.dnsPort!, 'denied.example.test', 'A')).status, 'NXDOMAIN');
    assert.equal(b.resolver.calls.length, calls);
  });

  it('resolves through the proxy resolver and emits DNS events through the audit sink', async () => {
    await dig(b.dnsPort!, 'echo.example.test', 'A');
    assert.ok(b.resolver.calls.some((c) => c.name === 'echo.example.test'));
    const query = await b.log.waitFor((e) => e.class_uid === 4003 && e.unmapped?.rcode === 'NOERROR');
    assert.ok(Array.isArray(query.unmapped?.answers));
  });

  it('counts queries on /metrics by rcode and outcome only', async () => {
    await dig(b.dnsPort!, 'echo.example.test', 'A');
    await dig(b.dnsPort!, 'refused.example.test', 'A');
    const text = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    assert.match(text, /boundary_dns_queries_total\{rcode="NOERROR",outcome="mapped"\} [1-9]/);
    assert.match(text, /boundary_dns_queries_total\{rcode="NXDOMAIN",outcome="refused"\} [1-9]/);
    assert.doesNotMatch(text, /boundary_dns_[a-z_]+\{[^}]*example\.test/);
  });
});

describe('policy DNS before a policy and with a corrupt epoch', () => {
  it('refuses (NXDOMAIN) every name before the first policy is effective', async (t) => {
    const b = await startBoundary();
    t.after(() => b.close());
    assert.equal((await dig(b.dnsPort!, 'api.example.test', 'A')).status, 'NXDOMAIN');
    assert.equal(b.resolver.calls.length, 0);
  });

  it('fails closed on a corrupt epoch file: no DNS, no capture, /readyz 503 with the reason', async (t) => {
    const dir = await tempDir(t);
    const stateDir = join(dir, 'state');
    await mkdir(stateDir);
    await writeFile(join(stateDir, EPOCH_FILE_NAME), 'not-a-number\n');
    const b = await startBoundary({ stateDir, policy: policyFor(9) });
    t.after(() => b.close());
    assert.equal(b.dnsPort, undefined);
    assert.equal(b.boundary.transparent.pool(), undefined);
    assert.deepEqual(b.boundary.transparent.listening(), []);
    const response = await fetch(`http://127.0.0.1:${b.adminPort}/readyz`);
    assert.equal(response.status, 503);
    const body = (await response.json()) as { reasons: string[] };
    assert.ok(body.reasons.some((r) => r.startsWith('dns-epoch-invalid')), JSON.stringify(body));
    await b.log.waitFor((e) => e.status_detail === 'policy_dns_epoch_invalid');
  });
});

describe('the real CLI', () => {
  it('serves policy DNS on --dns-listen from --hosts, and a restart moves to the next window (DN-28)', async (t) => {
    // dir holds boundary's --state-dir: removed after the hooks that stop both runs.
    await withStateDir(t, 'boundary-dns-e2e-', async (dir) => {
      const echo = await echoServer();
      t.after(() => echo.close());
      await writeFile(join(dir, 'policy.yaml'), policyFor(echo.port));
      await writeFile(join(dir, 'hosts'), '127.0.0.1 echo.example.test\n');
      const args = [
        '--policy', join(dir, 'policy.yaml'),
        '--proxy-listen', '127.0.0.1:0',
        '--admin-listen', '127.0.0.1:0',
        '--dns-listen', '127.0.0.1:0',
        '--synthetic-cidr', '127.78.0.0/16',
        '--hosts', join(dir, 'hosts'),
        // Never asked: the hosts file answers; port 9 (discard) on loopback if it ever were.
        '--upstream-dns', '127.0.0.1:9',
        '--unsafe-allow-loopback-upstream',
        '--state-dir', join(dir, 'state'),
      ];
      const first = spawnBoundaryCli(args);
      t.after(() => first.stop());
      const dns1 = dnsAddressOf(await first.waitFor(isDnsReady));
      const answer1 = await dig(dns1.port, 'echo.example.test', 'A');
      assert.equal(answer1.status, 'NOERROR', first.stderr());
      const old = answer1.answers[0]!;
      assert.ok(cidrContains(parseCidr('127.78.0.0/20')!, parseIp(old)!), `${old} is in epoch 0's window`);
      assert.equal(await connectOutcome(old, echo.port), 'connected');
      await first.stop();

      const second = spawnBoundaryCli(args);
      t.after(() => second.stop());
      const dns2 = dnsAddressOf(await second.waitFor(isDnsReady));
      const answer2 = await dig(dns2.port, 'echo.example.test', 'A');
      assert.ok(cidrContains(parseCidr('127.78.16.0/20')!, parseIp(answer2.answers[0]!)!), `${answer2.answers[0]} is in epoch 1's window`);
      // The address cached from the previous run is not captured any more.
      assert.equal(await connectOutcome(old, echo.port), 'ECONNREFUSED');
    });
  });
});
