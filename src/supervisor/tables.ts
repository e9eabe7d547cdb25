// The supervisor's per-sandbox and per-instance tables: generations, admission (idempotent, newest
// session supersedes; the superseded session's boot id and ack state are reported), acks, detachment and withdrawal with a recorded reason. Pure state over an
// injected clock: no sockets, no timers, no files.

import type {
  AdmittedMessage,
  AttachMessage,
  ControlSettings,
  StatusError,
  StatusMessage,
  WireProvider,
} from '../control/messages.js';

const MAX_INSTANCES = 20_000;
const MAX_INSTANCES_PER_SANDBOX = 1_024;
const MAX_WITHDRAWN_RECORDS = 256;

/** What one sandbox should run: resolved from the policies folder and the credentials file. */
export interface SandboxConfig {
  readonly policyText: string;
  readonly policyHash: string;
  readonly providers: readonly WireProvider[];
  readonly credentialsHash: string;
  readonly settings: ControlSettings;
}

export interface InstanceRecord {
  readonly sandboxId: string;
  readonly instanceId: string;
  bootId: string;
  version: string;
  attached: boolean;
  sessionId: string | undefined;
  sessionStartedAt: number | undefined;
  /** The current session delivered at least one status ack: its boundary applied what it was sent. */
  sessionAcked: boolean;
  detachedAt: number | undefined;
  /** The generation this instance's session has been sent (admission or pushes). */
  sentGeneration: number;
  effectiveGeneration: number | undefined;
  policyHash: string | undefined;
  lastStatus: StatusMessage['state'] | undefined;
  lastError: StatusError | undefined;
  lastStatusAt: number | undefined;
  eventsReceived: number;
  eventsDropped: number;
}

interface SandboxRecord {
  readonly sandboxId: string;
  generation: number;
  config: SandboxConfig;
  readonly instances: Map<string, InstanceRecord>;
}

export interface WithdrawnRecord {
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly reason: string;
  readonly at: number;
}

export interface InstanceRow {
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly attached: boolean;
  readonly sessionAgeMs: number | null;
  readonly generation: number;
  readonly effectiveGeneration: number | null;
  readonly policyHash: string | null;
  readonly lastStatus: string | null;
  readonly lastError: StatusError | null;
  readonly bootId: string;
  readonly version: string;
  readonly detachedForMs: number | null;
  readonly eventsReceived: number;
  readonly eventsDropped: number;
}

/** The session an admission replaced, as it was just before: the supervisor decides from this whether two processes fight. */
export interface SupersededSession {
  readonly sessionId: string;
  readonly bootId: string;
  readonly acked: boolean;
}

type AdmitResult =
  | { readonly ok: true; readonly admitted: AdmittedMessage; readonly instance: InstanceRecord; readonly superseded: SupersededSession | undefined }
  | { readonly ok: false; readonly code: 'too-many-instances'; readonly message: string };

export interface ConfigChange {
  readonly generation: number;
  readonly policy: boolean;
  readonly credentials: boolean;
  readonly settings: boolean;
}

export function createTables(options: { now: () => number }) {
  const { now } = options;
  const sandboxes = new Map<string, SandboxRecord>();
  const bySession = new Map<string, InstanceRecord>();
  const withdrawn: WithdrawnRecord[] = [];
  let instanceCount = 0;

  // A known sandbox keeps its configuration here: changes arrive through adopt(), from the store every replica
  // shares, so an attach never moves a generation on its own.
  function sandboxFor(sandboxId: string, config: SandboxConfig): SandboxRecord {
    let record = sandboxes.get(sandboxId);
    if (record === undefined) {
      record = { sandboxId, generation: 1, config, instances: new Map() };
      sandboxes.set(sandboxId, record);
    }
    return record;
  }

  function differences(previous: SandboxConfig, config: SandboxConfig): Omit<ConfigChange, 'generation'> {
    return {
      policy: previous.policyHash !== config.policyHash,
      credentials: previous.credentialsHash !== config.credentialsHash,
      settings: previous.settings.failureMode !== config.settings.failureMode,
    };
  }

  function newInstance(attach: AttachMessage): InstanceRecord {
    return {
      sandboxId: attach.sandboxId,
      instanceId: attach.instanceId,
      bootId: attach.bootId,
      version: attach.version,
      attached: false,
      sessionId: undefined,
      sessionStartedAt: undefined,
      sessionAcked: false,
      detachedAt: undefined,
      sentGeneration: 0,
      effectiveGeneration: undefined,
      policyHash: undefined,
      lastStatus: undefined,
      lastError: undefined,
      lastStatusAt: undefined,
      eventsReceived: 0,
      eventsDropped: 0,
    };
  }

  return {
    /** Admits an attach: idempotent per (sandbox, instance); the newest session supersedes the old. */
    admit(attach: AttachMessage, config: SandboxConfig, sessionId: string): AdmitResult {
      const record = sandboxFor(attach.sandboxId, config);
      // What the sandbox runs now: `config` only seeds a sandbox this replica had not seen.
      const current = record.config;
      let instance = record.instances.get(attach.instanceId);
      if (instance === undefined) {
        if (instanceCount >= MAX_INSTANCES || record.instances.size >= MAX_INSTANCES_PER_SANDBOX) {
          if (record.instances.size === 0) sandboxes.delete(record.sandboxId);
          return { ok: false, code: 'too-many-instances', message: `instance limit reached (${MAX_INSTANCES} total, ${MAX_INSTANCES_PER_SANDBOX} per sandbox)` };
        }
        instance = newInstance(attach);
        record.instances.set(attach.instanceId, instance);
        instanceCount += 1;
      }
      // A boundary that held a later generation (this supervisor restarted) moves the counter past it,
      // so its next push is strictly newer; an equal hash keeps the generation it already holds.
      if (attach.heldGeneration !== undefined && attach.heldGeneration >= record.generation && attach.heldGeneration < Number.MAX_SAFE_INTEGER) {
        record.generation = attach.heldPolicyHash === current.policyHash ? attach.heldGeneration : attach.heldGeneration + 1;
      }
      const superseded: SupersededSession | undefined =
        instance.sessionId !== undefined && instance.sessionId !== sessionId
          ? { sessionId: instance.sessionId, bootId: instance.bootId, acked: instance.sessionAcked }
          : undefined;
      if (superseded !== undefined) bySession.delete(superseded.sessionId);
      Object.assign(instance, {
        bootId: attach.bootId,
        version: attach.version,
        attached: true,
        sessionId,
        sessionStartedAt: now(),
        sessionAcked: false,
        detachedAt: undefined,
        sentGeneration: record.generation,
      });
      if (attach.lastError !== undefined) instance.lastError = attach.lastError;
      bySession.set(sessionId, instance);
      const admitted: AdmittedMessage = {
        kind: 'admitted',
        sessionId,
        generation: record.generation,
        policyHash: current.policyHash,
        ...(attach.heldPolicyHash === current.policyHash ? {} : { policy: current.policyText }),
        credentialsHash: current.credentialsHash,
        ...(attach.heldCredentialsHash === current.credentialsHash ? {} : { credentials: current.providers }),
        settings: current.settings,
      };
      return { ok: true, admitted, instance, superseded };
    },
    /**
     * The sandbox's configuration at `generation`, as the store holds it (created when unknown). Never moves a
     * generation back: an older one is ignored. Returns what changed when the generation moved and any part differs.
     */
    adopt(sandboxId: string, generation: number, config: SandboxConfig): ConfigChange | undefined {
      const record = sandboxFor(sandboxId, config);
      if (generation < record.generation) return undefined;
      const change = differences(record.config, config);
      const moved = generation > record.generation;
      record.generation = generation;
      record.config = config;
      if (!moved || (!change.policy && !change.credentials && !change.settings)) return undefined;
      return { generation, ...change };
    },
    status(sessionId: string, status: StatusMessage): InstanceRecord | undefined {
      const instance = bySession.get(sessionId);
      if (instance === undefined) return undefined;
      instance.lastStatus = status.state;
      instance.lastStatusAt = now();
      instance.sessionAcked = true;
      if (status.state === 'effective') {
        instance.effectiveGeneration = Math.max(instance.effectiveGeneration ?? 0, status.generation);
        instance.policyHash = status.policyHash;
        instance.lastError = undefined;
      } else {
        instance.lastError = status.error ?? { kind: 'unknown', message: 'the boundary reported failed without an error' };
      }
      return instance;
    },
    events(sessionId: string, received: number, dropped: number): void {
      const instance = bySession.get(sessionId);
      if (instance === undefined) return;
      instance.eventsReceived += received;
      instance.eventsDropped += dropped;
    },
    /** The session ended: the instance stays, detached, until it re-attaches or its deadline passes. */
    detach(sessionId: string): InstanceRecord | undefined {
      const instance = bySession.get(sessionId);
      if (instance === undefined) return undefined;
      bySession.delete(sessionId);
      instance.attached = false;
      instance.sessionId = undefined;
      instance.sessionStartedAt = undefined;
      instance.sessionAcked = false;
      instance.detachedAt = now();
      return instance;
    },
    /** Records an instance the supervisor expects to attach (for the attach deadline). */
    expect(sandboxId: string, instanceId: string, config: SandboxConfig): InstanceRecord {
      const record = sandboxFor(sandboxId, config);
      let instance = record.instances.get(instanceId);
      if (instance === undefined) {
        instance = newInstance({ kind: 'attach', sandboxId, instanceId, bootId: 'expected', version: 'unknown' });
        instance.detachedAt = now();
        record.instances.set(instanceId, instance);
        instanceCount += 1;
      }
      return instance;
    },
    /** Frees everything held for the instance and records why; the sandbox goes when its last instance does. */
    withdraw(sandboxId: string, instanceId: string, reason: string): InstanceRecord | undefined {
      const record = sandboxes.get(sandboxId);
      const instance = record?.instances.get(instanceId);
      if (record === undefined || instance === undefined) return undefined;
      record.instances.delete(instanceId);
      instanceCount -= 1;
      if (instance.sessionId !== undefined) bySession.delete(instance.sessionId);
      if (record.instances.size === 0) sandboxes.delete(sandboxId);
      withdrawn.push({ sandboxId, instanceId, reason, at: now() });
      if (withdrawn.length > MAX_WITHDRAWN_RECORDS) withdrawn.shift();
      return instance;
    },
    bySession: (sessionId: string): InstanceRecord | undefined => bySession.get(sessionId),
    sandbox: (sandboxId: string): SandboxRecord | undefined => sandboxes.get(sandboxId),
    sandboxIds: (): string[] => [...sandboxes.keys()],
    instance: (sandboxId: string, instanceId: string): InstanceRecord | undefined => sandboxes.get(sandboxId)?.instances.get(instanceId),
    instanceCount: (): number => instanceCount,
    rows(): InstanceRow[] {
      const t = now();
      const rows: InstanceRow[] = [];
      for (const record of sandboxes.values()) {
        for (const i of record.instances.values()) {
          rows.push({
            sandboxId: i.sandboxId,
            instanceId: i.instanceId,
            attached: i.attached,
            sessionAgeMs: i.sessionStartedAt === undefined ? null : t - i.sessionStartedAt,
            generation: record.generation,
            effectiveGeneration: i.effectiveGeneration ?? null,
            policyHash: i.policyHash ?? null,
            lastStatus: i.lastStatus ?? null,
            lastError: i.lastError ?? null,
            bootId: i.bootId,
            version: i.version,
            detachedForMs: i.detachedAt === undefined ? null : t - i.detachedAt,
            eventsReceived: i.eventsReceived,
            eventsDropped: i.eventsDropped,
          });
        }
      }
      return rows;
    },
    withdrawn: (): readonly WithdrawnRecord[] => [...withdrawn],
  };
}

export type Tables = ReturnType<typeof createTables>;
