// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`), part G: SIGTERM ends `boundary run`
// within the drain deadline whatever work is in flight: CONNECT tunnels (idle and streaming), inspected keep-alive
// connections (plain and TLS-intercepted), a request to an origin that never answers, a WebSocket with traffic,
// policy DNS queries and a CONNECT waiting on a silent upstream, a policy push from the supervisor and a control
// relay through it; exit 0 when all of it drains in time, 'forced' (run's exit 3) when some cannot. The hangs it
// found, each of which made every SIGTERM wait the whole deadline and exit 3: half a request head sent to the admin
// listener (admin.close() waited for that connection), and a control channel dialling a supervisor that does not
// answer (close() waited for the dial's lookup, connect and handshake timeouts).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { SHUTDOWN_DRAIN_MS } from '../../src/app/boundary-shutdown.js';
import { EXIT_OK } from '../../src/app/cli/run.js';
import { dialSupervisor } from '../../src/control/dial.js';
import { CLOSE_CODES } from '../../src/websocket/ws-frames.js';
import { httpGet, writeTlsDir } from '../harness/attached-boundary.js';
import { TEST_SYNTHETIC_CIDR } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { type BoundaryCli, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { rawClient, tcpOrigin } from '../harness/liveness.js';
import { tcpListener, udpListener } from '../harness/silent-upstream.js';
import { type WorkInFlight, startWorkInFlight, workPolicy } from '../harness/work-in-flight.js';
import { withinDeadline } from '../harness/waiters.js';

/**
 * Bounds a hang only: what the exit is held to is its code (0 drained in time, 3 forced at the deadline), never how
 * long it took, which a loaded host stretches.
 */
const EXIT_MARGIN_MS = 60_000;
/** A grace that would outlast any test: only the drain deadline can end the stuck request. */
const LONG_GRACE_MS = 600_000;
const SHORT_DRAIN_MS = 500;

type Exit = [number | null, NodeJS.Signals | null];

/**
 * A reload in flight at SIGTERM: the supervisor sees its policy file change and pushes the next generation; this
 * returns once that push is on the wire, so the boundary receives, applies and acknowledges it while it drains.
 */
/** Sends SIGTERM; `exit()` waits for the child's exit within the deadline and checks it was clean. */
function sigterm(cli: BoundaryCli, t: TestContext): { exit(): Promise<number> } {
  const exited = once(cli.child, 'exit') as Promise<Exit>;
  const started = performance.now();
  cli.child.kill('SIGTERM');
  return {
    async exit() {
      const [code, signal] = await withinDeadline(exited, 'exit after SIGTERM', SHUTDOWN_DRAIN_MS + EXIT_MARGIN_MS);
      const tookMs = performance.now() - started;
      t.diagnostic(`exit ${code} ${Math.round(tookMs)} ms after SIGTERM`);
      assert.deepEqual({ code, signal }, { code: EXIT_OK, signal: null }, cli.stderr());
      return tookMs;
    },
  };
}

async function pushPolicy(work: WorkInFlight): Promise<void> {
  const pushed = work.sup.waitFor((e) => e.type === 'pushed' && (e.generation ?? 0) > 1);
  await work.sup.writePolicy(work.pki.sandboxId, workPolicy({ l7: work.ports.l7, l4: [...work.ports.l4, 9] }));
  await pushed;
}

/** Every client socket saw its close, and nothing listens on the proxy, admin or policy DNS ports any more. */
async function assertAllClosed(work: WorkInFlight): Promise<void> {
  for (const client of work.clients) await withinDeadline(client.closed, `${client.what} closed`);
  // The WebSocket was closed as a WebSocket: 1001 going away, not a bare reset.
  assert.equal(await work.websocket.closeCode(), CLOSE_CODES.goingAway);
  for (const [what, port] of [['proxy', work.proxyPort], ['admin', work.adminPort], ['policy DNS (tcp)', work.dnsPort]] as const) {
    assert.equal(await tcpListener(port), 'refused', `${what} listener closed`);
  }
  assert.equal(await udpListener(work.dnsPort), 'refused', 'policy DNS (udp) listener closed');
}

describe('issue 15: SIGTERM with every kind of work in flight', () => {
  it('drains within the deadline and exits 0; /readyz says closing meanwhile, /healthz stays ok', async (t) => {
    const work = await startWorkInFlight();
    t.after(() => work.close());
    const cli = work.cli;
    assert.ok(cli);
    assert.equal((await httpGet(work.adminPort, '/readyz')).status, 200);
    const before = work.streamed();
    await pushPolicy(work);
    const stopping = sigterm(cli, t);
    // The stuck request holds the drain for the proxy's grace: the admin listener answers all along.
    await cli.waitFor((line) => line.ocsf?.status_detail === 'boundary_stopping');
    const ready = await httpGet(work.adminPort, '/readyz');
    const live = await httpGet(work.adminPort, '/healthz');
    await stopping.exit();
    assert.ok(work.streamed() > before, 'the streaming tunnel carried bytes up to SIGTERM');
    assert.equal(ready.status, 503, JSON.stringify(ready.body));
    assert.ok((ready.body.reasons as string[]).includes('closing'), JSON.stringify(ready.body));
    assert.equal(live.status, 200);
    assert.ok(cli.lines.some((line) => line.ocsf?.status_detail === 'boundary_drained'));
    await assertAllClosed(work);
  });

  it('is not held to the deadline by half a request head on the admin listener', async (t) => {
    const work = await startWorkInFlight({ withoutStuckRequest: true });
    t.after(() => work.close());
    const cli = work.cli;
    assert.ok(cli);
    // Any process in the pod reaches 127.0.0.1:9901; this one never finishes its request head.
    const slow = await rawClient(work.adminPort);
    slow.write('GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n');
    const slowClosed = new Promise((resolve) => slow.once('close', resolve));
    await pushPolicy(work);
    // Before the fix: exit 3 (forced) after the whole SHUTDOWN_DRAIN_MS; exit() asserts 0 (drained in time).
    await sigterm(cli, t).exit();
    await withinDeadline(slowClosed, 'the half-sent admin request closed');
    await assertAllClosed(work);
  });
});

describe('issue 15: work that cannot finish by the drain deadline', () => {
  it('is forced at the deadline: every client socket is closed and every listener with it', async (t) => {
    const work = await startWorkInFlight({ inProcess: { closeGraceMs: LONG_GRACE_MS, shutdownDrainMs: SHORT_DRAIN_MS } });
    t.after(() => work.close());
    const { boundary, log } = work;
    assert.ok(boundary && log);
    await pushPolicy(work);
    const started = performance.now();
    const outcome = await withinDeadline(boundary.close({ signal: 'SIGTERM' }), 'close() past the drain deadline', SHORT_DRAIN_MS + EXIT_MARGIN_MS);
    // run.ts turns 'forced' into EXIT_DRAIN_FORCED (3), and main.ts exits at once on it.
    t.diagnostic(`close() ${outcome} ${Math.round(performance.now() - started)} ms after it began`);
    assert.equal(outcome, 'forced');
    assert.ok(log.lines().some((line) => line.includes('drain deadline passed')));
    await assertAllClosed(work);
  });
});

describe('issue 15: SIGTERM while the control channel dials a supervisor that does not answer', () => {
  it('exits 0 at once instead of waiting out the connect and handshake timeouts', async (t) => {
    const pki = await makeTestPki();
    // Accepts TCP and never speaks TLS: a supervisor replica hung, or a proxy in front of it black-holing.
    const silent = await tcpOrigin(() => undefined);
    const tlsDir = await writeTlsDir(pki);
    const stateDir = await mkdtemp(join(tmpdir(), 'boundary-state-'));
    let cli: BoundaryCli | undefined;
    // boundary first: it keeps its state in stateDir until it has exited.
    t.after(async () => {
      await cli?.kill();
      await silent.close();
      await rm(tlsDir, { recursive: true, force: true });
      await rm(stateDir, { recursive: true, force: true });
    });
    cli = spawnBoundaryCli([
      '--supervisor', `127.0.0.1:${silent.port}`,
      '--tls-dir', tlsDir,
      '--sandbox-id', pki.sandboxId,
      '--proxy-listen', '127.0.0.1:0',
      '--admin-listen', '127.0.0.1:0',
      '--dns-listen', '127.0.0.1:0',
      '--synthetic-cidr', TEST_SYNTHETIC_CIDR,
      '--state-dir', stateDir,
      // Never queried: no request goes through this boundary.
      '--upstream-dns', '127.0.0.1:9',
    ]);
    await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
    // The dial is in its TLS handshake: TCP accepted, no ServerHello will ever come.
    const dialled = await withinDeadline(silent.next(), 'the control dial reaching the silent supervisor');
    // 'end', not 'close': the origin allows half-open sockets, so the dial's FIN alone does not close its side.
    const dialClosed = new Promise((resolve) => {
      dialled.once('end', resolve);
      dialled.once('close', resolve);
    });
    // Reads the ClientHello away, or 'end' would wait behind it.
    dialled.resume();
    // Before the fix: exit 3 (forced) after the whole SHUTDOWN_DRAIN_MS; exit() asserts 0 (drained in time).
    await sigterm(cli, t).exit();
    await withinDeadline(dialClosed, 'the abandoned dial closed');
  });

  it('abandons a supervisor name lookup that never answers once the signal aborts', async () => {
    const pki = await makeTestPki();
    const closing = new AbortController();
    const dial = dialSupervisor({
      host: 'supervisor.example.test',
      port: 1,
      tls: { caPem: pki.ca.certPem, certPem: pki.client.certPem, keyPem: pki.client.keyPem },
      // getaddrinfo against a resolver that does not answer: minutes with the default retries.
      lookup: () => new Promise<readonly string[]>(() => undefined),
      signal: closing.signal,
    });
    closing.abort();
    // The message, not just a rejection: withinDeadline's own timeout would reject too.
    await assert.rejects(withinDeadline(dial, 'the dial settling'), { name: 'ControlFailure', message: 'dial of supervisor.example.test abandoned: the control client is closing' });
  });
});
