// Upstream HTTP dispatchers (undici) whose connector dials only the pinned, validated addresses: a bounded
// cache of keep-alive Pools for forward requests, and one Client per inspected tunnel that starts on the
// socket dialled at CONNECT time. Upstream TLS is verified against system roots plus --upstream-ca.

import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import { connect as tlsConnect, createSecureContext, rootCertificates, type SecureContext, type TLSSocket } from 'node:tls';
import { Client, type Dispatcher, Pool } from 'undici';
import { formatAuthority } from '../net/host.js';
import { type DialFunction, dialPinned } from './dial.js';

/** Distinct (destination, pinned addresses) pools kept; the least recently used is closed beyond this. */
export const MAX_UPSTREAM_POOLS = 256;
/** Keep-alive connections per forward destination. */
export const MAX_CONNECTIONS_PER_UPSTREAM = 256;
export const UPSTREAM_HEADERS_TIMEOUT_MS = 120_000;
export const UPSTREAM_BODY_TIMEOUT_MS = 300_000;
export const UPSTREAM_KEEP_ALIVE_TIMEOUT_MS = 4_000;
/** Upstream TLS sessions kept for resumption, one per (name, address, port); the oldest is dropped beyond. */
export const MAX_UPSTREAM_TLS_SESSIONS = 256;

export interface PinnedDestination {
  /** Normalised host: the SNI and certificate name for TLS (no SNI for IP literals). */
  readonly host: string;
  readonly port: number;
  readonly addresses: readonly string[];
  readonly tls: boolean;
}

export interface Upstreams {
  /** A pooled keep-alive dispatcher for one pinned destination (forward requests). */
  pool(dest: PinnedDestination): Dispatcher;
  /** A dispatcher for one tunnel; its first connection is `first`, later ones dial the pinned addresses. */
  tunnelClient(dest: PinnedDestination, first: Socket): Client;
  /** Upgrades a dialled socket to verified TLS for `host` (WebSocket relays). */
  secureSocket(socket: Socket, host: string): Promise<TLSSocket>;
  close(): Promise<void>;
}

type ConnectCallback = (...args: [null, Socket] | [Error, null]) => void;

export function createUpstreams(options: {
  readonly dial?: DialFunction | undefined;
  readonly connectTimeoutMs: number;
  /** Extra trust anchors (PEM) beside the system roots. */
  readonly extraCaPem?: string | undefined;
}): Upstreams {
  const { dial, connectTimeoutMs } = options;
  // Built once: parsing ~150 root certificates per connection would dominate the handshake cost.
  const secureContext: SecureContext = createSecureContext({
    ca: options.extraCaPem === undefined ? [...rootCertificates] : [...rootCertificates, options.extraCaPem],
  });
  const pools = new Map<string, Pool>();
  // Resumption saves a full handshake per new upstream connection (every inspected tunnel dials one). A
  // session is stored only from a connection that completed verification against `secureContext`, and is
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

  function secureSocket(socket: Socket, host: string): Promise<TLSSocket> {
    return new Promise((resolve, reject) => {
      const literal = isIP(host) !== 0;
      const key = `${host}|${socket.remoteAddress ?? ''}|${socket.remotePort ?? ''}`;
      const session = sessions.get(key);
      const tlsSocket = tlsConnect({
        socket,
        secureContext,
        ALPNProtocols: ['http/1.1'],
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
      tlsSocket.once('secureConnect', () => {
        tlsSocket.removeListener('error', onError);
        verified = true;
        if (pending !== undefined) rememberSession(key, pending);
        resolve(tlsSocket);
      });
    });
  }

  function connector(dest: PinnedDestination, first: Socket | undefined) {
    let pending = first;
    return function connectPinned(_opts: unknown, callback: ConnectCallback): void {
      const ready = pending;
      pending = undefined;
      const socket = ready === undefined ? dialPinned({ addresses: dest.addresses, port: dest.port, dial, timeoutMs: connectTimeoutMs }) : Promise.resolve(ready);
      socket
        .then((s): Promise<Socket> => (dest.tls ? secureSocket(s, dest.host) : Promise.resolve(s)))
        .then(
          (s) => callback(null, s),
          (err: Error) => callback(err, null),
        );
    };
  }

  function originOf(dest: PinnedDestination): string {
    return `${dest.tls ? 'https' : 'http'}://${formatAuthority(dest.host, dest.port)}`;
  }

  return {
    pool(dest) {
      const key = `${dest.tls ? 's' : 'p'}|${dest.host}|${dest.port}|${dest.addresses.join(',')}`;
      const hit = pools.get(key);
      if (hit !== undefined && !hit.closed && !hit.destroyed) {
        pools.delete(key);
        pools.set(key, hit);
        return hit;
      }
      const pool = new Pool(originOf(dest), {
        connect: connector(dest, undefined),
        connections: MAX_CONNECTIONS_PER_UPSTREAM,
        keepAliveTimeout: UPSTREAM_KEEP_ALIVE_TIMEOUT_MS,
        headersTimeout: UPSTREAM_HEADERS_TIMEOUT_MS,
        bodyTimeout: UPSTREAM_BODY_TIMEOUT_MS,
      });
      pools.set(key, pool);
      if (pools.size > MAX_UPSTREAM_POOLS) {
        const oldest = pools.keys().next().value;
        if (oldest !== undefined) {
          pools.get(oldest)?.close().catch(() => undefined);
          pools.delete(oldest);
        }
      }
      if (closed) pool.destroy().catch(() => undefined);
      return pool;
    },
    tunnelClient(dest, first) {
      return new Client(originOf(dest), {
        connect: connector(dest, first),
        keepAliveTimeout: UPSTREAM_KEEP_ALIVE_TIMEOUT_MS,
        headersTimeout: UPSTREAM_HEADERS_TIMEOUT_MS,
        bodyTimeout: UPSTREAM_BODY_TIMEOUT_MS,
      });
    },
    secureSocket,
    async close() {
      closed = true;
      sessions.clear();
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((p) => p.destroy().catch(() => undefined)));
    },
  };
}
