// What every proxy adapter is handed: the policy store, resolver, sinks, upstream dispatchers and the
// per-socket tunnel scopes. Built once by server.ts from the boundary's deps; holds no policy logic.

import type { Socket } from 'node:net';
import type { SecureContext } from 'node:tls';
import type { CredentialSource } from '../credentials/source.js';
import { checkDestination, type ResolveFailureResult } from '../net/destination.js';
import type { HostForm } from '../net/host.js';
import type { Resolver } from '../net/resolver.js';
import type { DestinationCheck, SelfAddress } from '../net/ssrf.js';
import type { PolicyStore } from '../policy/store.js';
import type { Decision, Endpoint } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import type { DialFunction } from './dial.js';
import type { ProxyMetrics } from './events.js';
import type { H1Pool } from './h1-client.js';
import type { TunnelRegistry } from './tunnel.js';
import type { Upstreams } from './upstream.js';

/** TLS interception: unusable when the CA failed to load (inspected CONNECTs then get 503). */
export interface Interception {
  ready(): boolean;
  contextFor(host: string): Promise<SecureContext>;
}

/** An inspected tunnel: every request read from its socket is checked against this CONNECT target. */
export interface TunnelScope {
  readonly host: string;
  readonly port: number;
  /** True after TLS termination: the default request port is then 443, else 80. */
  readonly tls: boolean;
  readonly addresses: readonly string[];
  readonly client: H1Pool;
}

export interface ProxyContext {
  readonly store: PolicyStore;
  readonly resolver: Resolver;
  readonly sink: AuditSink;
  readonly metrics: ProxyMetrics;
  readonly logger: Logger;
  readonly upstreams: Upstreams;
  readonly dial: DialFunction | undefined;
  readonly connectTimeoutMs: number;
  readonly tunnelIdleTimeoutMs: number;
  readonly allowLoopback: boolean;
  readonly interception: Interception;
  readonly tunnels: TunnelRegistry;
  readonly scopes: WeakMap<Socket, TunnelScope>;
  /** Read per request (scopeFor) and per connection (the uninspected-route guard); never cached. */
  readonly credentials: CredentialSource;
  selfAddresses(): readonly SelfAddress[];
  /** Hands a (decrypted or plaintext) tunnel socket to the shared HTTP/1.1 server. */
  serveHttp(socket: Socket): void;
}

/**
 * checkDestination with this proxy's SSRF settings: a value when no DNS query is needed (IP literal, name
 * refused up front, fresh cached answer), else a promise; per-request paths await only a real query.
 */
export function destinationFor(
  ctx: ProxyContext,
  target: { host: string; kind: HostForm; port: number; endpoint: Endpoint | undefined },
): DestinationCheck | ResolveFailureResult | Promise<DestinationCheck | ResolveFailureResult> {
  return checkDestination({
    host: target.host,
    kind: target.kind,
    port: target.port,
    endpoint: target.endpoint,
    resolver: ctx.resolver,
    allowLoopback: ctx.allowLoopback,
    selfAddresses: ctx.selfAddresses(),
  });
}

/** An endpoint whose traffic must be terminated and parsed: L7 protocol or bound credentials, never tls: skip. */
export function needsInspection(endpoint: Endpoint): boolean {
  return endpoint.tls !== 'skip' && (endpoint.inspected || endpoint.credentialProvider !== undefined);
}

export function decisionNeedsInspection(decision: Decision): boolean {
  return decision.endpoints.some(needsInspection);
}
