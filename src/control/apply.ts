// Applies what the supervisor delivers (admission snapshot, policy/credentials/settings pushes) through
// the same policy store and credential target as standalone mode, one at a time in arrival (generation)
// order, and says what to acknowledge. Never touches sockets; session.ts feeds it decoded messages.

import { BoundaryError, type Issue } from '../shared/errors.js';
import type { Policy } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import { createApplyQueue } from './apply-queue.js';
import {
  type AdmittedMessage,
  type ControlSettings,
  type CredentialsPush,
  DEFAULT_SETTINGS,
  type PolicyPush,
  type SettingsPush,
  type StatusError,
  type StatusMessage,
  type WireMiddlewareService,
  type WireProvider,
} from './messages.js';

/** The part of policy/store.ts's PolicyStore that applying needs. */
export interface PolicyTarget {
  current(): Policy;
  hasPolicy(): boolean;
  /** Stamps `generation` (the supervisor's) when it is newer than the current one; see policy/store.ts. */
  swap(policy: Policy, generation?: number): Policy;
}

/** Where delivered credentials go: credentials/source.ts's StaticCredentialSource fits as is. */
export interface CredentialTarget {
  /** Throws (CREDENTIALS_INVALID) and keeps the last good set when the providers are invalid. */
  replace(providers: readonly WireProvider[]): unknown;
}

/** Where delivered middleware service registrations go (the root's middleware registry, through wire-middleware.ts). */
export interface MiddlewareTarget {
  /** Rejects (CONFIG_INVALID) and keeps the services registered before when one is invalid. */
  replace(services: readonly WireMiddlewareService[]): Promise<void>;
}

interface ApplyDeps {
  readonly store: PolicyTarget;
  readonly credentials?: CredentialTarget | undefined;
  readonly middleware?: MiddlewareTarget | undefined;
  /** May compile off the event loop (policy/parse-off-thread.ts): the policy in force serves until it settles. */
  readonly parsePolicy: (text: string, options?: { source?: string }) => Policy | Promise<Policy>;
  /** The deny-all policy published as a quarantine when a push fails in fail_closed mode. */
  readonly emptyPolicy: () => Policy;
  /** Reload checks run before a swap (standalone mode's reloadIssues); any issue fails the candidate. */
  readonly preflight?: ((previous: Policy, next: Policy) => readonly Issue[]) | undefined;
  readonly sink: AuditSink;
  readonly now: () => number;
  /** Names the supervisor in events (`supervisor:<host:port>`). */
  readonly source?: string;
}

const APPLY_RESULTS = ['applied', 'unchanged', 'ignored', 'failed'] as const;
type ApplyResult = (typeof APPLY_RESULTS)[number];

export interface ApplyOutcome {
  readonly result: ApplyResult;
  /** What to POST to /v1/status; absent when nothing is to be acknowledged (a stale push). */
  readonly status?: StatusMessage;
}

export interface ApplyState {
  /** A supervisor-delivered policy is in force (not the quarantine). */
  readonly effective: boolean;
  readonly quarantined: boolean;
  /** Supervisor generation of the last policy processed (applied, unchanged or failed). */
  readonly generation: number | undefined;
  /** Hash of the delivered policy in force. */
  readonly policyHash: string | undefined;
  /** The policy store's own generation (what decisions carry). */
  readonly localGeneration: number;
  readonly effectiveSince: number | undefined;
  readonly credentialsHash: string | undefined;
  readonly settings: ControlSettings;
  readonly lastError: StatusError | undefined;
}

interface Held {
  readonly heldPolicyHash?: string;
  readonly heldGeneration?: number;
  readonly heldCredentialsHash?: string;
}

/**
 * Every apply* call queues behind the ones before it, so a push that arrives while an older one compiles waits
 * and both are applied, and their outcomes settle, in the order they came: each processed generation gets its ack.
 */
export interface ControlApplier {
  /** Rejects (CONTROL_MESSAGE_INVALID) for a snapshot that omits a policy this boundary does not hold. */
  applyAdmitted(message: AdmittedMessage): Promise<ApplyOutcome[]>;
  applyPolicy(message: PolicyPush): Promise<ApplyOutcome>;
  applyCredentials(message: CredentialsPush): Promise<ApplyOutcome>;
  applySettings(message: SettingsPush): Promise<ApplyOutcome>;
  /** Settles once everything queued so far was applied: held() and state() are then up to date. */
  settled(): Promise<void>;
  /**
   * Shutdown: a compile in flight and everything queued end as 'ignored', with nothing swapped, quarantined or
   * acknowledged, so the drain never waits for a compile. Idempotent.
   */
  close(): void;
  held(): Held;
  state(): ApplyState;
}

/** What a message that is not applied (stale, or arriving during shutdown) settles to: nothing to acknowledge. */
const IGNORED: ApplyOutcome = Object.freeze({ result: 'ignored' });

export function createControlApplier(deps: ApplyDeps): ControlApplier {
  const source = deps.source ?? 'supervisor';
  let effective = false;
  let quarantined = false;
  let policyGeneration: number | undefined;
  let credentialsGeneration: number | undefined;
  let settingsGeneration: number | undefined;
  let policyHash: string | undefined;
  let credentialsHash: string | undefined;
  let settings: ControlSettings = DEFAULT_SETTINGS;
  let effectiveSince: number | undefined;
  let lastError: StatusError | undefined;
  // One message at a time: the next waits for the previous one's compile, so generations never overtake.
  const queue = createApplyQueue();

  // The store makes the policy current before it notifies subscribers; a throwing subscriber is
  // reported by the store's owner, and must not make the applier believe the swap did not happen.
  // Stamped with the supervisor's generation: decisions, events and /readyz then name the number the supervisor does.
  function swap(policy: Policy, generation: number): Policy {
    try {
      return deps.store.swap(policy, generation);
    } catch {
      return deps.store.current();
    }
  }

  /** The policy in force is the supervisor's at `generation` too (it moved for another part): stamp it so. */
  function restamp(generation: number): void {
    const current = deps.store.current();
    if (effective && generation > current.generation) swap(current, generation);
  }

  function status(generation: number, hash: string, error?: StatusError): StatusMessage {
    const base = { kind: 'status' as const, generation, policyHash: hash };
    const withCredentials = credentialsHash === undefined ? base : { ...base, credentialsHash };
    return error === undefined ? { ...withCredentials, state: 'effective' } : { ...withCredentials, state: 'failed', error };
  }

  async function installPolicy(generation: number, hash: string, text: string): Promise<ApplyOutcome> {
    if (effective && hash === policyHash) {
      policyGeneration = generation;
      restamp(generation);
      deps.sink.emit(configEvent('LOADED', 'INFO', `policy generation ${generation} unchanged (hash matches); not re-applied`, {
        result: 'unchanged',
        generation: deps.store.current().generation,
        policyHash: hash,
        controlGeneration: generation,
        source,
      }));
      return { result: 'unchanged', status: status(generation, hash) };
    }
    let candidate: Policy | undefined;
    try {
      // Undefined: close() came first, and the candidate is dropped unseen.
      candidate = await queue.abandonable(() => deps.parsePolicy(text, { source: `${source} generation ${generation}` }));
      if (candidate === undefined) return IGNORED;
      const issues = deps.preflight?.(deps.store.current(), candidate) ?? [];
      if (issues.length > 0) {
        throw new BoundaryError('POLICY_INVALID', issues.map((i) => `${i.path}: ${i.message}`).join('; '), { issues });
      }
    } catch (err) {
      return failPolicy(generation, hash, err);
    }
    // The generation counts as processed only once its outcome is known: held() never names a compile in flight.
    policyGeneration = generation;
    if (effective && candidate.hash === policyHash) {
      // The supervisor hashes with the same parser, but a differing label must not force a reload.
      restamp(generation);
      return { result: 'unchanged', status: status(generation, candidate.hash) };
    }
    const stamped = swap(candidate, generation);
    effective = true;
    quarantined = false;
    policyHash = candidate.hash;
    effectiveSince = deps.now();
    lastError = undefined;
    deps.sink.emit(configEvent('LOADED', 'INFO', `policy generation ${generation} from ${source} is effective`, {
      result: 'applied',
      generation: stamped.generation,
      policyHash: candidate.hash,
      controlGeneration: generation,
      source,
    }));
    return { result: 'applied', status: status(generation, candidate.hash) };
  }

  function failPolicy(generation: number, hash: string, err: unknown): ApplyOutcome {
    policyGeneration = generation;
    const code = err instanceof BoundaryError ? err.code : 'POLICY_INVALID';
    const error: StatusError = { kind: 'policy', code, message: messageOf(err) };
    lastError = error;
    let detail = 'the previous policy stays in force (retain_last_valid)';
    // With nothing previously effective, retaining would still be deny-all: always fail closed then.
    if (settings.failureMode === 'fail_closed' || !effective) {
      swap(deps.emptyPolicy(), generation);
      effective = false;
      quarantined = true;
      policyHash = undefined;
      detail = 'deny-all quarantine published (fail_closed)';
    }
    deps.sink.emit(configEvent('FAILED', 'MED', `policy generation ${generation} from ${source} failed: ${error.message}; ${detail}`, {
      result: 'failed',
      generation: deps.store.current().generation,
      policyHash: hash,
      controlGeneration: generation,
      source,
      error,
    }));
    return { result: 'failed', status: status(generation, hash, error) };
  }

  function installCredentials(generation: number, hash: string, values: readonly WireProvider[] | undefined): ApplyOutcome {
    credentialsGeneration = generation;
    if (hash === credentialsHash || values === undefined) return { result: 'unchanged' };
    try {
      deps.credentials?.replace(values);
    } catch (err) {
      const error: StatusError = { kind: 'credentials', message: messageOf(err) };
      lastError = error;
      deps.sink.emit(configEvent('FAILED', 'MED', `credentials generation ${generation} failed: ${error.message}`, {
        result: 'failed',
        controlGeneration: generation,
        source,
        error,
      }));
      return { result: 'failed', status: status(policyGeneration ?? generation, policyHash ?? '-', error) };
    }
    credentialsHash = hash;
    // Names only: values are secrets and never reach an event.
    deps.sink.emit(configEvent('LOADED', 'INFO', `credentials generation ${generation} from ${source} applied (${values.length} providers)`, {
      result: 'applied',
      controlGeneration: generation,
      credentialsHash: hash,
      source,
    }));
    return { result: 'applied' };
  }

  /**
   * Makes the delivered services the registered ones (absent: none) before the policy that names them is parsed and
   * admitted. Refused: the error, and the push fails as a policy that does not load would.
   */
  async function register(services: readonly WireMiddlewareService[] | undefined): Promise<{ refused: unknown } | undefined> {
    try {
      await deps.middleware?.replace(services ?? []);
      return undefined;
    } catch (err) {
      return { refused: err };
    }
  }

  async function admit(message: AdmittedMessage): Promise<ApplyOutcome[]> {
    // A snapshot is authoritative for this session: its generation becomes the baseline for pushes.
    settings = message.settings;
    settingsGeneration = message.generation;
    const outcomes: ApplyOutcome[] = [];
    // Credentials first, so a policy that names new credentials finds them in place.
    outcomes.push(installCredentials(message.generation, message.credentialsHash, message.credentials));
    const registered = await register(message.middleware);
    if (registered !== undefined) {
      outcomes.push(failPolicy(message.generation, message.policyHash, registered.refused));
      return outcomes;
    }
    if (message.policy === undefined) {
      if (!effective || message.policyHash !== policyHash) {
        throw new BoundaryError(
          'CONTROL_MESSAGE_INVALID',
          `admission omitted the policy but hash ${message.policyHash} is not the one held (${policyHash ?? 'none'})`,
        );
      }
      policyGeneration = message.generation;
      restamp(message.generation);
      outcomes.push({ result: 'unchanged', status: status(message.generation, message.policyHash) });
    } else {
      outcomes.push(await installPolicy(message.generation, message.policyHash, message.policy));
    }
    return outcomes;
  }

  async function policyPushed(message: PolicyPush): Promise<ApplyOutcome> {
    if (policyGeneration !== undefined && message.generation <= policyGeneration) return IGNORED;
    const registered = await register(message.middleware);
    if (registered !== undefined) return failPolicy(message.generation, message.policyHash, registered.refused);
    return installPolicy(message.generation, message.policyHash, message.policy);
  }

  function credentialsPushed(message: CredentialsPush): ApplyOutcome {
    if (credentialsGeneration !== undefined && message.generation <= credentialsGeneration) return IGNORED;
    const outcome = installCredentials(message.generation, message.credentialsHash, message.credentials);
    if (outcome.status !== undefined || policyGeneration === undefined || policyHash === undefined) return outcome;
    return { result: outcome.result, status: status(policyGeneration, policyHash) };
  }

  function settingsPushed(message: SettingsPush): ApplyOutcome {
    if (settingsGeneration !== undefined && message.generation <= settingsGeneration) return IGNORED;
    settingsGeneration = message.generation;
    settings = message.settings;
    return { result: 'applied' };
  }

  return {
    applyAdmitted: (message) => queue.inOrder(() => admit(message), []),
    applyPolicy: (message) => queue.inOrder(() => policyPushed(message), IGNORED),
    applyCredentials: (message) => queue.inOrder(() => credentialsPushed(message), IGNORED),
    applySettings: (message) => queue.inOrder(() => settingsPushed(message), IGNORED),
    settled: () => queue.settled(),
    close: () => queue.close(),
    held() {
      const held: { heldPolicyHash?: string; heldGeneration?: number; heldCredentialsHash?: string } = {};
      if (effective && policyHash !== undefined) held.heldPolicyHash = policyHash;
      if (policyGeneration !== undefined) held.heldGeneration = policyGeneration;
      if (credentialsHash !== undefined) held.heldCredentialsHash = credentialsHash;
      return held;
    },
    state() {
      return {
        effective,
        quarantined,
        generation: policyGeneration,
        policyHash,
        localGeneration: deps.store.current().generation,
        effectiveSince,
        credentialsHash,
        settings,
        lastError,
      };
    },
  };
}

function configEvent(activity: 'LOADED' | 'FAILED', severity: 'INFO' | 'MED', message: string, unmapped: Record<string, unknown>) {
  const { generation, policyHash, ...rest } = unmapped;
  return {
    class: 'CONFIG' as const,
    activity,
    severity,
    engine: 'control' as const,
    message,
    ...(typeof generation === 'number' ? { generation } : {}),
    ...(typeof policyHash === 'string' ? { policyHash } : {}),
    unmapped: rest,
  };
}

function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text === '' ? 'unknown error' : text;
}
