// The one interface every middleware implementation offers the chain: what it is bound to, its payload limit, and
// one call per request body and per client WebSocket text message. Types only.

import type { Endpoint, MiddlewareEntry } from '../policy/types.js';
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

/** The request a body or message belongs to, as the client sent it (before credentials). */
export interface MiddlewareRequest {
  readonly host: string;
  readonly port: number;
  /** Canonical path without the query, placeholders shown as [CREDENTIAL]: what credential bindings match. */
  readonly path: string;
  /** The request target as received (origin- or absolute-form, query included). */
  readonly target: string;
  /** Flat `[name, value, ...]` as received. */
  readonly headers: readonly string[];
  /** The policy endpoint that allowed it; its credential_binding binds credentials too. */
  readonly endpoint: Endpoint | undefined;
}

/** One body checked as it streams: bytes go on only once released; a deny stops the body before them. */
export interface BodyStream {
  /** The findings that deny the request (empty: none so far). */
  feed(chunk: Buffer): readonly MiddlewareFinding[];
  release(): Buffer;
  /** The end of the body: what was held back. */
  flush(): Buffer;
  /** The reason code of a deny. */
  readonly reasonCode: string;
}

export interface MiddlewareImplementation {
  readonly bindings: ReadonlySet<MiddlewareBinding>;
  /** Largest body or message the implementation takes; a larger one fails the stage. */
  readonly maxPayloadBytes: number;
  /** A request's whole body (empty when it has none), after policy allowed it. */
  evaluateBody(body: Buffer, request: MiddlewareRequest): EntryResult;
  /** The head alone, for an implementation that reads it (a WebSocket upgrade, a body it will not see); else absent. */
  evaluateHead?(request: MiddlewareRequest): EntryResult;
  /** A body too large to hold, read as it streams (after evaluateHead allowed the head); else such a body fails. */
  streamBody?(request: MiddlewareRequest): BodyStream;
  /** A client text message, after policy allowed it; `request` is the WebSocket upgrade's. */
  evaluateText(text: string, request: MiddlewareRequest): TextResult;
}

/** An entry with the implementation it runs, fixed when the upgrade was admitted. */
export interface BoundMiddleware {
  readonly entry: MiddlewareEntry;
  readonly implementation: MiddlewareImplementation;
  /** The upgrade request, which each message is evaluated with. */
  readonly request: MiddlewareRequest;
}
