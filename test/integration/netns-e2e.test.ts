// End to end in a network namespace this test creates (root only): the real 198.18.0.0/15 range routed to
// lo by `boundary init-netns`, boundary's policy DNS on 127.0.0.1:53 in /etc/netns/<ns>/resolv.conf, and
// plain `getent` and `curl` (no proxy settings) reaching a TLS origin inside the namespace through capture.
// Neither the fence nor the DNS redirect is installed (--no-fence --no-dns-redirect): boundary runs as root
// here, so an owner match on its uid would also exempt the workload's root processes; both have their own
// tests (netns-fence, netns-dns-redirect). Traffic stays in the ns.

import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { cidrContains, parseCidr, parseIp } from '../../src/net/ip.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { makeTestPki } from '../harness/certs.js';
import { type BoundaryCli, isDnsReady, MAIN, PROJECT_ROOT, spawnBoundaryCli } from '../harness/cli-boundary.js';

const run = promisify(execFile);
const NS = `bnd-${process.pid}`;
const NETNS_ETC = join('/etc/netns', NS);
const CLEAN_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
const ORIGIN_READY_TIMEOUT_MS = 20_000;

// An HTTPS origin for inside the namespace: prints its port, answers every request with its path.
const ORIGIN_SCRIPT = `
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';
const [cert, key] = process.argv.slice(2);
const server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('origin saw ' + req.url);
});
server.listen(0, '127.0.0.1', () => console.log('PORT ' + server.address().port));
process.on('SIGTERM', () => process.exit(0));
`;

async function skipReason(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (creates a network namespace)';
  try {
    await run('ip', ['netns', 'list']);
  } catch (err) {
    return `ip netns is unavailable: ${(err as Error).message}`;
  }
  return undefined;
}

function inNs(...command: string[]): Promise<{ stdout: string; stderr: string }> {
  return run('ip', ['netns', 'exec', NS, ...command], { env: CLEAN_ENV, cwd: PROJECT_ROOT });
}

function startOrigin(t: TestContext, certFile: string, keyFile: string, scriptFile: string): Promise<number> {
  const child: ChildProcess = spawn('ip', ['netns', 'exec', NS, process.execPath, scriptFile, certFile, keyFile], { stdio: ['ignore', 'pipe', 'pipe'], env: CLEAN_ENV });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`origin did not start: ${out}`)), ORIGIN_READY_TIMEOUT_MS);
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      out += chunk;
      const match = /PORT (\d+)/.exec(out);
      if (match !== null) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`origin exited with ${code}: ${out}`));
    });
  });
}

it('resolves and connects through boundary inside a network namespace with no proxy settings', async (t) => {
  const reason = await skipReason();
  if (reason !== undefined) {
    t.skip(`netns end-to-end test skipped: ${reason}`);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'boundary-netns-'));
  let boundary: BoundaryCli | undefined;
  // Registered first, so it runs first (node:test runs hooks in order) and always: boundary, which writes its state
  // in dir until it has stopped, then the namespace, its /etc overlay and the temp files.
  t.after(async () => {
    await boundary?.stop();
    await run('ip', ['netns', 'del', NS]).catch(() => undefined);
    await rm(NETNS_ETC, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  });
  await run('ip', ['netns', 'add', NS]);
  await run('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
  // The pod init step itself (route only).
  const init = await inNs(process.execPath, '--import', 'tsx', MAIN, 'init-netns', '--synthetic-cidr', '198.18.0.0/15', '--no-fence', '--no-dns-redirect');
  assert.match(init.stdout, /ip route replace local 198\.18\.0\.0\/15 dev lo/);
  assert.match((await inNs('ip', 'route', 'show', 'table', 'local')).stdout, /local 198\.18\.0\.0\/15 dev lo/);
  await mkdir(NETNS_ETC, { recursive: true });
  await writeFile(join(NETNS_ETC, 'resolv.conf'), 'nameserver 127.0.0.1\noptions attempts:1 timeout:3\n');
  await writeFile(join(NETNS_ETC, 'hosts'), '127.0.0.1 localhost\n');

  const pki = await makeTestPki();
  const leaf = await issueCertificate({ ca: pki.ca, kind: 'server', names: ['api.example.test'], now: Date.now });
  const files = {
    cert: join(dir, 'origin.pem'),
    key: join(dir, 'origin.key'),
    ca: join(dir, 'test-ca.pem'),
    script: join(dir, 'origin.mjs'),
    policy: join(dir, 'policy.yaml'),
    hosts: join(dir, 'boundary-hosts'),
    state: join(dir, 'state'),
  };
  await Promise.all([
    writeFile(files.cert, leaf.certPem),
    writeFile(files.key, leaf.keyPem),
    writeFile(files.ca, pki.ca.certPem),
    writeFile(files.script, ORIGIN_SCRIPT),
    // boundary's own trusted view: the real address of the name, inside the namespace.
    writeFile(files.hosts, '127.0.0.1 api.example.test\n'),
  ]);
  const originPort = await startOrigin(t, files.cert, files.key, files.script);
  await writeFile(
    files.policy,
    `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${originPort}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
    binaries: [{ path: "/**" }]
`,
  );
  boundary = spawnBoundaryCli(
    [
      '--policy', files.policy,
      '--dns-listen', '127.0.0.1:53',
      '--proxy-listen', '127.0.0.1:3128',
      '--admin-listen', '127.0.0.1:9901',
      '--synthetic-cidr', '198.18.0.0/15',
      '--hosts', files.hosts,
      // Nothing listens there: every answer comes from --hosts.
      '--upstream-dns', '127.0.0.1:5399',
      '--unsafe-allow-loopback-upstream',
      '--upstream-ca', files.ca,
      '--state-dir', files.state,
    ],
    { prefix: ['ip', 'netns', 'exec', NS] },
  );
  await boundary.waitFor(isDnsReady);

  const getent = await inNs('getent', 'hosts', 'api.example.test');
  const synthetic = getent.stdout.trim().split(/\s+/)[0] ?? '';
  assert.ok(cidrContains(parseCidr('198.18.0.0/15')!, parseIp(synthetic)!), `getent answered ${getent.stdout}`);

  const boundaryCa = join(files.state, 'ca.pem');
  assert.match(await readFile(boundaryCa, 'utf8'), /BEGIN CERTIFICATE/);
  const curl = (path: string) =>
    inNs('curl', '-sS', '--max-time', '10', '--noproxy', '*', '--cacert', boundaryCa, '-w', '\n%{http_code}', `https://api.example.test:${originPort}${path}`);
  const allowed = await curl('/allowed/netns');
  assert.equal(allowed.stdout, 'origin saw /allowed/netns\n200');
  const denied = await curl('/secret');
  assert.match(denied.stdout, /policy_denied[\s\S]*\n403$/);
});
