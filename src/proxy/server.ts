// The proxy listener: a net.Server that admits connections up to its limit and hands them to one HTTP/1.1 server
// (http1/h1-server.ts: node's llhttp, strict) shared by forward requests, CONNECT and every inspected tunnel, so
// all requests meet the same parser, timeouts and evaluator. Owns sockets, not policy.

import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { Registry } from 'prom-client';
import type { PlaceholderFamily } from '../credentials/placeholder.js';
import type { CredentialSource } from '../credentials/source.js';
import type { LookupGate } from '../net/lookup-gate.js';
import type { HostCache } from '../net/host.js';
import { prepareSelfAddresses, type SelfAddress, type SelfAddresses } from '../net/ssrf.js';
import type { PolicyStore } from '../policy/store.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import type { Interception } from '../tls/intercept.js';
import type { BinaryIdentityMode, IdentitySource } from '../identity/source.js';
import { createIdentityGate } from '../chain/identity-gate.js';
import { createAdmission } from './admission.js';
import { createConnectHandler } from './connect.js';
import { connectionRouteOf } from '../chain/middleware-route.js';
import { createMiddlewareRegistry, type MiddlewareRegistry } from '../middleware/registry.js';
import { type AuthorityParsers, destination, type ProxyContext, type TunnelScope } from './context.js';
import { createCaptureChain, createConnectChain, type ConnectionChainDeps } from '../chain/connection-chain.js';
import { createRequestChain } from '../chain/request-chain.js';
import type { PermanentCheck } from '../chain/stages/always-blocked.js';
import { permanentRefusal } from '../net/destination.js';
import { requestOutcome } from '../chain/event.js';
import { emitOutcome } from '../chain/events.js';
import { parserRefusal } from '../chain/parser-refusal.js';
import { createResponseChain } from '../chain/response-chain.js';
import type { DialFunction } from '../chain/dial.js';
import type { ClientErrorReason, RefusedConnectionReason } from '../chain/events.js';
import { createProxyMetrics, type ProxyMetrics } from './metrics.js';
import { createRequestHandler } from './forward.js';
import { refuseH2Preface } from './h2-refusal.js';
import { createH2Server, type H2Server } from './h2-server.js';
import { destroyAfterLinger } from './linger.js';
import { refuseConnection } from './refusal.js';
import { createTunnelRegistry, type TunnelRegistry } from './tunnel.js';
import { CONNECTIONS_CHECK_INTERVAL_MS, MAX_HEAD_BYTES, type ProxyLimits } from './limits.js';
import { createUpstreams } from './upstream.js';
import { clientCertificateFor } from '../credentials/client-cert.js';
import { createUpgradeHandler } from './websocket.js';
import { type ClientError, type ClientErrorControl, createH1Server, type H1Server } from '../http1/h1-server.js';

interface ProxyServerOptions {
  readonly host: string;
  readonly port: number;
  readonly limits: ProxyLimits;
  readonly store: PolicyStore;
  /** The one lookup gate, shared with policy DNS (built once by the composition root). */
  readonly lookups: LookupGate;
  readonly hosts?: HostCache | undefined;
  /** Request-authority parse memos (context.ts createAuthorityParsers), made once by the composition root. */
  readonly authorities: AuthorityParsers;
  readonly sink: AuditSink;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly dial?: DialFunction | undefined;
  readonly allowLoopback: boolean;
  readonly interception: Interception;
  readonly upstreamCaPem?: string | undefined;
  /** Other listeners of this boundary (admin, DNS): never valid upstream targets. */
  readonly otherSelfAddresses: () => readonly SelfAddress[];
  /** Standalone file source or the supervisor-fed static source. */
  readonly credentials: CredentialSource;
  /** Wall clock (ms), for the validity of client certificates presented upstream. */
  readonly now?: (() => number) | undefined;
  /** The placeholder family resolved (default openshell); the other is refused. */
  readonly placeholderFamily?: PlaceholderFamily | undefined;
  /** A denial's policy key also under this header name (`--peer-policy-header`). */
  readonly peerPolicyHeader?: string | undefined;
  /** Binary identity (docs/identity.md): the mode, and where processes are looked up. */
  readonly identity: { readonly mode: BinaryIdentityMode; readonly source: IdentitySource | undefined };
  /** Network middlewares (docs/policy.md#network-middlewares); default the built-ins with their own capacity. */
  readonly middleware?: MiddlewareRegistry | undefined;
}

export interface ProxyServer {
  start(): Promise<void>;
  close(): Promise<void>;
  /** The drain deadline passed (boundary-shutdown.ts SHUTDOWN_DRAIN_MS): destroy every socket now, grace or not. */
  forceClose(): void;
  address(): { host: string; port: number };
  readonly tunnels: TunnelRegistry;
  /** What the adapters share; transparent capture (capture.ts) runs on the same one. */
  readonly context: ProxyContext;
  readonly metrics: ProxyMetrics;
  /** Whether host:port is refused whatever the policy (net/destination.ts permanentRefusal on this run's switches). */
  readonly permanent: PermanentCheck;
}

function clientErrorStatus(code: string | undefined): number {
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  return 400;
}

function clientErrorReason(code: string | undefined): ClientErrorReason {
  if (code === 'HPE_HEADER_OVERFLOW') return 'head-too-large';
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'timeout';
  if (code === 'ECONNRESET') return 'reset';
  return 'malformed';
}

export function createProxyServer(options: ProxyServerOptions): ProxyServer {
  const { limits, logger } = options;
  const metrics = createProxyMetrics(options.registry);
  metrics.connectionsLimit.set(limits.maxConnections);
  const tunnels = createTunnelRegistry({
    // A credentialed route, or one a network middleware selects, is inspected even on an L4 endpoint: re-evaluation
    // must see the same choice.
    routeOf: (decision, host, port, policy) => connectionRouteOf(options.credentials, policy, decision, host, port),
  });
  const upstreams = createUpstreams({
    dial: options.dial,
    connectTimeoutMs: limits.connectTimeoutMs,
    extraCaPem: options.upstreamCaPem,
    metrics,
    clientCertificate: (host, port) => clientCertificateFor(options.credentials.current(), host, port),
    now: options.now,
  });
  const admission = createAdmission({
    listener: 'proxy',
    maxConnections: limits.maxConnections,
    perSourcePercent: limits.maxConnectionsPerSourcePercent,
    firstByteTimeoutMs: limits.firstByteTimeoutMs,
    eitherWay: false,
    metrics,
    onClosed(open) {
      metrics.connections.dec();
      if (open === 0) onDrained?.();
    },
  });
  // Refused connections are not served and do not count against the limit (refusal.ts).
  const refused = new Set<Socket>();
  let bound: { host: string; port: number } = { host: options.host, port: options.port };
  let selfCache: SelfAddresses | undefined;
  let selfOthers: readonly SelfAddress[] | undefined;
  let selfBound: { host: string; port: number } | undefined;
  let onDrained: (() => void) | undefined;
  let closing: Promise<void> | undefined;

  const identity = createIdentityGate(options.identity);
  const selfAddresses = (): SelfAddresses => ctx.selfAddresses();
  // docs/destinations.md#always-blocked: the one answer for what no policy can open, also handed to explain.
  const permanent: PermanentCheck = (host, port) => permanentRefusal(host, port, { allowLoopback: options.allowLoopback, selfAddresses: selfAddresses(), hosts: options.hosts });
  const connectionDeps = (): ConnectionChainDeps => ({
    store: options.store,
    hosts: options.hosts,
    metrics,
    identity,
    credentials: options.credentials,
    interception: options.interception,
    tunnels,
    dial: options.dial,
    connectTimeoutMs: limits.connectTimeoutMs,
    allowLoopback: options.allowLoopback,
    selfAddresses,
    permanent,
    destination: (target) => destination(ctx, target),
    inTunnel: (c) => ctx.scopes.has(c.socket),
  });
  // One registry for the request stage and the response stage: their services and the capacity they share.
  const middleware = options.middleware ?? createMiddlewareRegistry({ credentials: options.credentials });
  const ctx: ProxyContext = {
    store: options.store,
    lookups: options.lookups,
    hosts: options.hosts,
    authorities: options.authorities,
    sink: options.sink,
    metrics,
    logger,
    upstreams,
    dial: options.dial,
    connectTimeoutMs: limits.connectTimeoutMs,
    tunnelIdleTimeoutMs: limits.tunnelIdleTimeoutMs,
    h2StallTimeoutMs: limits.h2StallTimeoutMs,
    allowLoopback: options.allowLoopback,
    interception: options.interception,
    tunnels,
    scopes: new WeakMap<Socket, TunnelScope>(),
    credentials: options.credentials,
    identity,
    peerPolicyHeader: options.peerPolicyHeader,
    chain: createRequestChain({
      store: options.store,
      authorities: options.authorities,
      metrics,
      identity,
      credentials: options.credentials,
      permanent,
      placeholderFamily: options.placeholderFamily,
      destination: (target) => destination(ctx, target),
      middleware,
    }),
    responses: createResponseChain({ sink: options.sink, middleware }),
    connectChain: createConnectChain(connectionDeps()),
    captureChain: (pool) => createCaptureChain({ ...connectionDeps(), pool }),
    // Per request: rebuilt only when the bound address or the other listeners' list changes.
    selfAddresses() {
      const others = options.otherSelfAddresses();
      if (selfCache === undefined || others !== selfOthers || bound !== selfBound) {
        selfBound = bound;
        selfOthers = others;
        // Parsed here, once per change, not per request (net/ssrf.ts prepareSelfAddresses).
        selfCache = prepareSelfAddresses([{ ip: bound.host, port: bound.port }, ...others]);
      }
      return selfCache;
    },
    serveHttp(socket) {
      http.serve(socket);
      socket.resume();
    },
    serveH2(socket, tunnel, onClose) {
      h2.serve(socket, tunnel, onClose);
    },
  };
  const h2: H2Server = createH2Server(ctx);

  const handleRequest = createRequestHandler(ctx);
  // Header count is checked by http1/framing.ts, never capped by the server. A client that half-closes after its
  // request (`curl` with a body from stdin, `nc -q`) still gets its answer.
  const http: H1Server = createH1Server(
    {
      maxHeadBytes: MAX_HEAD_BYTES,
      headersTimeoutMs: limits.headersTimeoutMs,
      requestTimeoutMs: limits.requestTimeoutMs,
      keepAliveTimeoutMs: limits.keepAliveTimeoutMs,
      checkIntervalMs: CONNECTIONS_CHECK_INTERVAL_MS,
    },
    {
      request: handleRequest,
      connect: createConnectHandler(ctx),
      upgrade: createUpgradeHandler(ctx),
      clientError,
    },
  );

  function clientError(err: ClientError, socket: Socket, conn: ClientErrorControl): void {
    // docs/destinations.md#http2: HTTP/2 sent to the forward proxy itself (no CONNECT) is refused in HTTP/2.
    if (err.code === 'HPE_PAUSED_H2_UPGRADE' && socket.writable && !ctx.scopes.has(socket)) {
      refuseH2Preface(ctx, socket);
      return;
    }
    const reason = clientErrorReason(err.code);
    metrics.clientErrors.inc({ reason });
    const inFlight = conn.inFlight();
    // Answered with a bare status below unless a request before the refused bytes is still being answered.
    const answered = socket.writable && !inFlight;
    if (reason === 'malformed' || reason === 'head-too-large') reportParserRefusal(err, socket, reason, answered ? clientErrorStatus(err.code) : undefined);
    if (err.code !== 'ECONNRESET' && socket.writable && inFlight) {
      // A request before the refused bytes is still being answered (issue 15): a 400 now would read as its
      // answer, or cut it. Its answer goes out whole, then the connection closes; the refused bytes get none.
      conn.closeAfterAnswer();
      return;
    }
    if (err.code !== 'ECONNRESET' && socket.writable) {
      const status = clientErrorStatus(err.code);
      // Destroying right after end() drops the pending write on a TLS socket whose sniffed bytes were put
      // back: the client would see a bare close instead of its 431. Destroy once the answer is out.
      destroyAfterLinger(socket);
      socket.end(
        `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
        () => socket.destroy(),
      );
      return;
    }
    socket.destroy();
  }

  /** docs/events.md#parser-refusals: the head the HTTP/1.1 server's parser (llhttp) refused gets an event (aggregated), not only a count. */
  function reportParserRefusal(err: ClientError, socket: Socket, reason: 'malformed' | 'head-too-large', status: number | undefined): void {
    const tunnel = ctx.scopes.get(socket);
    const code = err.code ?? 'HPE_UNKNOWN';
    // llhttp's reason is fixed text; the refused bytes (err.rawPacket) are never recorded.
    const why = (err as { reason?: unknown }).reason;
    const r = parserRefusal({
      adapter: tunnel === undefined ? 'forward' : 'l7',
      src: socket,
      tunnel,
      h2: false,
      method: 'UNKNOWN',
      reason: reason === 'malformed' ? 'bad-request' : 'head-too-large',
      status,
      parserError: code,
      detail: `request refused by the HTTP/1.1 parser: ${code}${typeof why === 'string' ? ` (${why})` : ''}`,
    });
    emitOutcome(options.sink, metrics, requestOutcome(r));
  }

  const refuse = (socket: Socket, reason: RefusedConnectionReason): void =>
    refuseConnection(socket, { reason, maxConnections: limits.maxConnections, perSourceLimit: admission.perSourceLimit, sink: options.sink, refused });

  const listener: NetServer = createNetServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    if (closing !== undefined) {
      metrics.refusedConnections.inc({ reason: 'too-many-connections' });
      refuse(socket, 'too-many-connections');
      return;
    }
    const admitted = admission.admit(socket);
    if (admitted !== 'admitted') {
      refuse(socket, admitted);
      return;
    }
    metrics.connections.inc();
    http.serve(socket);
  });
  listener.on('error', (err) => logger.error({ err }, 'proxy listener error'));

  function destroyAll(): void {
    for (const socket of refused) socket.destroy();
    for (const socket of admission.sockets()) socket.destroy();
  }

  return {
    tunnels,
    context: ctx,
    metrics,
    permanent,
    address: () => bound,
    forceClose() {
      tunnels.closeAll('shutdown');
      h2.close();
      destroyAll();
      http.closeAll();
      // Ends a grace wait in close(), which then finds nothing left to wait for.
      onDrained?.();
    },
    async start() {
      await new Promise<void>((resolve, reject) => {
        listener.once('error', reject);
        listener.listen(options.port, options.host, () => {
          listener.removeListener('error', reject);
          resolve();
        });
      });
      const address = listener.address();
      if (address !== null && typeof address === 'object') bound = { host: address.address, port: address.port };
      http.start();
      admission.start();
    },
    close() {
      closing ??= (async () => {
        // net.Server.close() calls back only once every accepted socket is gone: stop accepting now, wait last.
        const stopped = new Promise<void>((resolve) => listener.close(() => resolve()));
        // Tunnels are long-lived by nature: they are closed, not drained. In-flight requests get the grace.
        tunnels.closeAll('shutdown');
        http.closeIdle();
        // A refused connection has had its answer; nothing of it is worth the grace.
        for (const socket of refused) socket.destroy();
        if (admission.open() > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, limits.closeGraceMs);
            timer.unref();
            onDrained = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        // The first-byte sweep ran through the grace: a silent connection was no reason to wait.
        admission.stop();
        h2.close();
        destroyAll();
        await stopped;
        await upstreams.close();
        http.stop();
      })();
      return closing;
    },
  };
}
