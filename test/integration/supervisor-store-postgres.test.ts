// The SupervisorStore contract against PostgreSQL, then what only it promises: several replicas sharing one
// database (one bump per change, each due instance claimed once, changes reaching every replica, a listener that
// reconnects), and refusing a newer schema or an unreachable server without leaking the password.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { BoundaryError } from '../../src/shared/errors.js';
import { createPostgresStore } from '../../src/supervisor/store/postgres.js';
import type { SupervisorStore } from '../../src/supervisor/store/store.js';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';
import { attach, publication, recordChanges, runStoreContract, WAIT_MS } from '../contracts/supervisor-store.contract.js';
import { type PostgresServer, postgresSkip, startPostgres } from '../harness/postgres.js';
import { type WaiterList, waiterList } from '../harness/waiters.js';

/** A logger whose parsed lines can be awaited. */
function recordingLogger(): { logger: Logger; lines: WaiterList<Record<string, unknown>> } {
  const lines = waiterList<Record<string, unknown>>();
  const destination = {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line.length > 0) lines.push(JSON.parse(line) as Record<string, unknown>);
      return true;
    },
  };
  return { logger: createLogger({ format: 'json', destination, level: 'debug' }), lines };
}

async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'boundary-store-'));
}

describe('PostgreSQL store', { skip: postgresSkip() }, () => {
  let server: PostgresServer | undefined;
  let databases = 0;
  const { logger, lines } = recordingLogger();
  before(async () => {
    server = await startPostgres();
  });
  after(() => server?.stop());

  async function freshDatabase(): Promise<string> {
    if (server === undefined) throw new Error('the PostgreSQL server did not start');
    databases++;
    return server.createDatabase(`store_${databases}`);
  }

  async function started(connectionString: string): Promise<SupervisorStore> {
    const store = createPostgresStore({ connectionString, logger });
    await store.start();
    return store;
  }

  runStoreContract('postgres', async () => {
    const store = await started(await freshDatabase());
    assert.equal(store.kind, 'postgres');
    return { store, cleanup: () => store.close() };
  });

  describe('two replicas on one database', () => {
    let a: SupervisorStore;
    let b: SupervisorStore;
    let connectionString = '';
    before(async () => {
      connectionString = await freshDatabase();
      // Started together: the advisory lock keeps their migrations from racing.
      [a, b] = await Promise.all([started(connectionString), started(connectionString)]);
    });
    after(async () => {
      await Promise.all([a?.close(), b?.close()]);
    });

    it('concurrent publishes of the same content bump the generation once', async () => {
      await a.publishSandbox(publication('shared'));
      const change = publication('shared', { policyHash: 'p2' });
      const results = await Promise.all(Array.from({ length: 10 }, (_, n) => (n % 2 === 0 ? a : b).publishSandbox(change)));
      assert.deepEqual(new Set(results.map((s) => s.generation)), new Set([2]));
      assert.equal((await b.sandbox('shared'))?.generation, 2);
    });

    it('concurrent claimDue calls withdraw every due instance exactly once', async () => {
      const total = 200;
      await Promise.all(Array.from({ length: total }, (_, n) => (n % 2 === 0 ? a : b).expect('race', `i${n}`, 10 + (n % 7))));
      const batches = await Promise.all(
        Array.from({ length: 20 }, (_, n) => (n % 2 === 0 ? a : b).claimDue(100, n % 2 === 0 ? 'ra' : 'rb', false, () => 'due')),
      );
      const claimed = batches.flat().map((w) => w.instanceId);
      assert.equal(claimed.length, total);
      assert.equal(new Set(claimed).size, total);
      assert.deepEqual((await a.instances()).filter((i) => i.sandboxId === 'race'), []);
      assert.equal((await b.withdrawals()).filter((w) => w.sandboxId === 'race').length, total);
    });

    it('a change written through one replica reaches a subscriber of the other', async () => {
      const onB = recordChanges(b);
      await a.attached(attach('cross', 'i1', { replicaId: 'ra', sessionId: 'sx' }));
      const seen = await onB.waitFor((c) => c.kind === 'attached' && c.sandboxId === 'cross', WAIT_MS, 'attached change on b');
      assert.deepEqual(seen, { kind: 'attached', sandboxId: 'cross', instanceId: 'i1', replicaId: 'ra', sessionId: 'sx', bootId: 'boot-1' });
      onB.stop();
    });

    it('the listener reconnects after its connection is killed, and logs it', async () => {
      const admin = new pg.Client({ connectionString });
      await admin.connect();
      try {
        const killed = await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'",
        );
        assert.equal(killed.rowCount, 2, 'one LISTEN connection per replica');
      } finally {
        await admin.end();
      }
      await lines.waitFor((l) => l.level === 40 && String(l.msg).includes('notification connection dropped'), WAIT_MS, 'drop warning');
      const back = (l: Record<string, unknown>) => String(l.msg).includes('notification connection is back');
      await lines.waitFor(() => lines.items.filter(back).length >= 2, WAIT_MS, 'both listeners back');
      const onA = recordChanges(a);
      await b.publishSandbox(publication('after-reconnect'));
      await onA.waitFor((c) => c.kind === 'sandbox' && c.sandboxId === 'after-reconnect', WAIT_MS, 'change after reconnect');
      onA.stop();
      assert.ok(!lines.items.some((l) => JSON.stringify(l).includes(connectionString)), 'the connection string is never logged');
    });

    it('a restarted store finds everything the previous one wrote', async () => {
      const before = { sandboxes: await a.sandboxes(), instances: await a.instances(), withdrawals: await a.withdrawals() };
      await a.close();
      a = await started(connectionString);
      assert.deepEqual(await a.sandboxes(), before.sandboxes);
      assert.deepEqual(await a.instances(), before.instances);
      assert.deepEqual(await a.withdrawals(), before.withdrawals);
    });
  });

  it('refuses a database migrated by newer code', async () => {
    const connectionString = await freshDatabase();
    const first = await started(connectionString);
    await first.close();
    const admin = new pg.Client({ connectionString });
    await admin.connect();
    await admin.query('UPDATE supervisor_schema SET version = 99');
    await admin.end();
    await assert.rejects(started(connectionString), { code: 'STORE_STATE_INVALID', message: /schema version 99/ });
  });

  it('an unreachable server rejects start with a readable message that holds no password', async () => {
    const dir = await tempDir();
    try {
      const store = createPostgresStore({ connectionString: `postgresql://postgres:hunter2@/x?host=${dir}`, logger });
      await assert.rejects(
        store.start(),
        (err: BoundaryError) => err.code === 'STORE_UNAVAILABLE' && /starting/.test(err.message) && !err.message.includes('hunter2'),
      );
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
