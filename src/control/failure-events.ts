// The control loop's audit events: an attach attempt that failed (NET:FAIL) and a session that ended
// (NET:CLOSE), built from the ControlFailure that says why. Pure: client.ts emits what these return.

import type { AuditEvent, Severity } from '../telemetry/event.js';
import type { ControlFailure } from './dial.js';

interface ControlAddress {
  readonly host: string;
  readonly port: number;
}

interface FailureFacts {
  readonly failure: ControlFailure;
  /** False when the supervisor refused with `retryable: false`: trying again cannot help until it is fixed. */
  readonly retryable?: boolean | undefined;
}

/** `unmapped.error`: kind and message; a refusal also says whether retrying can help, as a field to filter on. */
function errorFields({ failure, retryable }: FailureFacts): Readonly<Record<string, unknown>> {
  if (failure.kind !== 'refused-by-supervisor') return { kind: failure.kind, message: failure.message };
  return { kind: failure.kind, message: failure.message, retryable: retryable !== false };
}

/** MED for what the loop retries (and for `superseded`, at warn as the loop's own line); HIGH (logged at error) when the supervisor said retrying will not help. */
function severityOf({ failure, retryable }: FailureFacts): Severity {
  return failure.kind === 'refused-by-supervisor' && retryable === false ? 'HIGH' : 'MED';
}

/** NET:FAIL for an attempt that never reached admission. `attempt` counts failed attempts since start. */
export function attachFailedEvent(options: FailureFacts & { address: ControlAddress; supervisor: string; attempt: number }): AuditEvent {
  const { address, failure } = options;
  return {
    class: 'NET',
    activity: 'FAIL',
    severity: severityOf(options),
    engine: 'control',
    dst: { host: address.host, port: address.port },
    message: `attach to supervisor ${options.supervisor} failed (${failure.kind}): ${failure.message}`,
    unmapped: { error: errorFields(options), attempt: options.attempt },
  };
}

/** NET:CLOSE for an admitted session that ended: with its failure, or LOW with the note of a clean end. */
export function sessionEndedEvent(options: { address: ControlAddress; failure: ControlFailure | undefined; note: string }): AuditEvent {
  const { address, failure } = options;
  return {
    class: 'NET',
    activity: 'CLOSE',
    severity: failure === undefined ? 'LOW' : severityOf({ failure }),
    engine: 'control',
    dst: { host: address.host, port: address.port },
    message: `supervisor session ended: ${failure?.message ?? options.note}`,
    ...(failure === undefined ? {} : { unmapped: { error: errorFields({ failure }) } }),
  };
}
