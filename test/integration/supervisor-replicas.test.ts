// Issue 12: two supervisor replicas (the real CLI, as processes) on one PostgreSQL database (a real server from
// the Debian package) behind one name with two addresses, as a headless Service gives it. Boundaries attach to
// either; a replica killed with SIGKILL loses its boundaries to the other within seconds; a policy change seen
// by one replica reaches every boundary; a deadline fires once across replicas; killing every replica loses no
// expected instance. Traffic stays on loopback (127.0.0.2 and 127.0.0.3 are loopback) and a unix socket.

import assert from 'node:assert/strict';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issueCertificate } from '../../src/pki/issue.js';
import { createPostgresStore } from '../../src/supervisor/store/postgres.js';
import type { StoreChange, SupervisorStore } from '../../src/supervisor/store/store.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';
import type { LoggedChild } from '../harness/child-lines.js';
import { makeTestClient, policyYaml, type TestClient } from '../harness/control.js';
import { type PostgresServer, postgresSkip, startPostgres } from '../harness/postgres.js';
import {
  expectInstance,
  freePort,
  listenOn,
  type SupervisorFiles,
  spawnSupervisorCli,
  waitForHookDelivered,
  writeSupervisorFiles,
} from '../harness/supervisor-cli.js';
import { waiterList } from '../harness/waiters.js';

const NAME = 'supervisor.test';
const ADDRESSES = ['127.0.0.2', '127.0.0.3'] as const;
const SANDBOXES = 4;
const PER_SANDBOX = 5;
/** Seconds; short so the deadline cases finish quickly, long enough for a re-attach after a kill. */
const ATTACH_DEADLINE_S = 4;
/** Issue 12: "killing one moves its boundaries to the other within seconds". */
/**
 * Failed attempts a boundary of the killed replica may make before it is attached to the survivor: it dials every
 * address of the name in one attempt, so the dead replica costs a connect, not an attempt. Counted, not timed.
 */
const MAX_FAILOVER_FAILED_ATTEMPTS = 1;
const WAIT_MS = 30_000;

/** A port free on both addresses, so the two replicas share it as a Service port. */
async function sharedPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const first = await listenOn(ADDRESSES[0], 0);
    const port = (first.address() as { port: number }).port;
    const second = await listenOn(ADDRESSES[1], port).catch(() => undefined);
    first.close();
    second?.close();
    if (second !== undefined) return port;
  }
  throw new Error('no port free on both loopback addresses');
}

interface Replica {
  readonly address: string;
  readonly policies: string;
  child: LoggedChild;
  replicaId: string;
  adminPort: number;
}

describe('supervisor replicas on one PostgreSQL database', { skip: postgresSkip() }, () => {
  let pg: PostgresServer;
  let databaseUrl: string;
  let dir: string;
  let pki: TestPki;
  let port: number;
  let view: SupervisorStore;
  let files: SupervisorFiles;
  const identities: Pem[] = [];
  const replicas: Replica[] = [];
  const clients: { sandboxId: string; instanceId: string; c: TestClient }[] = [];
  /** What the replicas announce on the database's notification channel, as a third reader sees it. */
  const changes = waiterList<StoreChange>();

  async function startReplica(replica: Replica): Promise<void> {
    const started = await spawnSupervisorCli(
      [
        `--listen=${replica.address}:${port}`,
        `--tls-dir=${files.tlsDir}`,
        `--policies=${replica.policies}`,
        `--admin-listen=127.0.0.1:${replica.adminPort}`,
        `--admin-token-file=${files.tokenFile}`,
        `--database-url=${databaseUrl}`,
        `--attach-deadline=${ATTACH_DEADLINE_S}`,
        `--withdrawal-hook=${files.hook}`,
        `--withdrawal-hook-arg=${replica.address}`,
      ],
      `supervisor ${replica.address}`,
    );
    replica.child = started.child;
    replica.replicaId = started.replicaId;
  }

  const expect = (replica: Replica, sandboxId: string, instanceId: string): Promise<number> => expectInstance(replica.adminPort, sandboxId, instanceId);
  const waitForWithdrawal = (instanceId: string): Promise<unknown> => waitForHookDelivered(replicas.map((r) => r.child), instanceId);

  before(async () => {
    pg = await startPostgres();
    databaseUrl = await pg.createDatabase('replicas');
    view = createPostgresStore({ connectionString: databaseUrl, logger: createLogger({ format: 'json', level: 'error', destination: { write: () => undefined } }) });
    dir = await mkdtemp(join(tmpdir(), 'boundary-replicas-'));
    pki = await makeTestPki();
    port = await sharedPort();
    files = await writeSupervisorFiles(dir, pki, [NAME, ...ADDRESSES]);
    for (const address of ADDRESSES) {
      const policies = await mkdtemp(join(dir, 'policies-'));
      await writeFile(join(policies, 'default.yaml'), policyYaml('api.example.test'));
      replicas.push({ address, policies, child: undefined as unknown as LoggedChild, replicaId: '', adminPort: await freePort() });
    }
    await view.start();
    view.subscribe((change) => changes.push(change));
    await Promise.all(replicas.map(startReplica));
    for (let s = 0; s < SANDBOXES; s += 1) {
      identities.push(await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId: `sb-${s}`, trustDomain: pki.trustDomain, now: Date.now }));
    }
    for (let s = 0; s < SANDBOXES; s += 1) {
      for (let i = 0; i < PER_SANDBOX; i += 1) {
        const sandboxId = `sb-${s}`;
        const instanceId = `pod-${s}-${i}`;
        const c = makeTestClient(pki, {
          port,
          host: NAME,
          lookup: async () => ADDRESSES,
          identity: identities[s] as Pem,
          sandboxId,
          instanceId,
          backoff: { baseMs: 100, capMs: 1_000 },
        });
        clients.push({ sandboxId, instanceId, c });
      }
    }
  });

  after(async () => {
    for (const { c } of clients) await c.client.close();
    for (const replica of replicas) await replica.child?.kill().catch(() => undefined);
    await view?.close().catch(() => undefined);
    await pg?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('admits boundaries on either replica', async () => {
    await Promise.all(clients.map(({ c }) => c.client.start()));
    await Promise.all(clients.map(({ c }) => c.waitState((s) => s.phase === 'attached' && s.policy.effective, WAIT_MS)));
    // Written behind the answer to the boundary: wait for each write's notification before reading the store.
    await Promise.all(
      clients.map(({ instanceId, c }) =>
        changes.waitFor((ch) => ch.kind === 'attached' && ch.sessionId === c.client.state().sessionId, WAIT_MS, `attached ${instanceId}`),
      ),
    );
    const held = await view.instances();
    const byReplica = new Map<string, number>();
    for (const i of held) byReplica.set(String(i.replicaId), (byReplica.get(String(i.replicaId)) ?? 0) + 1);
    assert.equal(held.length, clients.length);
    for (const replica of replicas) assert.ok((byReplica.get(replica.replicaId) ?? 0) > 0, `no boundary on ${replica.address}: ${JSON.stringify([...byReplica])}`);
  });

  it('moves the boundaries of a killed replica to the other within seconds', async () => {
    const [killed, survivor] = replicas as [Replica, Replica];
    const before = new Map(clients.map(({ instanceId, c }) => [instanceId, c.client.state().sessionId]));
    const onKilled = new Set((await view.instances()).filter((i) => i.replicaId === killed.replicaId).map((i) => i.instanceId));
    const failedBefore = new Map(clients.map(({ instanceId, c }) => [instanceId, c.client.state().failedAttempts]));
    const t0 = Date.now();
    await killed.child.kill();
    const moved = await Promise.all(
      clients
        .filter(({ instanceId }) => onKilled.has(instanceId))
        .map(async ({ instanceId, c }) => {
          const state = await c.waitState((s) => s.phase === 'attached' && s.sessionId !== before.get(instanceId), WAIT_MS);
          return { instanceId, ms: Date.now() - t0, failed: state.failedAttempts - (failedBefore.get(instanceId) ?? 0) };
        }),
    );
    const worst = Math.max(...moved.map((m) => m.ms));
    const failed = Math.max(...moved.map((m) => m.failed));
    console.log(`# failover: ${moved.length} boundaries re-attached to the surviving replica, slowest ${worst} ms, at most ${failed} failed attempts`);
    assert.ok(moved.length > 0);
    assert.ok(failed <= MAX_FAILOVER_FAILED_ATTEMPTS, `failed attempts before the re-attach: ${JSON.stringify(moved)}`);
    // The store agrees: every moved instance is held by the survivor, none was withdrawn.
    await Promise.all(
      [...onKilled].map((instanceId) =>
        changes.waitFor((c) => c.kind === 'attached' && c.instanceId === instanceId && c.replicaId === survivor.replicaId, WAIT_MS, `attached ${instanceId}`),
      ),
    );
    const held = await view.instances();
    assert.equal(held.length, clients.length);
    assert.ok(held.every((i) => i.replicaId === survivor.replicaId));
    assert.deepEqual((await view.withdrawals()).filter((w) => w.instanceId.startsWith('pod-')), []);
    await startReplica(killed);
  });

  it('pushes a policy change seen by one replica to every boundary, on both replicas', async () => {
    const [first] = replicas as [Replica, Replica];
    const targets = clients.filter((c) => c.sandboxId === 'sb-0');
    const oldHash = targets[0]?.c.client.state().policy.policyHash;
    const tmp = join(first.policies, '.sb-0.tmp');
    await writeFile(tmp, policyYaml('changed.example.test'));
    await rename(tmp, join(first.policies, 'sb-0.yaml'));
    const states = await Promise.all(targets.map(({ c }) => c.waitState((s) => s.policy.policyHash !== oldHash && s.policy.effective, WAIT_MS)));
    assert.equal(new Set(states.map((s) => s.policy.policyHash)).size, 1);
    assert.equal((await view.sandbox('sb-0'))?.policyHash, states[0]?.policy.policyHash);
    // Other sandboxes were not touched.
    assert.equal(clients.find((c) => c.sandboxId === 'sb-1')?.c.client.state().policy.policyHash, oldHash);
  });

  it('withdraws an instance expected through both replicas exactly once, and runs the hook once', async () => {
    const [a, b] = replicas as [Replica, Replica];
    const statuses = await Promise.all([expect(a, 'sb-1', 'never-1'), expect(b, 'sb-1', 'never-1'), expect(a, 'sb-1', 'never-1')]);
    assert.deepEqual(statuses, [202, 202, 202]);
    await waitForWithdrawal('never-1');
    const records = (await view.withdrawals()).filter((w) => w.instanceId === 'never-1');
    assert.equal(records.length, 1, JSON.stringify(records));
    assert.match(records[0]?.reason ?? '', /attach deadline/);
    const lines = (await files.hookCalls()).filter((l) => l.includes(' never-1 '));
    assert.equal(lines.length, 1, lines.join('\n'));
    assert.ok(lines[0]?.startsWith(records[0]?.id ?? '-'));
  });

  it('settles two live processes with one identity on different replicas: the newer wins, the older stops', async () => {
    const [a, b] = replicas as [Replica, Replica];
    const twin = (replica: Replica, bootId: string): TestClient =>
      makeTestClient(pki, { port, host: NAME, lookup: async () => [replica.address], identity: identities[3] as Pem, sandboxId: 'sb-3', instanceId: 'twin', bootId });
    const older = twin(a, 'boot-older');
    const newer = twin(b, 'boot-newer');
    try {
      await older.client.start();
      await older.waitState((s) => s.phase === 'attached' && s.policy.effective, WAIT_MS);
      await a.child.waitFor((l) => l.msg === 'boundary acknowledged its configuration' && l.instanceId === 'twin', WAIT_MS);
      await newer.client.start();
      const superseded = await older.waitState((s) => s.phase === 'superseded', WAIT_MS);
      assert.equal(superseded.superseded?.bootId, 'boot-newer');
      await a.child.waitFor((l) => typeof l.msg === 'string' && l.msg.startsWith('two live boundary processes attached as one instance'), WAIT_MS);
      await newer.waitState((s) => s.phase === 'attached' && s.policy.effective, WAIT_MS);
      assert.equal(older.client.state().phase, 'superseded', 'the older process stopped competing');
    } finally {
      await older.client.close();
      await newer.client.close();
    }
  });

  it('loses no expected instance when every replica is killed and restarted', async () => {
    const [a] = replicas as [Replica, Replica];
    assert.equal(await expect(a, 'sb-2', 'never-2'), 202);
    await Promise.all(replicas.map((r) => r.child.kill()));
    await Promise.all(replicas.map(startReplica));
    await waitForWithdrawal('never-2');
    assert.equal((await view.withdrawals()).filter((w) => w.instanceId === 'never-2').length, 1);
    assert.equal((await files.hookCalls()).filter((l) => l.includes(' never-2 ')).length, 1);
    // The boundaries came back too, and none of them was withdrawn on the way.
    await Promise.all(clients.map(({ c }) => c.waitState((s) => s.phase === 'attached', WAIT_MS)));
    assert.deepEqual((await view.withdrawals()).filter((w) => w.instanceId.startsWith('pod-')), []);
  });
});
