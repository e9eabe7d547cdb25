// What /readyz says, from the parts' own states: a pure function of what the composition root holds, so the
// rule (every reason listed, ready only with none) is in one place and the root only gathers the inputs.

import type { CaptureState } from './boundary-types.js';
import type { AttachedReadiness } from '../control/attached.js';
import type { Readiness } from '../telemetry/admin.js';
import type { GrantStatus } from '../grants/runner.js';

export interface ReadinessInputs {
  readonly started: boolean;
  readonly closing: boolean;
  readonly hasPolicy: boolean;
  /** Policy DNS not serving (only counted once started: before that `starting` says it). */
  readonly dnsProblem: string | undefined;
  /** Transparent capture: a reason only when required; the body says how it stands in every mode. */
  readonly capture: CaptureState;
  readonly generation: number;
  readonly policyHash: string;
  /** Attached mode only. */
  readonly attached: AttachedReadiness | undefined;
  /** Why the interception CA is unavailable; undefined when it is loaded. */
  readonly caProblem: string | undefined;
  /** Why processes cannot be identified while the policy needs them (proxy/identity-gate.ts), or undefined. */
  readonly identityProblem: string | undefined;
  /** Every token grant's state: one without a valid token makes boundary not ready (docs/credentials.md#token-grants). */
  readonly tokenGrants: readonly GrantStatus[];
}

export function composeReadiness(input: ReadinessInputs): Readiness {
  const reasons: string[] = [];
  if (!input.started) reasons.push('starting');
  if (input.closing) reasons.push('closing');
  if (!input.hasPolicy) reasons.push('no-policy');
  if (input.dnsProblem !== undefined && input.started) reasons.push(input.dnsProblem);
  const { capture } = input;
  if (capture.mode === 'required' && capture.problem !== undefined && input.started) reasons.push(capture.problem);
  if (input.identityProblem !== undefined && input.started) reasons.push(input.identityProblem);
  const { attached } = input;
  if (attached !== undefined) reasons.push(...attached.reasons);
  if (input.started && input.tokenGrants.some((grant) => grant.state === 'fetching' || grant.state === 'unavailable')) reasons.push('token-grant-unavailable');
  return {
    ready: reasons.length === 0,
    reasons,
    generation: input.generation,
    policyHash: input.policyHash,
    ...(attached === undefined
      ? {}
      : {
          supervisor: attached.supervisor,
          lastError: attached.lastError,
          reconnect: attached.reconnect,
          controlCertificate: attached.certificate,
          warnings: attached.warnings,
        }),
    interception: input.caProblem === undefined ? 'ready' : `unavailable: ${input.caProblem}`,
    ...(input.tokenGrants.length === 0 ? {} : { tokenGrants: input.tokenGrants.map((grant) => ({ ...grant, usableForSeconds: Math.floor(grant.usableForSeconds) })) }),
    capture: {
      mode: capture.mode,
      state: capture.mode === 'off' ? 'off' : capture.problem === undefined ? 'ready' : 'unavailable',
      ...(capture.problem === undefined ? {} : { problem: capture.problem }),
    },
  };
}
