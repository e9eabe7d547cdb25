// The proxy listener: a net.Server that admits connections up to its limit and hands them to one node:http
// server (strict llhttp, never insecureHTTPParser) shared by forward requests, CONNECT and every inspected
// tunnel, so all requests meet the same parser, timeouts and evaluator. Owns sockets, not policy.

import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { Registry } from 'prom-client';
import type { CredentialSource } from '../credentials/source.js';
import type { Resolver } from '../net/resolver.js';
import type { HostCache } from '../net/host.js';
import { prepareSelfAddresses, type SelfAddress, type SelfAddresses } from '../net/ssrf.js';
import type { PolicyStore } from '../policy/store.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import type { Interception } from '../tls/intercept.js';
import { createConnectHandler } from './connect.js';
import { credentialRoute } from './credential-injection.js';
import type { AuthorityParsers, ProxyContext, TunnelScope } from './context.js';
import { renderDenial, tooManyConnectionsDenial } from './deny.js';
import { CONNECT_TIMEOUT_MS, type DialFunction } from './dial.js';
import type { ClientErrorReason } from './events.js';
import { createProxyMetrics, type ProxyMetrics } from './metrics.js';
import { createRequestHandler } from './forward.js';
import { createTunnelRegistry, TUNNEL_IDLE_TIMEOUT_MS, type TunnelRegistry } from './tunnel.js';
import { createUpstreams } from './upstream.js';
import { createUpgradeHandler } from './websocket.js';

/** docs/destinations.md#limits: an inspected request head (and any forward request head) beyond this is a 431. */
export const MAX_HEAD_BYTES = 16_384;
export const MAX_CONNECTIONS_PER_LISTENER = 4_096;
/** Slowloris: a request head must be complete this long after its first byte. */
export const HEADERS_TIMEOUT_MS = 10_000;
/** A whole request, body included (slow POST, RX-04). */
export const REQUEST_TIMEOUT_MS = 120_000;
const KEEP_ALIVE_TIMEOUT_MS = 15_000;
/** How often Node sweeps connections for the two timeouts above. */
export const CONNECTIONS_CHECK_INTERVAL_MS = 1_000;
/** On close, in-flight connections get this long to finish before they are destroyed. */
export const CLOSE_GRACE_MS = 5_000;
/** How long a 400/408/431 may take to drain before its socket is destroyed anyway. */
const CLIENT_ERROR_LINGER_MS = 1_000;
/** How long a refused connection may take to read its 503 and close before it is destroyed anyway. */
export const REFUSED_LINGER_MS = 1_000;

export interface ProxyLimits {
  readonly maxConnections: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly tunnelIdleTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly closeGraceMs: number;
}

export const DEFAULT_PROXY_LIMITS: ProxyLimits = Object.freeze({
  maxConnections: MAX_CONNECTIONS_PER_LISTENER,
  headersTimeoutMs: HEADERS_TIMEOUT_MS,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
  tunnelIdleTimeoutMs: TUNNEL_IDLE_TIMEOUT_MS,
  connectTimeoutMs: CONNECT_TIMEOUT_MS,
  closeGraceMs: CLOSE_GRACE_MS,
});

interface ProxyServerOptions {
  readonly host: string;
  readonly port: number;
  readonly limits: ProxyLimits;
  readonly store: PolicyStore;
  readonly resolver: Resolver;
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
    // A credentialed route is inspected even on an L4 endpoint: re-evaluation must see the same choice.
    routeOf: (decision, host, port) => credentialRoute(options.credentials, decision, host, port),
  });
  const upstreams = createUpstreams({ dial: options.dial, connectTimeoutMs: limits.connectTimeoutMs, extraCaPem: options.upstreamCaPem, metrics });
  const sockets = new Set<Socket>();
  // Refused connections are not served and do not count against the limit, but net.Server.close() waits for
  // them like any other: close() must be able to destroy them (issue 15).
  const refused = new Set<Socket>();
  let bound: { host: string; port: number } = { host: options.host, port: options.port };
  let selfCache: SelfAddresses | undefined;
  let selfOthers: readonly SelfAddress[] | undefined;
  let selfBound: { host: string; port: number } | undefined;
  let onDrained: (() => void) | undefined;
  let closing: Promise<void> | undefined;

  const http: Server = createHttpServer({
    maxHeaderSize: MAX_HEAD_BYTES,
    insecureHTTPParser: false,
    requireHostHeader: true,
    joinDuplicateHeaders: false,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: CONNECTIONS_CHECK_INTERVAL_MS,
  });
  // Header count is checked by http1/framing.ts; Node's own cap would silently drop headers instead.
  http.maxHeadersCount = 0;

  const ctx: ProxyContext = {
    store: options.store,
    resolver: options.resolver,
    hosts: options.hosts,
    authorities: options.authorities,
    sink: options.sink,
    metrics,
    logger,
    upstreams,
    dial: options.dial,
    connectTimeoutMs: limits.connectTimeoutMs,
    tunnelIdleTimeoutMs: limits.tunnelIdleTimeoutMs,
    allowLoopback: options.allowLoopback,
    interception: options.interception,
    tunnels,
    scopes: new WeakMap<Socket, TunnelScope>(),
    credentials: options.credentials,
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
      http.emit('connection', socket);
      socket.resume();
    },
  };

  // A client that half-closes after its request (`curl` with a body from stdin, `nc -q`) still gets
  // its response: without this Node aborts the request on the client's FIN.
  (http as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  const handleRequest = createRequestHandler(ctx);
  http.on('request', (req: IncomingMessage, res: ServerResponse) => handleRequest(req, res, false));
  http.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => handleRequest(req, res, true));
  http.on('connect', createConnectHandler(ctx));
  http.on('upgrade', createUpgradeHandler(ctx));
  http.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    metrics.clientErrors.inc({ reason: clientErrorReason(err.code) });
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code !== 'ECONNRESET' && socket.writable && inFlight?.headersSent !== true) {
      const status = clientErrorStatus(err.code);
      // Destroying right after end() drops the pending write on a TLS socket whose sniffed bytes were put
      // back: the client would see a bare close instead of its 431. Destroy once the answer is out.
      const linger = setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
      linger.unref();
      socket.end(
        `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
        () => {
          clearTimeout(linger);
          socket.destroy();
        },
      );
      return;
    }
    socket.destroy();
  });

  const listener: NetServer = createNetServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    if (sockets.size >= limits.maxConnections || closing !== undefined) {
      metrics.refusedConnections.inc({ reason: 'too-many-connections' });
      options.sink.emit({
        class: 'NET',
        activity: 'REFUSE',
        severity: 'MED',
        action: 'DENIED',
        src: { ...(socket.remoteAddress === undefined ? {} : { ip: socket.remoteAddress }), ...(socket.remotePort === undefined ? {} : { port: socket.remotePort }) },
        message: `connection refused: ${limits.maxConnections} connections open`,
        detail: 'too-many-connections',
        unmapped: { reason_code: 'too-many-connections' },
      });
      refused.add(socket);
      socket.once('close', () => refused.delete(socket));
      socket.on('error', () => socket.destroy());
      // Issue 15: unread, the client's request stays buffered in front of its FIN, 'end' never comes and with
      // allowHalfOpen the socket never closes. Discard what it sends, and bound a client that never closes.
      socket.resume();
      const linger = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
      linger.unref();
      socket.once('close', () => clearTimeout(linger));
      socket.end(renderDenial(tooManyConnectionsDenial(limits.maxConnections)));
      return;
    }
    sockets.add(socket);
    metrics.connections.inc();
    socket.once('close', () => {
      sockets.delete(socket);
      metrics.connections.dec();
      if (sockets.size === 0) onDrained?.();
    });
    http.emit('connection', socket);
  });
  listener.on('error', (err) => logger.error({ err }, 'proxy listener error'));

  function destroyAll(): void {
    for (const socket of refused) socket.destroy();
    for (const socket of sockets) socket.destroy();
  }

  return {
    tunnels,
    context: ctx,
    metrics,
    address: () => bound,
    forceClose() {
      tunnels.closeAll('shutdown');
      destroyAll();
      http.closeAllConnections();
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
      // node:http starts its headersTimeout/requestTimeout sweep on 'listening'. This server never listens
      // itself (the net.Server above admits sockets), so start the sweep the same way.
      http.emit('listening');
    },
    close() {
      closing ??= (async () => {
        // net.Server.close() calls back only once every accepted socket is gone: stop accepting now, wait last.
        const stopped = new Promise<void>((resolve) => listener.close(() => resolve()));
        // Tunnels are long-lived by nature: they are closed, not drained. In-flight requests get the grace.
        tunnels.closeAll('shutdown');
        http.closeIdleConnections();
        // A refused connection has had its answer; nothing of it is worth the grace.
        for (const socket of refused) socket.destroy();
        if (sockets.size > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, limits.closeGraceMs);
            timer.unref();
            onDrained = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        destroyAll();
        await stopped;
        await upstreams.close();
        await new Promise<void>((resolve) => http.close(() => resolve()));
      })();
      return closing;
    },
  };
}
