// The refusal value every rewrite returns instead of throwing: status, the error name of docs/destinations.md#denial-responses,
// a message for the workload, and a log message and reason that never hold a key, placeholder or value.

import { UNAVAILABLE_REASONS } from './scope.js';

const CREDENTIAL_ERRORS = ['credential_endpoint_mismatch', 'credential_unavailable', 'credential_body_too_large'] as const;
type CredentialError = (typeof CREDENTIAL_ERRORS)[number];

/** Closed set for events and metric labels. */
export const REFUSAL_REASONS = [
  'endpoint-mismatch',
  ...UNAVAILABLE_REASONS,
  'leftover-marker',
  'unsafe-value',
  'path-unsafe-value',
  'multiple-authorization',
  'stale-revision',
  'encoded-body',
  'body-too-large',
  'signing-keys-missing',
  'signing-region-unknown',
  'signing-mode-unsupported',
  'signing-body-too-large',
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface RewriteRefusal {
  readonly ok: false;
  readonly status: 403 | 413 | 500;
  readonly error: CredentialError;
  /** For the JSON body sent back to the workload; may name the key the workload itself sent. */
  readonly message: string;
  /** For events and logs: never a key name, placeholder, query string or value. */
  readonly logMessage: string;
  readonly reason: RefusalReason;
}

const LOG_MESSAGES: Readonly<Record<RefusalReason, string>> = {
  'endpoint-mismatch': 'a placeholder names a credential bound to another endpoint',
  'no-authority': 'a placeholder was sent on a request without an authority',
  'unknown-key': 'a placeholder names a credential that does not exist',
  'revision-not-retained': 'a revision-pinned placeholder names a revision no longer retained',
  'identity-changed': 'a revision-pinned placeholder names a credential whose provider changed',
  'unknown-handle': 'a stable placeholder handle matches no provider',
  'ambiguous-key': 'two providers bound here hold different values for one key',
  'other-family': 'a placeholder is spelled in the other placeholder family, which this boundary does not resolve',
  'token-unavailable': 'a placeholder names a token grant that holds no valid token now (the token endpoint failed or was not reached yet)',
  'leftover-marker': 'a placeholder marker remained after rewriting',
  'unsafe-value': 'a resolved credential value cannot be written in its slot',
  'path-unsafe-value': 'a resolved credential value is not safe as a path segment',
  'multiple-authorization': 'a credential was placed in a request with more than one Authorization header',
  'stale-revision': 'the credentials changed between the decision and the upstream write',
  'encoded-body': 'a content-encoded body holds a placeholder or cannot be inspected',
  'body-too-large': 'the body is larger than the credential rewrite buffer',
  'signing-keys-missing': 'no provider bound to the SigV4 signing endpoint holds the AWS access key and secret',
  'signing-region-unknown': 'the SigV4 signing region cannot be derived from the host and signing_region is not set',
  'signing-mode-unsupported': 'the workload sent a streaming SigV4 payload that cannot be re-signed',
  'signing-body-too-large': 'the body is larger than the SigV4 signed-body buffer',
};

export function refuse(reason: RefusalReason, message: string): RewriteRefusal {
  const tooLarge = reason === 'body-too-large' || reason === 'signing-body-too-large';
  const status = reason === 'endpoint-mismatch' ? 403 : tooLarge ? 413 : 500;
  const error: CredentialError =
    reason === 'endpoint-mismatch'
      ? 'credential_endpoint_mismatch'
      : tooLarge
        ? 'credential_body_too_large'
        : 'credential_unavailable';
  return Object.freeze({ ok: false, status, error, message, logMessage: LOG_MESSAGES[reason], reason });
}

/** Keeps the most serious refusal: a binding mismatch (a HIGH finding) outranks everything else. */
export function worse(current: RewriteRefusal | undefined, next: RewriteRefusal): RewriteRefusal {
  if (current === undefined) return next;
  return current.reason !== 'endpoint-mismatch' && next.reason === 'endpoint-mismatch' ? next : current;
}
