// Issue 17 (binary identity): `binaries` were validated and then ignored, so a policy that let only one program
// reach a host let every process do so. Two real executables (curl, python3) against the same endpoints through
// the proxy: forward, CONNECT (with an L7 rule inside the tunnel) and transparent capture, an ancestor that
// grants, a reload that keeps the tunnel's identity, and the decision events naming the process (docs/identity.md).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { curlGet, pythonGet, pythonHeld, type Route, writePythonClient } from '../harness/identity-clients.js';
import { realExe } from '../harness/identity-processes.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
const CURL = realExe('/usr/bin/curl');
const PYTHON = realExe('/usr/bin/python3');

function policyText(port: number, agentGlob: string, pythonPath = '/usr/bin/python3'): string {
  return `version: 1
network_policies:
  python_only:
    name: python only
    endpoints: [{ host: api.example.test, port: ${port} }]
    # Written as the symlink users know; the kernel reports ${PYTHON}.
    binaries: [{ path: ${pythonPath} }]
  curl_rest:
    endpoints:
      - host: other.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/ok/**" }
    binaries: [{ path: ${CURL} }]
  agents:
    endpoints: [{ host: tools.example.test, port: ${port} }]
    binaries: [{ path: "${agentGlob}" }]
`;
}

/** The decision event of the newest request or connection to `host` (after `since` events). */
async function decisionFor(b: RunningBoundary, host: string, since: number): Promise<OcsfEvent> {
  return b.log.waitFor((e) => e.action_id !== undefined && b.log.events().indexOf(e) >= since && JSON.stringify(e).includes(host));
}

describe('issue 17: binaries decide which process may reach an endpoint', () => {
  let dir: string;
  let origin: Origin;
  let b: RunningBoundary;
  let script: string;
  let agent: string;
  const names = { 'tools.example.test': ['127.0.0.1'] };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-issue17-'));
    origin = await httpOrigin();
    script = await writePythonClient(dir);
    // A launcher the policy names by glob: a copied bash that runs curl, so curl's ancestor grants.
    await mkdir(join(dir, 'agent'));
    agent = join(dir, 'agent', 'my-agent');
    await copyFile(realExe('/bin/bash'), agent);
    await chmod(agent, 0o755);
    b = await startBoundary({ names, policy: policyText(origin.port, `${dir}/agent/*-agent`) });
  });
  after(async () => {
    await b?.close();
    await origin?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const api = () => `http://api.example.test:${origin.port}/x`;
  const forward = (): Route => ({ via: 'forward', proxyPort: b.proxyPort });
  const connect = (): Route => ({ via: 'connect', proxyPort: b.proxyPort });

  it('forward HTTP: python3 (listed as its symlink) is allowed, curl is denied, and each event names its process', async () => {
    const since = b.log.events().length;
    assert.equal((await pythonGet(script, forward(), api())).status, '200');
    const allowed = await decisionFor(b, 'api.example.test', since);
    assert.deepEqual([allowed.unmapped?.identity, allowed.unmapped?.binary], ['process', PYTHON]);
    const next = b.log.events().length;
    const denied = await curlGet(forward(), api());
    assert.equal(denied.status, '403');
    assert.equal(JSON.parse(denied.body).reason, 'binary-not-allowed');
    const event = await decisionFor(b, 'api.example.test', next);
    assert.deepEqual([event.unmapped?.identity, event.unmapped?.binary, event.unmapped?.reason_code], ['process', CURL, 'binary-not-allowed']);
    assert.match(String(event.unmapped?.reason), /^binary \/usr\/bin\/curl is not allowed to reach api\.example\.test:\d+ by policy python_only/);
  });

  it('CONNECT: one lookup per tunnel, refused for curl at the CONNECT, allowed for python3', async () => {
    assert.equal((await pythonGet(script, connect(), api())).status, '200');
    const denied = await curlGet(connect(), api());
    assert.match(denied.status, /^(403|ERR curl 56)/);
    const since = b.log.events().length;
    assert.equal((await curlGet(connect(), `http://other.example.test:${origin.port}/ok/1`)).status, '200');
    // The request inside the tunnel is decided with the tunnel's process, and says so.
    const inside = await b.log.waitFor((e) => b.log.events().indexOf(e) >= since && e.unmapped?.rule === 'GET /ok/**');
    assert.deepEqual([inside.unmapped?.identity, inside.unmapped?.binary], ['process', CURL]);
    const python = await pythonGet(script, connect(), `http://other.example.test:${origin.port}/ok/1`);
    assert.match(python.status, /^ERR .*403/, 'python3 may not open curl\'s tunnel');
  });

  it('transparent capture: the process behind a synthetic address is identified per connection', async () => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+tries=1', '+time=3', '+short', 'api.example.test', 'A']);
    const synthetic = stdout.trim();
    const direct: Route = { via: 'direct', ip: synthetic };
    const since = b.log.events().length;
    assert.equal((await pythonGet(script, direct, api())).status, '200');
    const allowed = await decisionFor(b, 'api.example.test', since);
    assert.deepEqual([allowed.unmapped?.identity, allowed.unmapped?.binary], ['process', PYTHON]);
    const next = b.log.events().length;
    const dropped = await curlGet(direct, api());
    assert.match(dropped.status, /^ERR curl (52|56)/, 'a refused capture closes without a reply');
    const event = await decisionFor(b, 'api.example.test', next);
    assert.deepEqual([event.unmapped?.reason_code, event.unmapped?.binary], ['binary-not-allowed', CURL]);
  });

  it('an ancestor matched by glob grants its child, and the event names the ancestor', async () => {
    const tools = `http://tools.example.test:${origin.port}/t`;
    const since = b.log.events().length;
    // `exec` replaces the copied bash by curl: no ancestor is left, so it does not pass.
    const replaced = await curlGet(forward(), tools, [agent, '-c', 'exec curl "$@"', agent]);
    assert.equal(replaced.status, '403');
    // A command after curl keeps the launcher alive as its parent (bash would exec a lone command itself).
    const launched = await curlGet(forward(), tools, [agent, '-c', 'curl "$@"; exit $?', agent]);
    assert.equal(launched.status, '200');
    const event = await b.log.waitFor((e) => b.log.events().indexOf(e) >= since && e.unmapped?.binary_ancestor === agent);
    assert.deepEqual([event.unmapped?.binary, event.unmapped?.identity], [CURL, 'process']);
    assert.equal((await curlGet(forward(), tools)).status, '403', 'curl launched by the test runner is not an agent');
  });

  it('a reload decides open tunnels again with the identity they were opened with', async (t) => {
    const held = pythonHeld(script, connect(), api());
    t.after(() => held.stop());
    assert.equal((await held.first).status, '200');
    const loaded = (generation: number) => b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped?.policy_generation === generation);
    const closes = () => b.log.events().filter((e) => e.message?.startsWith('tunnel to api.example.test') && e.message.endsWith('policy-changed')).length;
    // An unrelated change: python3 is still allowed, so its tunnel stays.
    await b.writePolicy(policyText(origin.port, `${dir}/agent/*-agent-renamed`));
    await loaded(2);
    assert.equal((await held.next()).status, '200');
    assert.equal(closes(), 0);
    // python3 no longer listed: its tunnel is closed.
    await b.writePolicy(policyText(origin.port, `${dir}/agent/*-agent`, CURL));
    await b.log.waitFor((e) => (e.message ?? '').startsWith('tunnel to api.example.test') && (e.message ?? '').endsWith('policy-changed'));
    await b.writePolicy(policyText(origin.port, `${dir}/agent/*-agent`));
    await loaded(4);
  });
});
