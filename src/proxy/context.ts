// What every proxy adapter is handed: the policy store, lookup gate, sinks, upstream dispatchers and the
// per-socket tunnel scopes. Built once by server.ts from the boundary's deps; holds no policy logic.

import type { Socket } from 'node:net';
import type { ConnectionChain } from '../chain/connection-chain.js';
import type { RequestChain } from '../chain/request-chain.js';
import type { ResponseChain } from '../chain/response-chain.js';
import type { SyntheticPool } from '../net/synthetic.js';
import type { CredentialSource } from '../credentials/source.js';
import { checkDestination, type DestinationRequest, type DestinationResult } from '../net/destination.js';
import { type AuthorityResult, type HostCache, type HostForm, memoisedAuthorityParser } from '../net/host.js';
import type { LookupGate } from '../net/lookup-gate.js';
import type { SelfAddresses } from '../net/ssrf.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { PolicyStore } from '../policy/store.js';
import type { Endpoint } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import type { Interception } from '../tls/intercept.js';
import type { DialFunction } from '../chain/dial.js';
import type { IdentityGate } from '../chain/identity-gate.js';
import type { ProxyMetrics } from './metrics.js';
import type { H1Pool } from '../http1/h1-client.js';
import type { TunnelRegistry } from './tunnel.js';
import type { Upstreams } from './upstream.js';

/** An inspected tunnel's target: every request read from it is checked against this CONNECT target. */
export interface TunnelTarget {
  readonly host: string;
  readonly port: number;
  /** True after TLS termination: the default request port is then 443, else 80. */
  readonly tls: boolean;
  readonly addresses: readonly string[];
  /** The processes holding the connection when the tunnel opened (docs/identity.md): its claim until a request re-checks. */
  readonly identity?: IdentityClaim | undefined;
  /** The client's accepted socket: requests inside re-check who holds it (docs/identity.md#kept-alive-connections). */
  readonly socket?: Socket | undefined;
}

/** An inspected HTTP/1.1 tunnel: its target and the upstream client its requests go through. */
export interface TunnelScope extends TunnelTarget {
  readonly client: H1Pool;
}

/** An inspected tunnel whose client spoke HTTP/2 (ALPN h2, or the cleartext preface): h2-server.ts serves it. */
export interface H2Tunnel {
  readonly target: TunnelTarget;
  /** The socket dialled at CONNECT (or capture) time; the upstream's first connection. */
  readonly upstream: Socket;
  /** The client's address, for the request events. */
  readonly src: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined };
}

export interface ProxyContext {
  readonly store: PolicyStore;
  /** The boundary's one lookup gate (net/lookup-gate.ts), shared with policy DNS: every destination resolves through it. */
  readonly lookups: LookupGate;
  /** The boundary's host cache (net/host.ts createHostCache); undefined parses every host afresh. */
  readonly hosts?: HostCache | undefined;
  /** This proxy's request-authority parse memos (createAuthorityParsers); l7.ts parses every Host through them. */
  readonly authorities: AuthorityParsers;
  readonly sink: AuditSink;
  readonly metrics: ProxyMetrics;
  readonly logger: Logger;
  readonly upstreams: Upstreams;
  readonly dial: DialFunction | undefined;
  readonly connectTimeoutMs: number;
  readonly tunnelIdleTimeoutMs: number;
  /** An HTTP/2 answer that moves nothing this long while it waits on the client is reset (http2/stall-watch.ts). */
  readonly h2StallTimeoutMs: number;
  readonly allowLoopback: boolean;
  readonly interception: Interception;
  readonly tunnels: TunnelRegistry;
  readonly scopes: WeakMap<Socket, TunnelScope>;
  /** Read per request (scopeFor) and per connection (the uninspected-route guard); never cached. */
  readonly credentials: CredentialSource;
  /** Binary identity (identity-gate.ts); createProxyServer always sets one, hand-built test contexts check no binaries. */
  readonly identity?: IdentityGate;
  /** A denial's policy key under a peer's header name too (`--peer-policy-header`); undefined: X-Boundary-Policy only. */
  readonly peerPolicyHeader?: string | undefined;
  /** The request path every HTTP adapter runs (chain/request-chain.ts). */
  readonly chain: RequestChain;
  /** The stages an allowed request's answer passes on its way back (chain/response-chain.ts). */
  readonly responses: ResponseChain;
  /** The connection path of CONNECT (chain/connection-chain.ts). */
  readonly connectChain: ConnectionChain;
  /** The connection path of transparent capture through `pool`'s mappings. */
  captureChain(pool: SyntheticPool): ConnectionChain;
  selfAddresses(): SelfAddresses;
  /** Hands a (decrypted or plaintext) tunnel socket to the shared HTTP/1.1 server. */
  serveHttp(socket: Socket): void;
  /** Hands a tunnel socket whose client speaks HTTP/2 to the shared HTTP/2 server (h2-server.ts); `onClose` when it ends. */
  serveH2(socket: Socket, tunnel: H2Tunnel, onClose: () => void): void;
}

/** Pure parse memos of request authorities, one per default port (net/host.ts bounds each): parse results only. */
export interface AuthorityParsers {
  readonly http: (text: string) => AuthorityResult;
  readonly https: (text: string) => AuthorityResult;
}

/** One proxy's authority memos; made where the proxy's parts are made and handed in through ProxyContext. */
export function createAuthorityParsers(): AuthorityParsers {
  return { http: memoisedAuthorityParser(80), https: memoisedAuthorityParser(443) };
}

export interface DestinationTarget {
  readonly host: string;
  readonly kind: HostForm;
  readonly port: number;
  readonly endpoint: Endpoint | undefined;
  /** The allow decision's endpoints, for the lookup gate. */
  readonly endpoints: readonly Endpoint[];
}

function request(ctx: ProxyContext, target: DestinationTarget): DestinationRequest {
  const { host, kind, port, endpoint, endpoints } = target;
  return { host, kind, port, endpoint, endpoints, lookups: ctx.lookups, hosts: ctx.hosts, allowLoopback: ctx.allowLoopback, selfAddresses: ctx.selfAddresses() };
}

/** The SSRF check with this proxy's settings: now when nothing must be resolved, else once DNS answered (once, A only). */
export function destination(ctx: ProxyContext, target: DestinationTarget): DestinationResult | Promise<DestinationResult> {
  return checkDestination(request(ctx, target));
}
