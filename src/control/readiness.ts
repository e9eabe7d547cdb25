// What /readyz says about the control channel in attached mode, derived from ControlClient.state().
// Pure: no clock of its own (times come from the state), no I/O.

import type { ControlError, ControlState } from './client.js';

export interface ControlReadiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  /** `connected since <ISO>` or `disconnected since <ISO>`. */
  readonly supervisor: string;
  readonly lastError: ControlError | undefined;
}

/**
 * What /readyz says in attached mode: not ready until a delivered policy is effective; from then on
 * ready through supervisor outages (last known good keeps enforcing), with the outage and last error shown.
 */
export function controlReadiness(state: ControlState): ControlReadiness {
  const reasons: string[] = [];
  const last = state.lastError === undefined ? '' : `; last error ${state.lastError.kind}: ${state.lastError.message}`;
  if (state.phase === 'closed') reasons.push('control channel closed');
  if (state.policy.quarantined) {
    reasons.push(`policy generation ${state.policy.generation} from ${state.supervisor} failed (${state.policy.lastError?.message ?? 'unknown error'}); deny-all in force`);
  } else if (!state.policy.effective) {
    reasons.push(`waiting for first policy from supervisor ${state.supervisor}${last}`);
  }
  const since = state.phase === 'attached' ? state.connectedSince : state.disconnectedSince;
  const supervisor =
    state.phase === 'attached'
      ? `connected since ${iso(since)}`
      : since === undefined
        ? state.phase
        : `disconnected since ${iso(since)}`;
  return { ready: reasons.length === 0, reasons, supervisor, lastError: state.lastError };
}

function iso(ms: number | undefined): string {
  return ms === undefined ? 'unknown' : new Date(ms).toISOString();
}
