// The answers network middlewares give the workload (docs/policy.md#network-middlewares): 403 middleware_denied naming
// the entry and its reason code, 403 middleware_failed (503 when no turn was free). Fixed sentences only.
// Values; proxy/answer.ts writes them.

import { type Denial, denial } from './denials.js';

/** Suggested wait before a retry when middleware capacity was full. */
const CAPACITY_RETRY_AFTER_SECONDS = 1;

/** What every middleware answer says about the request: the path is the canonical one, placeholders shown as [CREDENTIAL]. */
export interface MiddlewareRequestFacts {
  readonly policy: string | undefined;
  readonly method: string;
  readonly path: string;
  readonly host: string;
  readonly port: number;
  readonly binary: string | undefined;
}

function fields(facts: MiddlewareRequestFacts): Record<string, unknown> {
  const { policy, method, path, host, port, binary } = facts;
  return { policy: policy ?? null, layer: 'l7', method, path, host, port, ...(binary === undefined ? {} : { binary }) };
}

/** A stage denied the request (or blocked its response before the head went out). `reasonCode` only when valid. */
export function middlewareDeniedDenial(facts: MiddlewareRequestFacts, entry: string, reasonCode: string | undefined): Denial {
  return denial(
    403,
    'middleware_denied',
    { detail: 'denied by a network middleware', ...fields(facts), middleware: entry, ...(reasonCode === undefined ? {} : { reason_code: reasonCode }) },
    ` by network middleware ${entry}`,
    facts.policy,
  );
}

/** A fail_closed stage failed: it could not read the body (too large, not UTF-8) or had no turn to. */
export function middlewareFailedDenial(facts: MiddlewareRequestFacts): Denial {
  return denial(403, 'middleware_failed', { detail: 'a network middleware could not evaluate the request', ...fields(facts) }, ': network middleware failed', facts.policy);
}

/** A response stage failed under fail_closed before anything of the answer was sent: the workload gets a 502 instead. */
export function responseDeliveryFailedDenial(facts: MiddlewareRequestFacts): Denial {
  return denial(502, 'response_delivery_failed', { detail: 'a network middleware could not evaluate the response', ...fields(facts) }, ': response middleware failed', facts.policy);
}

/** No turn for the request's body before it was read: the middleware capacity is full. */
export function middlewareCapacityDenial(facts: MiddlewareRequestFacts): Denial {
  const d = denial(503, 'middleware_failed', { detail: 'network middleware capacity is full; retry shortly', ...fields(facts) }, ': network middleware capacity full', facts.policy);
  return { ...d, retryAfterSeconds: CAPACITY_RETRY_AFTER_SECONDS };
}

/** A connection a fail_closed entry selects but can never inspect (tls: skip, raw TCP, bytes that are not HTTP). */
export function middlewareUninspectableDenial(target: string): Denial {
  return denial(403, 'middleware_failed', { detail: `${target} is selected by a network middleware that cannot inspect this traffic` }, `: network middleware cannot inspect ${target}`);
}
