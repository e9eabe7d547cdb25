// Keeps this replica's tables in step with the store every replica shares. A replica publishes what its own
// policies folder and credentials file say (at start and on every change); the store decides the generation
// (compare and set, so replicas that see one change bump once), and every replica adopts the stored policy and
// settings at that generation and pushes them to the boundaries attached to it. Credentials never enter the
// store: each replica pushes the grants the stored policy binds from its own credentials file, and takes a new
// generation when those differ from what it pushed before. A boundary that attached to another replica has its session here closed
// (retire.ts: `superseded` when two live processes share the identity, as on one replica).

import type { SupervisorContext } from './context.js';
import { pushChange } from './push.js';
import { retireSession } from './retire.js';
import type { StoreChange, StoredSandbox } from './store/store.js';
import type { Grants } from './sandbox-config.js';
import type { SandboxConfig } from './tables.js';

export interface Replication {
  /** Adopts every sandbox the store holds, publishes this replica's view of each and follows other replicas. */
  start(): Promise<void>;
  /** The policies folder or the credentials file changed: publish every known sandbox and push what changed. */
  refresh(): Promise<void>;
  /** This replica admitted a boundary of a sandbox that was new here, or at a generation it moved. */
  admitted(sandboxId: string): void;
  close(): void;
}

export function createReplication(ctx: SupervisorContext, options: { grantsFor: (policy: { text: string; hash: string }) => Grants }): Replication {
  const { store, tables, logger, writer, replicaId } = ctx;
  let unsubscribe: (() => void) | undefined;

  function configOf(stored: StoredSandbox): SandboxConfig {
    const { providers, hash } = options.grantsFor({ text: stored.policyText, hash: stored.policyHash });
    return { policyText: stored.policyText, policyHash: stored.policyHash, settings: stored.settings, providers, credentialsHash: hash };
  }

  async function adopt(stored: StoredSandbox): Promise<void> {
    let current = stored;
    const config = configOf(current);
    const record = tables.sandbox(current.sandboxId);
    // This replica's own grants changed under an unchanged stored generation: it needs a generation of its own
    // to push them with (the other replicas adopt it and find nothing of theirs changed).
    if (record !== undefined && record.generation === current.generation && record.config.credentialsHash !== config.credentialsHash) {
      current = (await store.raiseGeneration(current.sandboxId, current.generation + 1)) ?? current;
    }
    // A boundary held a later generation than the store knew (admit moved the counter past it): the store follows.
    if (record !== undefined && record.generation > current.generation) {
      current = (await store.raiseGeneration(current.sandboxId, record.generation)) ?? current;
    }
    const change = tables.adopt(current.sandboxId, current.generation, configOf(current));
    if (change === undefined) return;
    logger.info({ sandboxId: current.sandboxId, generation: change.generation, policyHash: current.policyHash }, 'sandbox configuration changed; pushing');
    pushChange(ctx, current.sandboxId, change);
  }

  async function publish(sandboxId: string): Promise<void> {
    const found = ctx.configFor(sandboxId);
    if (!found.ok) {
      // Another replica's folder may hold it: adopt what the store has, and keep pushing that.
      const stored = await store.sandbox(sandboxId);
      if (stored !== undefined) await adopt(stored);
      else if (tables.sandbox(sandboxId) !== undefined) {
        logger.warn({ sandboxId, reason: found.refusal.message }, 'sandbox has no valid policy now; attached boundaries keep their last one');
      }
      return;
    }
    const { policyHash, policyText, credentialsHash, settings } = found.config;
    await adopt(await store.publishSandbox({ sandboxId, policyHash, policyText, credentialsHash, settings }));
  }

  function enqueue(sandboxId: string, what: string, run: () => Promise<void>): void {
    writer.write(`sandbox:${sandboxId}`, what, run);
  }

  function onChange(change: StoreChange): void {
    if (change.kind === 'sandbox') {
      const record = tables.sandbox(change.sandboxId);
      // Unknown here: nothing attached to push to; an attach creates the record from the store's view then.
      if (record === undefined || change.generation <= record.generation) return;
      enqueue(change.sandboxId, 'adopt sandbox', async () => {
        const stored = await store.sandbox(change.sandboxId);
        if (stored !== undefined) await adopt(stored);
      });
      return;
    }
    if (change.replicaId === replicaId) return;
    // The instance attached to another replica: the session it had here is over.
    const instance = tables.instance(change.sandboxId, change.instanceId);
    const session = instance?.sessionId === undefined ? undefined : ctx.live.get(instance.sessionId);
    if (session === undefined || session.sessionId === change.sessionId) return;
    logger.info({ sandboxId: change.sandboxId, instanceId: change.instanceId, otherReplica: change.replicaId }, 'boundary attached to another replica; closing its session here');
    const acked = instance?.sessionAcked ?? false;
    tables.detach(session.sessionId);
    retireSession(ctx, session, { bootId: session.bootId, acked }, { bootId: change.bootId, from: `supervisor replica ${change.replicaId}` });
  }

  async function refresh(): Promise<void> {
    const ids = new Set([...tables.sandboxIds(), ...(await store.sandboxes()).map((s) => s.sandboxId)]);
    // Behind whatever is queued for each sandbox, so a publish never overtakes an earlier one.
    for (const id of ids) enqueue(id, 'publish sandbox', () => publish(id));
    await writer.flush();
  }

  return {
    async start() {
      unsubscribe = store.subscribe(onChange);
      for (const stored of await store.sandboxes()) tables.adopt(stored.sandboxId, stored.generation, configOf(stored));
      await refresh();
    },
    async refresh() {
      await refresh();
    },
    admitted(sandboxId) {
      enqueue(sandboxId, 'publish sandbox', () => publish(sandboxId));
    },
    close() {
      unsubscribe?.();
    },
  };
}
