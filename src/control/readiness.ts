// What /readyz says about the control channel in attached mode, derived from ControlClient.state().
// Pure: no clock of its own (times come from the state), no I/O.

import type { ReconnectReason } from './backoff.js';
import type { ControlError, ControlState, SupersededBy } from './client.js';

/** The /readyz reason prefix of a boundary another process superseded (client.ts stops re-attaching then). */
const CONTROL_SUPERSEDED_REASON = 'control-superseded';

/** When the client tries the supervisor again and why then; the timing fields only while it waits. */
interface ReconnectReadiness {
  /** Failed attempts since the last healthy session (a session attached too briefly counts as one). */
  readonly failedAttempts: number;
  /** ISO time of the next attempt. */
  readonly nextAttemptAt?: string;
  /** `after-healthy-session`, `backoff` (see failedAttempts) or `not-retryable` (the supervisor said so). */
  readonly reason?: ReconnectReason;
}

export interface ControlReadiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  /** `connected since <ISO>` or `disconnected since <ISO>`. */
  readonly supervisor: string;
  readonly lastError: ControlError | undefined;
  readonly reconnect: ReconnectReadiness;
}

/**
 * What /readyz says in attached mode: not ready until a delivered policy is effective; from then on
 * ready through supervisor outages (last known good keeps enforcing), with the outage and last error shown.
 */
export function controlReadiness(state: ControlState): ControlReadiness {
  const reasons: string[] = [];
  const last = state.lastError === undefined ? '' : `; last error ${state.lastError.kind}: ${state.lastError.message}`;
  if (state.phase === 'closed') reasons.push('control channel closed');
  if (state.superseded !== undefined) reasons.push(`${CONTROL_SUPERSEDED_REASON}: ${supersededMessage(state.superseded)}`);
  if (state.policy.quarantined) {
    reasons.push(`policy generation ${state.policy.generation} from ${state.supervisor} failed (${state.policy.lastError?.message ?? 'unknown error'}); deny-all in force`);
  } else if (!state.policy.effective) {
    reasons.push(`waiting for first policy from supervisor ${state.supervisor}${last}${nextAttemptText(state)}`);
  }
  const since = state.phase === 'attached' ? state.connectedSince : state.disconnectedSince;
  const supervisor =
    state.phase === 'attached'
      ? `connected since ${iso(since)}`
      : since === undefined
        ? state.phase
        : `disconnected since ${iso(since)}`;
  return { ready: reasons.length === 0, reasons, supervisor, lastError: state.lastError, reconnect: reconnectReadiness(state) };
}

/** The text /readyz and client.ts's log carry after `control-superseded: `. */
export function supersededMessage(by: SupersededBy): string {
  return `another boundary process (boot ${by.bootId}) attached as sandbox ${by.sandboxId} instance ${by.instanceId}`;
}

function reconnectReadiness(state: ControlState): ReconnectReadiness {
  const failedAttempts = state.failuresSinceHealthy;
  if (state.phase !== 'waiting' || state.nextAttemptAt === undefined || state.nextAttemptReason === undefined) return { failedAttempts };
  return { failedAttempts, nextAttemptAt: iso(state.nextAttemptAt), reason: state.nextAttemptReason };
}

function nextAttemptText(state: ControlState): string {
  const next = reconnectReadiness(state);
  if (next.nextAttemptAt === undefined) return '';
  const why = next.reason === 'backoff' ? `backoff after ${next.failedAttempts} failed attempt${next.failedAttempts === 1 ? '' : 's'}` : next.reason;
  return `; next attempt at ${next.nextAttemptAt} (${why})`;
}

function iso(ms: number | undefined): string {
  return ms === undefined ? 'unknown' : new Date(ms).toISOString();
}
