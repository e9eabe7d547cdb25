// A client WebSocket text message through the network middlewares its upgrade selected (docs/policy.md#network-
// middlewares), in ascending order, each seeing the text as the ones before it left it; after policy decided the
// message and before credentials are written into it. A deny closes the socket with 1008; a failure under
// fail_closed closes it too, and under fail_open turns that entry off for the rest of the connection. Pure but for
// the calls an external service's implementation makes.

import type { BoundMiddleware, TextResult } from '../middleware/implementation.js';
import { failedInvocation, isReasonCode, type MiddlewareInvocation } from '../middleware/outcome.js';
import type { MiddlewareEntry } from '../policy/types.js';

export type TextMiddlewareResult =
  | { readonly verdict: 'allow'; readonly text: string; readonly invocations: readonly MiddlewareInvocation[] }
  | { readonly verdict: 'deny' | 'fail'; readonly entry: string; readonly invocations: readonly MiddlewareInvocation[] };

interface RunState {
  current: string;
  readonly invocations: MiddlewareInvocation[];
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => typeof (value as { then?: unknown }).then === 'function';

/**
 * Runs `middlewares` on one text message. `disabled` holds the keys of entries that failed open earlier on this
 * connection; a new such failure is added to it. `invocations` lists what each entry did, for the message's event.
 * Synchronous while every entry answers at once (the built-ins); a promise once an external service is asked.
 */
export function runTextMiddlewares(middlewares: readonly BoundMiddleware[], disabled: Set<string>, text: string): TextMiddlewareResult | Promise<TextMiddlewareResult> {
  return runFrom(middlewares, 0, disabled, { current: text, invocations: [] });
}

function runFrom(middlewares: readonly BoundMiddleware[], from: number, disabled: Set<string>, state: RunState): TextMiddlewareResult | Promise<TextMiddlewareResult> {
  for (let i = from; i < middlewares.length; i++) {
    const { entry, implementation, view } = middlewares[i]!;
    if (disabled.has(entry.key)) continue;
    const result = implementation.evaluateText(state.current, view);
    if (isPromise(result)) {
      return result
        .catch((): TextResult => ({ verdict: 'failed', failure: 'unavailable' }))
        .then((settled) => applyResult(entry, settled, disabled, state) ?? runFrom(middlewares, i + 1, disabled, state));
    }
    const ended = applyResult(entry, result, disabled, state);
    if (ended !== undefined) return ended;
  }
  return { verdict: 'allow', text: state.current, invocations: state.invocations };
}

/** Records one entry's result; the run's end when it denied or failed closed, else undefined (the next entry runs). */
function applyResult(entry: MiddlewareEntry, result: TextResult, disabled: Set<string>, state: RunState): TextMiddlewareResult | undefined {
  const { invocations } = state;
  if (result.verdict === 'failed') {
    invocations.push(failedInvocation(entry, 'websocket-message', result.failure));
    if (entry.onError === 'fail_closed') return { verdict: 'fail', entry: entry.key, invocations };
    disabled.add(entry.key);
    return undefined;
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
  if (result.text !== undefined) state.current = result.text;
  return undefined;
}

/** Whether a message's run is worth an event: something was changed, found, denied or failed (allowing passes quietly). */
export function notable(invocations: readonly MiddlewareInvocation[]): boolean {
  return invocations.some((i) => i.decision !== 'allow' || i.transformed || (i.findings?.length ?? 0) > 0);
}
