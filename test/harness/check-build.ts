// Does a build of boundary run? Starts `node <dist>/app/main.js run` on loopback and drives what a bundle could break:
// /healthz and /readyz, an allowed and a denied forward request (curl), binary identity in required mode (the /proc
// worker), an external middleware service (proto/ read at run time) denying a request, a reload of a policy large
// enough for the parse worker, and --version (package.json). Prints one line per check; exits 1 on the first failure.
//   node --import tsx test/harness/check-build.ts bench/out/bundle/image/dist

import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startMiddlewareService } from './middleware-service.js';

const HOST = 'origin.bench.test';
// Named by its path, so each request needs a /proc lookup (the identity worker); "/**" would need none.
const CURL = realpathSync(execFileSync('sh', ['-c', 'command -v curl'], { encoding: 'utf8' }).trim());
const READY_TIMEOUT_MS = 30_000;
const RELOAD_TIMEOUT_MS = 20_000;
// Above OFF_THREAD_MIN_BYTES (src/policy/parse-off-thread.ts), so a reload is parsed on the worker.
const PADDING_BYTES = 20 * 1024;

const dist = resolve(process.argv[2] ?? 'dist');
const entry = join(dist, 'app', 'main.js');
const work = mkdtempSync(join(tmpdir(), 'boundary-bundle-check-'));
const delay = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
const ok = (what: string): void => void process.stdout.write(`ok  ${what}\n`);

function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => done(port));
    });
  });
}

/** curl through the forward proxy (async: the origin and the middleware service answer from this process). */
async function viaProxy(proxy: number, url: string): Promise<{ status: number; body: string }> {
  const out = await new Promise<string>((done, fail) =>
    execFile('curl', ['-s', '--max-time', '10', '-x', `http://127.0.0.1:${proxy}`, '-w', '\n%{http_code}', url], (err, stdout) => (err ? fail(err) : done(stdout))),
  );
  const cut = out.lastIndexOf('\n');
  return { status: Number(out.slice(cut + 1)), body: out.slice(0, cut) };
}

const policy = (port: number, extra: string): string => `version: 1
# ${'x'.repeat(PADDING_BYTES)}
network_policies:
  origin:
    name: origin
    endpoints:
      - { host: ${HOST}, port: ${port} }
${extra}    binaries: [{ path: "${CURL}" }]
network_middlewares:
  dlp:
    middleware: acme/dlp
    config: { level: strict }
    endpoints: { include: [${HOST}] }
`;

const origin = createServer((req, res) => res.end(`origin saw ${req.url}`));
await new Promise<void>((done) => origin.listen(0, '127.0.0.1', done));
const originPort = (origin.address() as net.AddressInfo).port;
const service = await startMiddlewareService();
const [proxy, admin, dns, closed] = [await freePort(), await freePort(), await freePort(), await freePort()];
writeFileSync(join(work, 'hosts'), `127.0.0.1 ${HOST}\n`);
writeFileSync(join(work, 'middleware.yaml'), `services:\n  - name: acme/dlp\n    grpc_endpoint: http://127.0.0.1:${service.port}\n    allow_insecure_transport: true\n    max_payload_bytes: 65536\n    timeout: 1s\n`);
writeFileSync(join(work, 'policy.yaml'), policy(originPort, ''));
const child = spawn(process.execPath, [entry, 'run', '--policy', join(work, 'policy.yaml'), '--proxy-listen', `127.0.0.1:${proxy}`,
  '--admin-listen', `127.0.0.1:${admin}`, '--dns-listen', `127.0.0.1:${dns}`, '--hosts', join(work, 'hosts'), '--upstream-dns', `127.0.0.1:${closed}`,
  '--unsafe-allow-loopback-upstream', '--state-dir', join(work, 'state'), '--log-format', 'json', '--middleware-config', join(work, 'middleware.yaml'),
  '--binary-identity', 'required'], { stdio: ['ignore', openSync(join(work, 'out.log'), 'w'), openSync(join(work, 'err.log'), 'w')] });

const reloads = async (): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
  return Number(/^boundary_policy_reloads_total\{[^}]*source="file"[^}]*outcome="loaded"[^}]*\} (\S+)/m.exec(text)?.[1] ?? 0);
};

try {
  assert.equal(execFileSync(process.execPath, [entry, '--version'], { encoding: 'utf8' }).trim(), JSON.parse(readFileSync('package.json', 'utf8')).version);
  ok('--version reads package.json');
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    assert.equal(child.exitCode, null, `boundary exited: ${readFileSync(join(work, 'err.log'), 'utf8').slice(-600)}`);
    const up = await fetch(`http://127.0.0.1:${admin}/healthz`).then((r) => r.ok, () => false);
    if (up) break;
    assert.ok(Date.now() < deadline, 'boundary not healthy in time');
    await delay(100);
  }
  ok('/healthz 200');
  assert.equal((await fetch(`http://127.0.0.1:${admin}/readyz`)).status, 200);
  ok('/readyz 200');
  const allowed = await viaProxy(proxy, `http://${HOST}:${originPort}/allowed`);
  assert.deepEqual(allowed, { status: 200, body: 'origin saw /allowed' });
  assert.equal(service.requests.length, 1, 'the middleware service saw the request');
  ok('allowed request 200 (identity worker resolved curl; middleware service called over proto/)');
  const denied = await viaProxy(proxy, `http://${HOST}:${closed}/denied`);
  assert.equal(denied.status, 403);
  ok('request to a port outside the policy 403');
  service.behaviour.evaluate = () => ({ decision: 'DECISION_DENY', reason_code: 'pii_found', reason: 'no' });
  const byService = await viaProxy(proxy, `http://${HOST}:${originPort}/by-service`);
  assert.equal(byService.status, 403);
  assert.equal((JSON.parse(byService.body) as { reason_code?: string }).reason_code, 'pii_found');
  ok('request denied by the middleware service 403 pii_found');
  service.behaviour.evaluate = () => ({ decision: 'DECISION_ALLOW' });
  const before = await reloads();
  writeFileSync(join(work, 'policy.yaml'), policy(originPort, `      - { host: other.bench.test, port: ${originPort} }\n`));
  const until = Date.now() + RELOAD_TIMEOUT_MS;
  while ((await reloads()) <= before) {
    assert.equal(child.exitCode, null, 'boundary exited during the reload');
    assert.ok(Date.now() < until, `no reload in time: ${readFileSync(join(work, 'err.log'), 'utf8').slice(-600)}`);
    await delay(200);
  }
  assert.equal((await viaProxy(proxy, `http://${HOST}:${originPort}/after-reload`)).status, 200);
  ok(`reload of a ${PADDING_BYTES >> 10} KiB policy (parse worker) loaded; allowed request after it 200`);
} finally {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGTERM');
    await exited;
  }
  await service.close();
  origin.close();
  rmSync(work, { recursive: true, force: true });
}
