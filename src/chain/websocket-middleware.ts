// A client WebSocket text message through the network middlewares its upgrade selected (docs/policy.md#network-
// middlewares), in ascending order, each seeing the text as the ones before it left it; after policy decided the
// message and before credentials are written into it. A deny closes the socket with 1008; a failure under
// fail_closed closes it too, and under fail_open turns that entry off for the rest of the connection. Pure.

import type { BoundMiddleware } from '../middleware/implementation.js';
import { failedInvocation, isReasonCode, type MiddlewareInvocation } from '../middleware/outcome.js';

export type TextMiddlewareResult =
  | { readonly verdict: 'allow'; readonly text: string; readonly invocations: readonly MiddlewareInvocation[] }
  | { readonly verdict: 'deny' | 'fail'; readonly entry: string; readonly invocations: readonly MiddlewareInvocation[] };

/**
 * Runs `middlewares` on one text message. `disabled` holds the keys of entries that failed open earlier on this
 * connection; a new such failure is added to it. `invocations` lists what each entry did, for the message's event.
 */
export function runTextMiddlewares(middlewares: readonly BoundMiddleware[], disabled: Set<string>, text: string): TextMiddlewareResult {
  let current = text;
  const invocations: MiddlewareInvocation[] = [];
  for (const { entry, implementation, request } of middlewares) {
    if (disabled.has(entry.key)) continue;
    const result = implementation.evaluateText(current, request);
    if (result.verdict === 'failed') {
      invocations.push(failedInvocation(entry, 'websocket-message', result.failure));
      if (entry.onError === 'fail_closed') return { verdict: 'fail', entry: entry.key, invocations };
      disabled.add(entry.key);
      continue;
    }
    const transformed = result.verdict === 'allow' && result.text !== undefined;
    const reasonCode = result.verdict === 'deny' && result.reasonCode !== undefined && isReasonCode(result.reasonCode) ? result.reasonCode : undefined;
    invocations.push({
      key: entry.key,
      implementation: entry.middleware,
      binding: 'websocket-message',
      decision: result.verdict,
      transformed,
      findings: result.findings,
      ...(reasonCode === undefined ? {} : { reasonCode }),
    });
    if (result.verdict === 'deny') return { verdict: 'deny', entry: entry.key, invocations };
    if (result.text !== undefined) current = result.text;
  }
  return { verdict: 'allow', text: current, invocations };
}

/** Whether a message's run is worth an event: something was changed, found, denied or failed (allowing passes quietly). */
export function notable(invocations: readonly MiddlewareInvocation[]): boolean {
  return invocations.some((i) => i.decision !== 'allow' || i.transformed || (i.findings?.length ?? 0) > 0);
}
