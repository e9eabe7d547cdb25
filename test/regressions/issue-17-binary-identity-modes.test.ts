// Issue 17 (binary identity): what happens when a process cannot be identified, and the operator's choices
// (docs/identity.md#modes): a source that cannot see the process fails closed with a coded reason and /readyz
// says why; --binary-identity endpoint-only allows and says so; the identity server over --identity-socket
// decides like /proc read in-process, and its absence fails closed; explain replays a denial with its binary.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { policyCommand } from '../../src/app/cli/policy.js';
import { createIdentityServer } from '../../src/identity/server.js';
import { createLogger } from '../../src/telemetry/logger.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { curlGet, pythonGet, type Route, writePythonClient } from '../harness/identity-clients.js';
import { realExe, testProcSource } from '../harness/identity-processes.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const CURL = realExe('/usr/bin/curl');
const PYTHON = realExe('/usr/bin/python3');

function policyText(port: number): string {
  return `version: 1
network_policies:
  python_only:
    endpoints: [{ host: api.example.test, port: ${port} }]
    binaries: [{ path: ${PYTHON} }]
  anyone:
    endpoints: [{ host: other.example.test, port: ${port} }]
    binaries: [{ path: "/**" }]
`;
}

async function readyz(b: RunningBoundary): Promise<{ ready: boolean; reasons: string[] }> {
  return (await fetch(`http://127.0.0.1:${b.adminPort}/readyz`)).json() as Promise<{ ready: boolean; reasons: string[] }>;
}

function lastDecision(b: RunningBoundary, host: string): OcsfEvent | undefined {
  return b.log.decisions().filter((e) => e.dst_endpoint?.domain === host).at(-1);
}

describe('issue 17: binary identity modes and failures', () => {
  let dir: string;
  let origin: Origin;
  let script: string;
  const running: RunningBoundary[] = [];
  const start = async (options: Parameters<typeof startBoundary>[0]) => {
    const b = await startBoundary({ policy: policyText(origin.port), ...options });
    running.push(b);
    return b;
  };
  const forward = (b: RunningBoundary): Route => ({ via: 'forward', proxyPort: b.proxyPort });
  const api = () => `http://api.example.test:${origin.port}/x`;
  const other = () => `http://other.example.test:${origin.port}/x`;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-issue17-modes-'));
    origin = await httpOrigin();
    script = await writePythonClient(dir);
  });
  after(async () => {
    for (const b of running) await b.close();
    await origin?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('fails closed with identity-unavailable when the source cannot see any process, and /readyz says why', async () => {
    const emptyProc = await mkdtemp(join(dir, 'proc-'));
    const b = await start({ identity: testProcSource({ procRoot: emptyProc }) });
    const denied = await pythonGet(script, forward(b), api());
    assert.equal(denied.status, '403');
    assert.equal(JSON.parse(denied.body).reason, 'identity-unavailable');
    const event = lastDecision(b, 'api.example.test');
    assert.deepEqual([event?.unmapped?.identity, event?.unmapped?.identity_failure], ['unavailable', 'proc-unavailable']);
    // An entry that admits any binary needs no identity: it keeps working, and says none was needed.
    assert.equal((await curlGet(forward(b), other())).status, '200');
    assert.equal(lastDecision(b, 'other.example.test')?.unmapped?.identity, 'not-needed');
    const ready = await readyz(b);
    assert.equal(ready.ready, false);
    assert.ok(ready.reasons.some((r) => r.startsWith('identity-unavailable:')), ready.reasons.join(', '));
  });

  it('with --binary-identity endpoint-only allows any process and says so in every decision', async () => {
    const b = await start({ binaryIdentity: 'endpoint-only' });
    assert.equal((await curlGet(forward(b), api())).status, '200');
    const event = lastDecision(b, 'api.example.test');
    assert.deepEqual([event?.unmapped?.identity, event?.unmapped?.binary], ['endpoint-only', undefined]);
    assert.equal((await readyz(b)).ready, true);
  });

  it('asks the identity server over --identity-socket, and fails closed once it is gone', async () => {
    const socketPath = join(dir, 'identity.sock');
    const logger = createLogger({ format: 'json', level: 'silent', destination: { write: () => true } });
    const server = createIdentityServer({ socketPath, source: testProcSource(), logger });
    await server.start();
    const b = await start({ identitySocket: socketPath });
    assert.equal((await pythonGet(script, forward(b), api())).status, '200');
    assert.equal(lastDecision(b, 'api.example.test')?.unmapped?.binary, PYTHON);
    const curl = await curlGet(forward(b), api());
    assert.equal(curl.status, '403');
    assert.equal(lastDecision(b, 'api.example.test')?.unmapped?.binary, CURL);
    assert.equal((await readyz(b)).ready, true);
    await server.close();
    const gone = await pythonGet(script, forward(b), api());
    assert.equal(JSON.parse(gone.body).reason, 'identity-unavailable');
    assert.equal(lastDecision(b, 'api.example.test')?.unmapped?.identity_failure, 'source-unavailable');
    assert.ok((await readyz(b)).reasons.some((r) => r.startsWith('identity-unavailable: identity socket')));
  });

  it('policy explain --from-event decides a binary denial again with the binary the event names', async () => {
    const b = await start({});
    assert.equal((await curlGet(forward(b), api())).status, '403');
    const event = lastDecision(b, 'api.example.test');
    assert.equal((event?.unmapped?.replay as { binary?: string } | undefined)?.binary, CURL);
    const eventFile = join(dir, 'event.json');
    await writeFile(eventFile, JSON.stringify({ ocsf: event }));
    let out = '';
    const io = { stdout: { write: (t: string) => (out += t) }, stderr: { write: () => true }, env: {}, cwd: dir, signal: new AbortController().signal, now: Date.now };
    assert.equal(await policyCommand(['explain', b.policyPath, '--from-event', eventFile, '--json'], io), 1);
    assert.equal((JSON.parse(out) as { reason: string }).reason, 'binary-not-allowed');
  });
});
