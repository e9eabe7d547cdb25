// The control loop's one line per attach (NET:OPEN, INFO, engine control): which supervisor (as dialled, the address
// it resolved to and the certificate it presented), at which generation, how long after start or the lost session,
// and after how many failed attempts. Pure: session.ts emits what this returns.

import { type CertificateSummary, certificateText } from '../pki/certificate-summary.js';
import type { AuditEvent } from '../telemetry/event.js';

export interface AttachFacts {
  readonly address: { readonly host: string; readonly port: number };
  /** `host:port` as dialled. */
  readonly supervisor: string;
  /** The address the connection went to, when the dialled host is a name. */
  readonly remoteAddress: string | undefined;
  readonly certificate: CertificateSummary | undefined;
  readonly sessionId: string;
  /** The supervisor's generation in the admission; the policy in force is stamped with it. */
  readonly generation: number;
  readonly policyHash: string;
  /** What the admission did to the policy: applied, unchanged (held already) or failed. */
  readonly policy: string;
  /** False for the first attach of this process. */
  readonly reattach: boolean;
  /** Since start (first attach) or since the previous session was lost. */
  readonly afterMs: number;
  /** Attempts that failed since then. */
  readonly failedAttempts: number;
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

export function attachedEvent(facts: AttachFacts): AuditEvent {
  const { address, certificate, generation, remoteAddress } = facts;
  const resolved = remoteAddress !== undefined && remoteAddress !== address.host ? remoteAddress : undefined;
  const via = resolved === undefined ? '' : ` (${resolved})`;
  const identity = certificate === undefined ? 'no certificate read' : `certificate ${certificateText(certificate)}`;
  const since = facts.reattach ? 'the session was lost' : 'start';
  const attempts = `${facts.failedAttempts} failed attempt${facts.failedAttempts === 1 ? '' : 's'}`;
  return {
    class: 'NET',
    activity: 'OPEN',
    severity: 'INFO',
    engine: 'control',
    dst: { host: address.host, ...(resolved === undefined ? {} : { ip: resolved }), port: address.port },
    message: `${facts.reattach ? 're-attached' : 'attached'} to supervisor ${facts.supervisor}${via}, ${identity}, at generation ${generation} (policy ${facts.policy}), ${seconds(facts.afterMs)} after ${since}, after ${attempts}`,
    generation,
    policyHash: facts.policyHash,
    unmapped: {
      supervisor: facts.supervisor,
      ...(remoteAddress === undefined ? {} : { supervisor_address: remoteAddress }),
      supervisor_certificate: certificate ?? null,
      session_id: facts.sessionId,
      policy_result: facts.policy,
      reattach: facts.reattach,
      after_ms: facts.afterMs,
      failed_attempts: facts.failedAttempts,
    },
  };
}
