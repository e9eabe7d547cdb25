// Issue 29 (what boundary tells users is what it does): the runtime, `policy check`, `policy explain` and /v1/explain
// gave four answers for one question. 169.254.169.254 got a 403 proposing a policy entry, check accepted that entry,
// explain said ALLOW, and the runtime blocked it forever; explain ignored binaries where run required them. One table of
// cases now goes through all four (curl through a real boundary, the check and explain CLIs, /v1/explain) and must agree.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { policyCommand } from '../../src/app/cli/policy.js';
import type { CliIo } from '../../src/app/cli/io.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = 10;

interface Case {
  readonly name: string;
  /** The URL curl asks for (forward proxy), or host:port for a CONNECT. */
  readonly target: (ports: Ports) => string;
  readonly connect?: boolean;
  readonly verdict: 'allow' | 'deny';
  readonly reason: string;
  /** For an always-blocked destination: the check and address class every answer names. */
  readonly blocked?: { readonly check: string; readonly addressClass: string };
  /** Whether the denial's next_steps propose a policy entry (and explain a suggestion). */
  readonly proposesEntry?: boolean;
}

interface Ports {
  readonly origin: number;
  readonly admin: number;
}

const CASES: readonly Case[] = [
  { name: 'metadata address with an entry', target: () => 'http://169.254.169.254/latest/meta-data/', verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'always-blocked', addressClass: 'metadata' } },
  { name: 'metadata address on a port no entry lists', target: () => 'http://169.254.169.254:8080/', verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'always-blocked', addressClass: 'metadata' } },
  { name: 'metadata address, CONNECT', target: () => '169.254.169.254:443', connect: true, verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'always-blocked', addressClass: 'metadata' } },
  { name: 'link-local address', target: () => 'http://169.254.1.1/', verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'always-blocked', addressClass: 'link-local' } },
  { name: 'the admin port on localhost', target: (p) => `http://localhost:${p.admin}/v1/denials`, verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'local-name', addressClass: 'local-name' } },
  { name: "the admin port on 127.0.0.1 (boundary's own listener)", target: (p) => `http://127.0.0.1:${p.admin}/v1/denials`, verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'self-address', addressClass: 'loopback' } },
  { name: 'a metadata name', target: () => 'http://metadata.google.internal/computeMetadata/v1/', verdict: 'deny', reason: 'ssrf-denied', blocked: { check: 'metadata-name', addressClass: 'metadata-name' } },
  { name: 'an entry listing any binary', target: (p) => `http://api.example.test:${p.origin}/v1/ok`, verdict: 'allow', reason: 'endpoint-allowed' },
  { name: 'an entry without binaries', target: (p) => `http://nobins.example.test:${p.origin}/`, verdict: 'deny', reason: 'binary-not-allowed', proposesEntry: true },
  { name: 'an entry with an empty binaries list', target: (p) => `http://emptybins.example.test:${p.origin}/`, verdict: 'deny', reason: 'binary-not-allowed', proposesEntry: true },
  { name: 'a name no entry lists', target: (p) => `http://other.example.test:${p.origin}/`, verdict: 'deny', reason: 'no-endpoint-matched', proposesEntry: true },
];

/** Every always-blocked destination of the table has an entry (the port no entry lists aside): check must name each. */
const policyFor = (p: Ports): string => `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${p.origin} }
    binaries: [{ path: "/**" }]
  nobins:
    endpoints:
      - { host: nobins.example.test, port: ${p.origin} }
  emptybins:
    endpoints:
      - { host: emptybins.example.test, port: ${p.origin} }
    binaries: []
  metadata:
    endpoints:
      - { host: 169.254.169.254, ports: [80, 443] }   # always blocked: refused before any dial
      - { host: 169.254.1.1, port: 80 }
      - { host: metadata.google.internal, port: 80 }
    binaries: [{ path: "/**" }]
  admin:
    endpoints:
      - { host: localhost, port: ${p.admin} }
      - { host: 127.0.0.1, port: ${p.admin} }
    binaries: [{ path: "/**" }]
`;

/** The verdict, reason code and next steps curl saw, with the event the boundary wrote for it. */
async function throughBoundary(b: RunningBoundary, c: Case, ports: Ports): Promise<{ verdict: string; reason: string; body: string; event: OcsfEvent | undefined }> {
  const target = c.target(ports);
  const before = b.log.events().length;
  const args = c.connect
    ? ['-sS', '--max-time', String(CURL_TIMEOUT_S), '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '--proxytunnel', '-w', '\n%{http_connect}', `http://${target}/`]
    : ['-sS', '--max-time', String(CURL_TIMEOUT_S), '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-w', '\n%{http_code}', target];
  const out = await run('curl', args).then(
    (r) => r.stdout,
    (err: { stdout?: string }) => err.stdout ?? '',
  );
  const cut = out.lastIndexOf('\n');
  const status = Number(out.slice(cut + 1));
  const body = out.slice(0, Math.max(0, cut));
  if (status >= 200 && status < 300) return { verdict: 'allow', reason: 'endpoint-allowed', body, event: undefined };
  const event = await b.log.waitFor((e) => b.log.events().indexOf(e) >= before && e.action === 'Denied');
  return { verdict: 'deny', reason: String(event.unmapped.reason_code), body, event };
}

async function cli(cwd: string, argv: readonly string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const io: CliIo = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: () => true },
    env: {},
    cwd,
    signal: new AbortController().signal,
    now: () => 0,
  };
  return { code: await policyCommand([...argv], io), stdout };
}

function getJson(port: number, path: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve(JSON.parse(text) as Record<string, unknown>));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('issue 29: one truth: the runtime, policy check, policy explain and /v1/explain agree', () => {
  let origin: Origin;
  let b: RunningBoundary;
  let ports: Ports;
  /** The run's switches, spelt as `boundary run` takes them: check and explain answer for this run. */
  let runFlags: string[];
  before(async () => {
    origin = await httpOrigin();
    b = await startBoundary({ policy: policyFor({ origin: origin.port, admin: 1 }), names: { 'nobins.example.test': ['127.0.0.1'], 'emptybins.example.test': ['127.0.0.1'] } });
    ports = { origin: origin.port, admin: b.adminPort };
    const loaded = b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped?.policy_generation === 2);
    await b.writePolicy(policyFor(ports));
    await loaded;
    runFlags = ['--unsafe-allow-loopback-upstream', '--proxy-listen', `127.0.0.1:${b.proxyPort}`, '--admin-listen', `127.0.0.1:${b.adminPort}`];
  });
  after(async () => {
    await b?.close();
    await origin?.close();
  });

  for (const c of CASES) {
    it(c.name, async () => {
      const target = c.target(ports);
      const seen = await throughBoundary(b, c, ports);
      assert.equal(seen.verdict, c.verdict, `runtime verdict for ${target}`);
      assert.equal(seen.reason, c.reason, `runtime reason for ${target}`);

      const explained = await cli(b.dir, ['explain', b.policyPath, target, '--json', ...runFlags]);
      const cliJson = JSON.parse(explained.stdout) as Record<string, unknown>;
      const api = await getJson(b.adminPort, `/v1/explain?url=${encodeURIComponent(target)}`);
      for (const [who, answer] of [['policy explain', cliJson], ['/v1/explain', api]] as const) {
        assert.equal(answer.verdict, c.verdict, `${who} verdict for ${target}`);
        assert.equal(answer.reason, c.reason, `${who} reason for ${target}`);
        assert.equal(answer.check, c.blocked?.check, `${who} check for ${target}`);
        assert.equal(answer.addressClass, c.blocked?.addressClass, `${who} address class for ${target}`);
        assert.equal(typeof answer.suggestion === 'string', c.proposesEntry === true, `${who} suggests an entry for ${target} only where one would work`);
      }
      assert.equal(explained.code, c.verdict === 'deny' ? 1 : 0);

      if (c.verdict === 'deny' && !c.connect) {
        const body = JSON.parse(seen.body) as { check?: string; next_steps?: { kind: string; message: string }[] };
        const kinds = (body.next_steps ?? []).map((s) => s.kind);
        assert.equal(kinds.includes('add_policy_entry'), c.proposesEntry === true, `next_steps of ${target}: ${kinds.join(', ')}`);
        if (c.blocked !== undefined) {
          assert.deepEqual(kinds, ['not_allowable'], 'an always-blocked destination: the refusal is permanent');
          assert.equal(body.check, c.blocked.check);
        }
      }
      if (c.blocked !== undefined) assert.equal(seen.event?.unmapped.check, c.blocked.check, "the event names the check");
    });
  }

  it('policy check names every always-blocked entry with a coded warning, and no other', async () => {
    const checked = await cli(b.dir, ['check', b.policyPath, '--json', ...runFlags]);
    assert.equal(checked.code, 0);
    const [report] = JSON.parse(checked.stdout) as { warnings: { code: string; path: string; line: number | null; column: number | null; message: string }[] }[];
    const warnings = (report?.warnings ?? []).filter((w) => w.code === 'POLICY_WARN_ALWAYS_BLOCKED');
    // Each warning points at its endpoint's host value in the file, as load problems do.
    const lines = (await readFile(b.policyPath, 'utf8')).split('\n');
    for (const w of warnings) {
      assert.ok(w.line !== null && w.column !== null, `${w.path} is located`);
      const at = (lines[w.line - 1] ?? '').slice(w.column - 1);
      assert.match(at, /^(169\.254|metadata\.google|localhost|127\.0\.0\.1)/, `${w.path} at ${w.line}:${w.column}: ${at}`);
    }
    const blocked = warnings.map((w) => w.path);
    assert.deepEqual(blocked.sort(), [
      'network_policies.admin.endpoints[0].host',
      'network_policies.admin.endpoints[1].host',
      'network_policies.metadata.endpoints[0].host',
      'network_policies.metadata.endpoints[1].host',
      'network_policies.metadata.endpoints[2].host',
    ]);
  });

  it("explain checks binaries as run does unless told endpoint-only", async () => {
    const target = `http://nobins.example.test:${ports.origin}/`;
    const endpointOnly = await cli(b.dir, ['explain', b.policyPath, target, '--json', '--binary-identity', 'endpoint-only', ...runFlags]);
    assert.equal((JSON.parse(endpointOnly.stdout) as { verdict: string }).verdict, 'allow');
    const named = await cli(b.dir, ['explain', b.policyPath, target, '--json', '--binary', '/usr/bin/curl', ...runFlags]);
    assert.equal((JSON.parse(named.stdout) as { reason: string }).reason, 'binary-not-allowed');
  });
});
