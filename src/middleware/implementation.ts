// The one interface every middleware implementation offers the chain: what it is bound to, its payload limit, and
// one call per request body and per client WebSocket text message. Types only.

import type { MiddlewareEntry } from '../policy/types.js';
import type { MiddlewareBinding, MiddlewareFailure, MiddlewareFinding } from './outcome.js';

/** What one entry decided about one request: allow (with a replacement body), deny, or a failure for on_error. */
export type EntryResult =
  | {
      readonly verdict: 'allow';
      /** A replacement body; undefined keeps the body as it was. */
      readonly body: Buffer | undefined;
      readonly findings: readonly MiddlewareFinding[];
    }
  | { readonly verdict: 'deny'; readonly reasonCode: string | undefined; readonly findings: readonly MiddlewareFinding[] }
  | { readonly verdict: 'failed'; readonly failure: MiddlewareFailure };

/** One client text message's result: allow (with a replacement), deny (close 1008), or a failure. */
export type TextResult =
  | { readonly verdict: 'allow'; readonly text: string | undefined; readonly findings: readonly MiddlewareFinding[] }
  | { readonly verdict: 'deny'; readonly reasonCode: string | undefined; readonly findings: readonly MiddlewareFinding[] }
  | { readonly verdict: 'failed'; readonly failure: MiddlewareFailure };

export interface MiddlewareImplementation {
  readonly bindings: ReadonlySet<MiddlewareBinding>;
  /** Largest body or message the implementation takes; a larger one fails the stage. */
  readonly maxPayloadBytes: number;
  /** A request's whole body (empty when it has none), after policy allowed it. */
  evaluateBody(body: Buffer): EntryResult;
  /** A client text message, after policy allowed it. */
  evaluateText(text: string): TextResult;
}

/** An entry with the implementation it runs, fixed when the upgrade was admitted. */
export interface BoundMiddleware {
  readonly entry: MiddlewareEntry;
  readonly implementation: MiddlewareImplementation;
}
