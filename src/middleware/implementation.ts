// The one interface every middleware implementation offers the chain, built-in or external service: what it is bound
// to, its payload limit, one call per request body and per client WebSocket text message, and for a service bound to
// answers, one evaluation per response. Types only.

import type { Endpoint, MiddlewareEntry } from '../policy/types.js';
import type { MiddlewareBinding, MiddlewareFailure, MiddlewareFinding } from './outcome.js';

/** The admitted request as an external service is shown it. */
export interface MiddlewareTarget {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
  readonly method: string;
  /** Canonical, without the query. */
  readonly path: string;
  /** Without the `?`; empty for a response's preflight. */
  readonly query: string;
}

/**
 * What an implementation is told about a request besides its body. An external service is sent `target`, `headers`,
 * `requestId` and `binary`, never `request`, which built-ins read (the reverse canary: every part as received).
 */
export interface RequestView {
  readonly entry: MiddlewareEntry;
  /** The request as the client sent it (before credentials); for built-ins only. */
  readonly request: MiddlewareRequest;
  readonly target: MiddlewareTarget;
  /** Lower-cased names in wire order, credential, routing and framing fields left out (middleware/service-headers.ts). */
  readonly headers: readonly (readonly [string, string])[];
  /** Ties a request's calls (and its response's) together in a service's log. */
  readonly requestId: string;
  readonly binary: string | undefined;
}

/** One header change a service asked for, checked (middleware/service-headers.ts) before any is applied. */
export type HeaderMutation =
  | { readonly op: 'write'; readonly name: string; readonly value: string; readonly onExisting: 'append' | 'overwrite' | 'skip' }
  | { readonly op: 'remove'; readonly name: string };

/** What one entry decided about one request: allow (with a replacement body), deny, or a failure for on_error. */
export type EntryResult =
  | {
      readonly verdict: 'allow';
      /** A replacement body; undefined keeps the body as it was. */
      readonly body: Buffer | undefined;
      readonly findings: readonly MiddlewareFinding[];
      /** Header changes, applied all together; none from a built-in. */
      readonly mutations?: readonly HeaderMutation[];
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

/** The response head a response stage is shown. */
export interface ResponseHead {
  readonly status: number;
  /** Flat `[name, value, ...]` as received. */
  readonly headers: readonly string[];
}

/** What a response stage decided: pass, block (403 before the head went out), or a failure (502). */
export type ResponseResult =
  | { readonly verdict: 'allow'; readonly findings: readonly MiddlewareFinding[] }
  | { readonly verdict: 'deny'; readonly reasonCode: string | undefined; readonly findings: readonly MiddlewareFinding[] }
  | { readonly verdict: 'failed'; readonly failure: MiddlewareFailure };

/** One response under evaluation: the preflight on its head, then the whole body when the service asked for it. */
export interface ResponseEvaluation {
  /** `body` when the service wants the whole body (and it can be held), else the result. */
  preflight(head: ResponseHead, bodyHoldable: boolean): Promise<{ readonly next: 'body' } | { readonly next: 'done'; readonly result: ResponseResult }>;
  body(body: Buffer): Promise<ResponseResult>;
  /** Ends the call (best effort); idempotent. */
  end(): void;
}

export interface MiddlewareImplementation {
  readonly bindings: ReadonlySet<MiddlewareBinding>;
  /** Largest body or message the implementation takes; a larger one fails the stage. */
  readonly maxPayloadBytes: number;
  /** A request's whole body (empty when it has none), after policy allowed it. */
  evaluateBody(body: Buffer, view: RequestView): EntryResult | Promise<EntryResult>;
  /** The head alone, for an implementation that reads it (a WebSocket upgrade, a body it will not see); else absent. */
  evaluateHead?(view: RequestView): EntryResult;
  /** A body too large to hold, read as it streams (after evaluateHead allowed the head); else such a body fails. */
  streamBody?(view: RequestView): BodyStream;
  /** A client text message, after policy allowed it; `view` is the upgrade's, the same object for the whole connection. */
  evaluateText(text: string, view: RequestView): TextResult | Promise<TextResult>;
  /** An answer to an allowed request, for an implementation bound to responses. */
  evaluateResponse?(view: RequestView): ResponseEvaluation;
}

/** A built-in: it answers at once, and reads no more of the request than its body or message. */
export interface SyncMiddleware extends MiddlewareImplementation {
  evaluateBody(body: Buffer): EntryResult;
  evaluateText(text: string): TextResult;
}

/** An entry with the implementation it runs, fixed when the upgrade was admitted. */
export interface BoundMiddleware {
  readonly entry: MiddlewareEntry;
  readonly implementation: MiddlewareImplementation;
  /** The upgrade as each message is evaluated with it. */
  readonly view: RequestView;
}
