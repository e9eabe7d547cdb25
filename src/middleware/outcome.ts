// What one middleware stage came to, as every caller records it: the closed sets an event may carry, one invocation
// record per entry that ran, and the reason-code grammar a denial may repeat. Values only.

import type { MiddlewareEntry } from '../policy/types.js';

/** Where in the traffic an implementation is asked: a request before credentials, a client text message, an answer. */
export const MIDDLEWARE_BINDINGS = ['http-request', 'websocket-message', 'http-response'] as const;
export type MiddlewareBinding = (typeof MIDDLEWARE_BINDINGS)[number];

/** How a stage ended: its decision, or a failure. */
export const MIDDLEWARE_DECISIONS = ['allow', 'deny', 'failed'] as const;
export type MiddlewareDecision = (typeof MIDDLEWARE_DECISIONS)[number];

/**
 * Why a stage failed; `on_error` then decides whether the traffic goes on without it. The last three are an external
 * service's: it could not be reached (or has not shaken hands), did not answer in time, or answered outside the protocol.
 */
export const MIDDLEWARE_FAILURES = ['payload-too-large', 'non-utf8', 'capacity', 'uninspectable', 'unavailable', 'timeout', 'invalid-result'] as const;
export type MiddlewareFailure = (typeof MIDDLEWARE_FAILURES)[number];

/** Largest reason code, in bytes. */
export const MAX_REASON_CODE_BYTES = 64;
const REASON_CODE = /^[a-z][a-z0-9_]*$/;

/** A reason code boundary may repeat to the workload and the log: `[a-z][a-z0-9_]*`, 1-64 bytes. */
export function isReasonCode(code: string): boolean {
  return code.length >= 1 && code.length <= MAX_REASON_CODE_BYTES && REASON_CODE.test(code);
}

/** An audit-safe finding: a type boundary owns and how many times it was seen (never the matched text). */
export interface MiddlewareFinding {
  readonly type: string;
  readonly count: number;
  /** What the finding is about when the type alone does not say (the reverse canary's credential keys); never a value. */
  readonly subject?: string;
}

/** One entry's run on one request or message: one record each in the decision event. */
export interface MiddlewareInvocation {
  /** The entry's key in network_middlewares. */
  readonly key: string;
  /** `middleware` as the policy names it. */
  readonly implementation: string;
  readonly binding: MiddlewareBinding;
  readonly decision: MiddlewareDecision;
  /** The body or message was changed. */
  readonly transformed: boolean;
  readonly failure?: MiddlewareFailure;
  /** A failure under on_error: fail_open: the traffic went on without this stage. */
  readonly failedOpen?: boolean;
  /** A deny's reason code, when valid (isReasonCode). */
  readonly reasonCode?: string;
  readonly findings?: readonly MiddlewareFinding[];
}

/** The record of a failed entry; `failedOpen` when its on_error let the traffic go on. */
export function failedInvocation(entry: MiddlewareEntry, binding: MiddlewareBinding, failure: MiddlewareFailure): MiddlewareInvocation {
  return { key: entry.key, implementation: entry.middleware, binding, decision: 'failed', transformed: false, failure, failedOpen: entry.onError === 'fail_open' };
}

/** An invocation as the event's `unmapped.middlewares[]` item: snake_case, empty parts left out. */
export function invocationFields(i: MiddlewareInvocation): Record<string, unknown> {
  const out: Record<string, unknown> = { key: i.key, implementation: i.implementation, binding: i.binding, decision: i.decision, transformed: i.transformed };
  if (i.failure !== undefined) out.failure = i.failure;
  if (i.failedOpen === true) out.failed_open = true;
  if (i.reasonCode !== undefined) out.reason_code = i.reasonCode;
  // Flat: the event keeps three levels of unmapped objects, and an invocation already sits two deep.
  if (i.findings !== undefined && i.findings.length > 0) {
    out.findings = i.findings.map((f) => f.type).join(',');
    out.finding_count = i.findings.reduce((sum, f) => sum + f.count, 0);
  }
  return out;
}
