// One HTTP request as the request chain reads it and as its stages record what they found
// (docs/architecture.md#what-a-stage-may-read-and-record). The adapter fills in what it read off the wire; each stage
// writes only its own fields; the decision event is built from these fields alone (event.ts).

import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { FramingResult } from '../http1/framing.js';
import type { HostForm } from '../net/host.js';
import type { LookupRefusal } from '../net/lookup-gate.js';
import type { DestinationCheck } from '../net/ssrf.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision, Policy } from '../policy/types.js';
import type { BoundMiddleware } from '../middleware/implementation.js';
import type { MiddlewareInvocation } from '../middleware/outcome.js';
import type { UpstreamHead } from './credential-injection.js';
import type { TunnelTarget } from '../proxy/context.js';
import type { BodyHold, InspectedBody } from './inspected-body.js';
import type { McpRead } from '../jsonrpc/mcp-message.js';
import type { McpSelection } from './mcp-revision.js';
import type { CanonicalTarget } from './path.js';
import type { DialFailure } from './dial.js';
import type { ToolsListPlan } from './tools-list-filter.js';
import type { OutcomeVerdict, ReasonCode } from './events.js';
import type { Severity } from '../telemetry/event.js';
import type { Refusal } from './stage.js';

/** What the adapter read off the wire: an HTTP/1.1 message, or one HTTP/2 stream's head. */
export interface WireRequest {
  readonly httpVersion: string;
  readonly url: string;
  /** Flat `[name, value, ...]`, as received; no pseudo-headers. */
  readonly rawHeaders: readonly string[];
  /** The fields by name (built on first read for HTTP/2). */
  readonly headers: IncomingHttpHeaders;
  /** The client connection of a forward HTTP/1.1 request; absent for an HTTP/2 stream, which is always in a tunnel. */
  readonly socket?: Socket | undefined;
}

/** What the adapter does for the chain while it runs. */
export interface AdapterHooks {
  /** The body is about to be read: an HTTP/1.1 client waiting for `100 Continue` gets it now. */
  continueBody(): void;
  /** The request will go upstream: what its protocol owes first (100 Continue, trailers); true when it has a body. */
  goingUpstream(): boolean;
}

/** Where an allowed request goes, once the destination stage pinned it. */
export interface Destination {
  readonly addresses: readonly string[];
  readonly tls: boolean;
}

/** An SSRF refusal's or drop's facts, for the event. */
export interface DestinationFacts {
  readonly plan?: DestinationCheck['plan'];
  readonly check?: string;
  readonly dropped: readonly string[];
}

/** What happened once the request left the chain: the upstream's status, or why it did not answer. */
export interface UpstreamFacts {
  status: number | undefined;
  dialFailure: DialFailure | undefined;
  /** The upstream proxy's status when it refused the CONNECT. */
  proxyStatus: number | undefined;
}

/** The final result when a stage refused or the relay failed; absent while the allow stands. */
export interface Settled {
  readonly verdict: OutcomeVerdict;
  readonly reason: ReasonCode;
  readonly detail: string;
  readonly status: number | undefined;
}

export class ChainRequest {
  readonly adapter: 'forward' | 'l7';
  readonly wire: WireRequest;
  readonly hooks: AdapterHooks;
  /** The inspected tunnel the request came through; undefined for a forward request. */
  readonly tunnel: TunnelTarget | undefined;
  readonly src: { readonly ip: string | undefined; readonly port: number | undefined };
  readonly method: string;
  /** HTTP/2 stream (recorded as `http_version: 2`). */
  readonly h2: boolean;
  /** The adapter relays an upgrade (the WebSocket handshake path); elsewhere an Upgrade is a bad request. */
  readonly upgradable: boolean;
  /** gRPC and Connect streaming bodies: messages are released one by one, never held. */
  readonly streamed: boolean;
  /** HTTP/2: the HEADERS frame did not end the stream, so a body follows whether or not Content-Length says so. */
  readonly bodyFollows: boolean;
  /** The body the upstream gets: the wire body, the held body once read, or the rewritten one. */
  body: AsyncIterable<Buffer>;

  // framing
  framing: Extract<FramingResult, { ok: true }> | undefined = undefined;
  // authority
  host: string | undefined = undefined;
  port: number | undefined = undefined;
  hostForm: HostForm | undefined = undefined;
  /** The origin-form target that goes upstream: canonical on inspected and credentialed routes. */
  target = '';
  /** https after TLS termination. */
  scheme: 'http' | 'https' = 'http';
  // identity, l4
  policy: Policy | undefined = undefined;
  identity: IdentityClaim | undefined = undefined;
  l4: Decision | undefined = undefined;
  /** An L7 protocol's endpoint matched: the request is decided by method, path and (held) body. */
  inspected = false;
  /** Inspected, or a route that carries credentials: the target is canonicalised. */
  canonical = false;
  // canonical
  canon: Extract<CanonicalTarget, { ok: true }> | undefined = undefined;
  /** The canonical path as policy and logs see it (placeholders shown as `[CREDENTIAL]`), without the query. */
  path: string | undefined = undefined;
  query = '';
  /** The path as Windows/IIS would read it (`/admin.` -> `/admin`), when it differs. */
  strippedPath: string | undefined = undefined;
  // mcp-revision
  /** An MCP request: the protocol revision it is read under, and whether it was the fallback. */
  mcp: McpSelection | undefined = undefined;
  // body hold
  hold: BodyHold | undefined = undefined;
  /** What policy read of the body (or of a bodiless GraphQL GET, MCP stream or session end). */
  read: InspectedBody | undefined = undefined;
  /** An MCP body as its revision reads it; the mcp-request stage refuses what it cannot read. */
  mcpBody: McpRead | undefined = undefined;
  // mcp-request
  /** A legacy `initialize` exempt from `mcp.versions`. */
  mcpBootstrap = false;
  // l7
  decision: Decision | undefined = undefined;
  /** The decision is final (the l7 stage ran): the event names its policy, rule, endpoint and identity. */
  decided = false;
  /** The method the standing decision was made for (an override's, when that one was stricter). */
  decidedMethod: string;
  overrideMethod: string | undefined = undefined;
  /** Denials only: the query's keys (never values), for replay. */
  queryKeys: { readonly keys: readonly string[]; readonly truncated: boolean } | undefined = undefined;
  // destination
  destination: Destination | undefined = undefined;
  destinationFacts: DestinationFacts | undefined = undefined;
  /** The lookup gate kept the name from the upstream resolver. */
  lookupRefusal: LookupRefusal | undefined = undefined;
  // credentials, signing
  head: UpstreamHead | undefined = undefined;
  /** The body to send: null for none, a Buffer once held, else a stream (scanned for leftover placeholders). */
  upstreamBody: Buffer | AsyncIterable<Buffer> | null | undefined = undefined;
  /** The rewritten head's fields (a held body may change Content-Length and framing). */
  upstreamHeaders: string[] | undefined = undefined;
  /** A WebSocket handshake whose frames will be read (websocket endpoint, or credentials bound to the route). */
  websocketInspected = false;
  sigv4: Readonly<Record<string, unknown>> | undefined = undefined;
  // middleware
  /** Each network middleware entry run (or passed over) on the request, its WebSocket messages aside. */
  middleware: MiddlewareInvocation[] | undefined = undefined;
  /** The client's head as middlewares left it (a replaced body's Content-Length); else `wire.rawHeaders`. */
  requestHeaders: string[] | undefined = undefined;
  /** The entries that read this WebSocket upgrade's client text messages, in order. */
  websocketMiddlewares: readonly BoundMiddleware[] | undefined = undefined;
  credentialReason: string | undefined = undefined;
  severity: Severity | undefined = undefined;
  // the response side
  toolsList: ToolsListPlan | undefined = undefined;
  /** A parser refused the request before the chain ran (parser-refusal.ts): what it refused, for aggregation. */
  parserError: string | undefined = undefined;
  /** The answer could not be checked for echoed credentials (a content coding): it was replaced by a 502. */
  credentialResponse: 'unreadable-coding' | undefined = undefined;
  // results
  settled: Settled | undefined = undefined;
  readonly upstream: UpstreamFacts = { status: undefined, dialFailure: undefined, proxyStatus: undefined };

  constructor(init: {
    readonly adapter: 'forward' | 'l7';
    readonly wire: WireRequest;
    readonly hooks: AdapterHooks;
    readonly tunnel: TunnelTarget | undefined;
    readonly src: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined };
    readonly method: string;
    readonly h2: boolean;
    readonly upgradable: boolean;
    readonly streamed?: boolean;
    readonly bodyFollows?: boolean;
    readonly body: AsyncIterable<Buffer>;
  }) {
    this.adapter = init.adapter;
    this.wire = init.wire;
    this.hooks = init.hooks;
    this.tunnel = init.tunnel;
    this.src = { ip: init.src.remoteAddress, port: init.src.remotePort };
    this.method = init.method;
    this.decidedMethod = init.method;
    this.h2 = init.h2;
    this.upgradable = init.upgradable;
    this.streamed = init.streamed === true;
    this.bodyFollows = init.bodyFollows === true;
    this.body = init.body;
  }

  noteMiddleware(invocation: MiddlewareInvocation): void {
    if (this.middleware === undefined) this.middleware = [invocation];
    else this.middleware.push(invocation);
  }

  /** Records a refusal's result (the runner and the adapter call this; stages return refusals). */
  settle(result: Refusal | Settled): void {
    this.settled = { verdict: result.verdict, reason: result.reason, detail: result.detail, status: result.status };
  }
}
