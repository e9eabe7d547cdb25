// Upstream HTTP/1.1 pools (http1/h1-client.ts) whose connect() dials only the pinned, validated addresses: a bounded
// cache of keep-alive pools for forward requests, and one single-connection pool per inspected tunnel that
// starts on the socket dialled at CONNECT time. Upstream TLS is verified against system roots plus --upstream-ca, and
// presents the client certificate bound to the destination, if any (docs/credentials.md#client-certificates).

import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import type { SecureContext } from 'node:tls';
import { connect as tlsConnect, createSecureContext, nodeRootsWith, type TLSSocket } from '../shared/node-tls.js';
import { type DialFunction, dialPinned, tunnelTargetOf } from '../chain/dial.js';
import type { ClientCertificate, ClientCertificateChoice } from '../credentials/client-cert.js';
import { BoundaryError } from '../shared/errors.js';
import { createH1Pool, type H1Pool, type H1Timeouts } from '../http1/h1-client.js';
import { observeSince } from '../chain/timing.js';
import type { ProxyMetrics } from './metrics.js';

/** Distinct (destination, pinned addresses) pools kept; the least recently used is closed beyond this. */
export const MAX_UPSTREAM_POOLS = 256;
/** Busy connections per forward destination; further requests queue (MAX_QUEUED_REQUESTS_PER_UPSTREAM). */
const MAX_CONNECTIONS_PER_UPSTREAM = 256;
/** Socket inactivity allowed while waiting for a response head. */
const UPSTREAM_HEADERS_TIMEOUT_MS = 120_000;
/** Socket inactivity allowed while a response body streams. */
const UPSTREAM_BODY_TIMEOUT_MS = 300_000;
/** An idle pooled socket is closed after this; below common origin defaults (5 s) to dodge stale sockets. */
const UPSTREAM_KEEP_ALIVE_TIMEOUT_MS = 4_000;
/** Upstream TLS sessions kept for resumption, one per (name, address, port); the oldest is dropped beyond. */
const MAX_UPSTREAM_TLS_SESSIONS = 256;

/** ALPN offered upstream: HTTP/1.1 clients get HTTP/1.1; an HTTP/2 client's tunnel offers both (h2-upstream.ts). */
export const ALPN_HTTP1: readonly string[] = ['http/1.1'];
export const ALPN_H2_OR_HTTP1: readonly string[] = ['h2', 'http/1.1'];

export interface PinnedDestination {
  /** Normalised host: the SNI and certificate name for TLS (no SNI for IP literals). */
  readonly host: string;
  readonly port: number;
  readonly addresses: readonly string[];
  readonly tls: boolean;
}

export interface Upstreams {
  /** A pooled keep-alive client for one pinned destination (forward requests). */
  pool(dest: PinnedDestination): H1Pool;
  /**
   * A client for one tunnel; its first socket is `first` (already TLS when `secured`), later ones dial the
   * pinned addresses. One connection unless `maxConnections` says more (an HTTP/2 tunnel's streams run at once).
   */
  tunnelClient(dest: PinnedDestination, first: Socket, options?: { readonly secured?: boolean; readonly maxConnections?: number }): H1Pool;
  /**
   * Upgrades a socket dialled to `dest` to verified TLS (WebSocket relays), offering `alpn` (default http/1.1) and
   * presenting the client certificate bound to the destination.
   */
  secureSocket(socket: Socket, dest: UpstreamAuthority, alpn?: readonly string[]): Promise<TLSSocket>;
  /**
   * Which client identity a new TLS connection to `dest` would present ('' for none): a pool of connections made
   * with one identity is never used for another (h2-upstream.ts keys its sessions with it).
   */
  identityOf(dest: UpstreamAuthority): string;
  /** Dials the pinned addresses, with verified TLS offering `alpn` when `dest.tls`. */
  connect(dest: PinnedDestination, alpn: readonly string[]): Promise<Socket>;
  close(): Promise<void>;
}

/** Why a client certificate failed, in the words of TLS alerts where one applies (`certificate_expired`). */
export class ClientCertificateError extends BoundaryError {
  readonly why: 'ambiguous' | 'certificate_expired' | 'certificate_not_yet_valid' | 'closed_without_alert';
  constructor(why: ClientCertificateError['why'], message: string) {
    super('UPSTREAM_CLIENT_CERT_FAILED', message);
    this.why = why;
  }
}

export interface UpstreamAuthority {
  readonly host: string;
  readonly port: number;
}

const DEFAULT_TIMEOUTS: H1Timeouts = Object.freeze({
  headersTimeoutMs: UPSTREAM_HEADERS_TIMEOUT_MS,
  bodyTimeoutMs: UPSTREAM_BODY_TIMEOUT_MS,
  keepAliveTimeoutMs: UPSTREAM_KEEP_ALIVE_TIMEOUT_MS,
});

function sameAddresses(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function createUpstreams(options: {
  readonly dial?: DialFunction | undefined;
  readonly connectTimeoutMs: number;
  /** Extra trust anchors (PEM) beside the system roots. */
  readonly extraCaPem?: string | undefined;
  /** Tests inject small values; production uses the UPSTREAM_*_TIMEOUT_MS constants. */
  readonly timeouts?: H1Timeouts | undefined;
  /** Connect and upstream TLS handshake times. */
  readonly metrics?: Pick<ProxyMetrics, 'now' | 'upstreamConnectSeconds' | 'tlsUpstreamSeconds'> | undefined;
  /** The client certificate bound to host:port now, read per connection so a rotation reaches the next one. */
  readonly clientCertificate?: ((host: string, port: number) => ClientCertificateChoice) | undefined;
  /** Wall clock (ms): a certificate outside its validity is never presented. */
  readonly now?: (() => number) | undefined;
}): Upstreams {
  const { dial, connectTimeoutMs, metrics } = options;
  const timeouts = options.timeouts ?? DEFAULT_TIMEOUTS;
  // Built once, on the first verified upstream: parsing ~150 root certificates per connection would dominate the
  // handshake cost, and their store is memory a sidecar whose tunnels all pass through never needs (docs/benchmarks.md#idle-memory).
  let sharedContext: SecureContext | undefined;
  // One context per certificate loaded (a rotation loads a new one; the old is collected with its revision).
  const identityContexts = new WeakMap<ClientCertificate, SecureContext>();
  const pools = new Map<string, H1Pool>();
  /** The plain-HTTP pool asked for last (TLS pools are keyed on the client certificate too: always looked up). */
  let recent: { readonly host: string; readonly port: number; readonly addresses: readonly string[]; readonly pool: H1Pool } | undefined;
  // Resumption saves a full handshake per new upstream connection (every inspected tunnel dials one). A
  // session is stored only from a connection that completed verification against `sharedContext`, and is
  // offered only to the same name at the same pinned address and port.
  const sessions = new Map<string, Buffer>();
  let closed = false;

  function rememberSession(key: string, session: Buffer): void {
    sessions.delete(key);
    sessions.set(key, session);
    if (sessions.size > MAX_UPSTREAM_TLS_SESSIONS) {
      const oldest = sessions.keys().next().value;
      if (oldest !== undefined) sessions.delete(oldest);
    }
  }

  function identityFor(dest: UpstreamAuthority): ClientCertificate | undefined {
    const choice = options.clientCertificate?.(dest.host, dest.port);
    if (choice === undefined || choice.kind === 'none') return undefined;
    if (choice.kind === 'ambiguous') throw new ClientCertificateError('ambiguous', `two client certificates are bound to ${dest.host}:${dest.port}`);
    const now = options.now?.();
    if (now !== undefined && now > choice.certificate.notAfter) throw new ClientCertificateError('certificate_expired', 'the client certificate has expired');
    if (now !== undefined && now < choice.certificate.notBefore) throw new ClientCertificateError('certificate_not_yet_valid', 'the client certificate is not valid yet');
    return choice.certificate;
  }

  function contextFor(identity: ClientCertificate | undefined): SecureContext {
    if (identity === undefined) {
      sharedContext ??= createSecureContext({ ca: nodeRootsWith(options.extraCaPem) });
      return sharedContext;
    }
    let context = identityContexts.get(identity);
    if (context === undefined) {
      context = createSecureContext({ ca: nodeRootsWith(options.extraCaPem), cert: identity.certChainPem, key: identity.key.reveal() });
      identityContexts.set(identity, context);
    }
    return context;
  }

  function secureSocket(socket: Socket, dest: UpstreamAuthority, alpn: readonly string[] = ALPN_HTTP1): Promise<TLSSocket> {
    let identity: ClientCertificate | undefined;
    try {
      identity = identityFor(dest);
    } catch (err) {
      socket.destroy();
      return Promise.reject(err);
    }
    const { host } = dest;
    return new Promise((resolve, reject) => {
      const literal = isIP(host) !== 0;
      // Through the upstream proxy the socket's peer is the proxy: the key names the address the tunnel reached.
      const peer = tunnelTargetOf(socket);
      const where = peer === undefined ? `${socket.remoteAddress ?? ''}|${socket.remotePort ?? ''}` : `${peer.host}|${peer.port}`;
      // The identity is part of the key: a session resumed carries the client certificate of the handshake that made
      // it, so one made with a certificate (or none) is never offered under another.
      const key = `${host}|${where}|${dest.port}|${identity?.fingerprint ?? ''}`;
      const session = sessions.get(key);
      // Before the clock starts: the first verified upstream builds the shared context, which is not the handshake's time.
      const context = contextFor(identity);
      const started = metrics?.now() ?? 0;
      const tlsSocket = tlsConnect({
        socket,
        secureContext: context,
        ALPNProtocols: [...alpn],
        // RFC 6066: no SNI for IP literals; the certificate is then checked against the IP.
        ...(literal ? { host } : { servername: host }),
        ...(session === undefined ? {} : { session }),
      });
      let verified = false;
      let pending: Buffer | undefined;
      // TLS 1.2 sends the session before secureConnect, TLS 1.3 tickets after it: keep only verified ones.
      tlsSocket.on('session', (next: Buffer) => {
        if (verified) rememberSession(key, next);
        else pending = next;
      });
      const onError = (err: Error): void => {
        if (session !== undefined) sessions.delete(key);
        tlsSocket.destroy();
        socket.destroy();
        reject(err);
      };
      tlsSocket.once('error', onError);
      if (identity !== undefined) noticeSilentRefusal(tlsSocket);
      tlsSocket.once('secureConnect', () => {
        tlsSocket.removeListener('error', onError);
        verified = true;
        if (metrics !== undefined) observeSince(metrics, metrics.tlsUpstreamSeconds, started);
        if (pending !== undefined) rememberSession(key, pending);
        resolve(tlsSocket);
      });
    });
  }

  /**
   * A TLS 1.3 client has finished its handshake before the origin judges its certificate, and an origin that checks it
   * after the handshake (Node's TLS server does) just closes, with no alert. A connection that presented a certificate
   * and ends before a single byte came back is told apart as such: the error comes before the end its users act on.
   */
  function noticeSilentRefusal(socket: TLSSocket): void {
    let answered = false;
    let failed = false;
    // prependListener: adding a 'data' listener this way does not start the stream flowing before its user reads it.
    socket.prependListener('data', () => {
      answered = true;
    });
    socket.prependListener('error', () => {
      failed = true;
    });
    socket.prependListener('end', () => {
      if (answered || failed || socket.listenerCount('error') === 0) return;
      socket.emit('error', new ClientCertificateError('closed_without_alert', 'the origin closed the connection that presented the client certificate before answering'));
    });
  }

  // Dial errors pass through unchanged: forward.ts tells refused, timeout and unreachable apart by code.
  function connector(dest: PinnedDestination, first: Socket | undefined, secured = false): () => Promise<Socket> {
    let pending = first;
    return function connectPinned(): Promise<Socket> {
      const ready = pending;
      pending = undefined;
      if (ready !== undefined && secured) return Promise.resolve(ready);
      const socket = ready === undefined ? dialPinned({ addresses: dest.addresses, port: dest.port, name: dest.host, dial, timeoutMs: connectTimeoutMs, metrics }) : Promise.resolve(ready);
      return dest.tls ? socket.then((s) => secureSocket(s, dest)) : socket;
    };
  }

  return {
    pool(dest) {
      // The pool asked for last is already the most recently used: no key to build, no reordering.
      const last = recent;
      if (last !== undefined && !dest.tls && !last.pool.closed && last.host === dest.host && last.port === dest.port && sameAddresses(last.addresses, dest.addresses)) return last.pool;
      const key = `${dest.tls ? `s|${identityFor(dest)?.fingerprint ?? ''}` : 'p'}|${dest.host}|${dest.port}|${dest.addresses.join(',')}`;
      const hit = pools.get(key);
      if (hit !== undefined && !hit.closed) {
        pools.delete(key);
        pools.set(key, hit);
        recent = dest.tls ? undefined : { host: dest.host, port: dest.port, addresses: dest.addresses, pool: hit };
        return hit;
      }
      const pool = createH1Pool({ connect: connector(dest, undefined), maxConnections: MAX_CONNECTIONS_PER_UPSTREAM, timeouts });
      pools.set(key, pool);
      recent = dest.tls ? undefined : { host: dest.host, port: dest.port, addresses: dest.addresses, pool };
      if (pools.size > MAX_UPSTREAM_POOLS) {
        const oldest = pools.keys().next().value;
        if (oldest !== undefined) {
          // Graceful: requests already running on the evicted pool finish, then its sockets close.
          pools.get(oldest)?.close();
          pools.delete(oldest);
        }
      }
      if (closed) pool.destroy();
      return pool;
    },
    tunnelClient(dest, first, options) {
      // One connection by default, as an HTTP/1.1 tunnel's client speaks one request at a time; more requests queue.
      return createH1Pool({ connect: connector(dest, first, options?.secured), maxConnections: options?.maxConnections ?? 1, timeouts });
    },
    secureSocket,
    identityOf(dest) {
      return identityFor(dest)?.fingerprint ?? '';
    },
    async connect(dest, alpn) {
      const socket = await dialPinned({ addresses: dest.addresses, port: dest.port, name: dest.host, dial, timeoutMs: connectTimeoutMs, metrics });
      return dest.tls ? secureSocket(socket, dest, alpn) : socket;
    },
    async close() {
      closed = true;
      recent = undefined;
      sessions.clear();
      const all = [...pools.values()];
      pools.clear();
      for (const p of all) p.destroy();
    },
  };
}
