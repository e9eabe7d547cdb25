// Where an HTTP/2 tunnel's streams go upstream: HTTP/2 when the origin offers it in ALPN (or, in cleartext, when the
// client spoke it by prior knowledge), sessions pooled per pinned destination and shared by every tunnel to it up to
// each tunnel's share (h2-lane.ts); HTTP/1.1 otherwise, through a per-tunnel pool of the proxy's own client. Same TLS
// verification as upstream.ts.
// Every socket and pool made here is closed by close(), and one chosen for a tunnel that has already gone at once.

import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { createH2Client, type H2Client } from '../http2/h2-client.js';
import { BoundaryError } from '../shared/errors.js';
import type { H1Pool } from '../http1/h1-client.js';
import { H2Lane } from './h2-lane.js';
import { ALPN_H2_OR_HTTP1, type PinnedDestination, type Upstreams } from './upstream.js';

/** Pinned destinations with an HTTP/2 client kept; the least recently used is closed beyond this. */
export const MAX_H2_UPSTREAM_DESTINATIONS = 256;
/** HTTP/1.1 connections one HTTP/2 tunnel may hold to an origin without HTTP/2: its streams run side by side. */
export const MAX_H1_CONNECTIONS_PER_H2_TUNNEL = 16;

export type TunnelUpstream = { readonly kind: 'h2'; readonly lane: H2Lane } | { readonly kind: 'h1'; readonly pool: H1Pool };

/** One tunnel's way upstream: chosen on the first get(); release() frees what the tunnel alone holds. */
export interface TunnelUpstreamHandle {
  get(): Promise<TunnelUpstream>;
  /** What get() resolved to, once it has: every later stream takes it without waiting. */
  chosen(): TunnelUpstream | undefined;
  release(): void;
}

export interface H2Upstreams {
  /**
   * The upstream of one HTTP/2 tunnel, chosen on first use: a pooled HTTP/2 client for the destination (the tunnel's
   * own socket then goes unused), else ALPN on `first`. `release()` frees what the tunnel alone holds.
   */
  forTunnel(dest: PinnedDestination, first: Socket): TunnelUpstreamHandle;
  /** HTTP/2 clients open: pooled ones, and replaced ones still serving their streams. */
  size(): number;
  /** Streams open on those clients whose consumer paused them (clients that do not read). */
  held(): number;
  close(): void;
}

/** What one tunnel holds alone: its lane to an HTTP/2 origin, or its HTTP/1.1 pool and the socket the pool starts on. */
interface Own {
  lane?: H2Lane;
  pool?: H1Pool;
  socket?: Socket;
  /** The tunnel has closed. */
  released: boolean;
}


/** A session made with one client certificate (or none) serves only tunnels that would present the same one. */
function keyOf(dest: PinnedDestination, upstreams: Upstreams): string {
  const identity = dest.tls ? upstreams.identityOf(dest) : '';
  return `${dest.tls ? 's' : 'p'}|${dest.host}|${dest.port}|${dest.addresses.join(',')}|${identity}`;
}

export function createH2Upstreams(upstreams: Upstreams): H2Upstreams {
  const clients = new Map<string, H2Client>();
  /** Every client made, pooled or replaced, for close(); a replaced one serves its tunnel until idle. */
  const all = new Set<H2Client>();
  /** ALPN probes in flight: a tunnel that arrives meanwhile waits for the probe's client instead of dialling its own. */
  const probing = new Map<string, Promise<H2Client | undefined>>();
  /** What each tunnel holds alone (its lane's own client, or its HTTP/1.1 pool), until it closes. */
  const owned = new Set<Own>();
  /** Sockets dialled at CONNECT time and handed to a kept client that has not opened its session on them yet. */
  const unused = new Set<Socket>();
  let closed = false;

  function pooled(key: string): H2Client | undefined {
    const hit = clients.get(key);
    if (hit === undefined || hit.closed) return undefined;
    clients.delete(key);
    clients.set(key, hit);
    return hit;
  }

  function keep(key: string, dest: PinnedDestination, first: Socket): H2Client {
    let pending: Socket | undefined = first;
    unused.add(first);
    // Until a session reads it, nothing else listens: an origin's reset must not throw.
    first.on('error', () => first.destroy());
    first.once('close', () => unused.delete(first));
    const client = createH2Client({
      connect() {
        const ready = pending;
        pending = undefined;
        if (ready !== undefined) unused.delete(ready);
        // The origin may have closed a socket that waited here for its first stream.
        if (ready === undefined || ready.destroyed) return upstreams.connect(dest, ['h2']);
        return Promise.resolve(ready);
      },
      onIdle: () => {
        all.delete(client);
        if (clients.get(key) === client) clients.delete(key);
      },
    });
    if (closed) {
      client.destroy();
      first.destroy();
      return client;
    }
    all.add(client);
    clients.delete(key);
    clients.set(key, client);
    if (clients.size > MAX_H2_UPSTREAM_DESTINATIONS) {
      const oldest = clients.keys().next().value;
      if (oldest !== undefined) {
        // Graceful: the streams running on it finish; its tunnels then open a fresh session.
        clients.get(oldest)?.close();
        clients.delete(oldest);
      }
    }
    return client;
  }

  /** The lane of a tunnel to `shared`: beyond its share, a client of its own to the same destination. */
  function lane(own: Own, dest: PinnedDestination, shared: H2Client): TunnelUpstream {
    own.lane = new H2Lane(shared, () => {
      const client = createH2Client({ connect: () => upstreams.connect(dest, ['h2']) });
      if (closed) client.destroy();
      else all.add(client);
      return client;
    });
    // A tunnel that closed while its upstream was chosen never picks a client of its own.
    if (own.released) own.lane.release();
    else owned.add(own);
    return { kind: 'h2', lane: own.lane };
  }

  /** Destroys what a tunnel holds alone; its first socket too, which the pool has not taken if no request came. */
  function destroyOwn(own: Own): void {
    const client = own.lane?.release();
    if (client !== undefined) all.delete(client);
    own.pool?.destroy();
    own.socket?.destroy();
  }

  async function choose(dest: PinnedDestination, first: Socket, own: Own): Promise<TunnelUpstream> {
    const key = keyOf(dest, upstreams);
    const shared = pooled(key) ?? (await probing.get(key));
    if (shared !== undefined && !shared.closed) {
      first.destroy();
      return lane(own, dest, shared);
    }
    if (!dest.tls) return lane(own, dest, keep(key, dest, first));
    let secured: TLSSocket | undefined;
    const probe = upstreams.secureSocket(first, dest, ALPN_H2_OR_HTTP1).then((socket) => {
      if (socket.alpnProtocol === 'h2') return keep(key, dest, socket);
      secured = socket;
      return undefined;
    });
    probing.set(key, probe.catch(() => undefined));
    try {
      const client = await probe;
      if (client !== undefined) return lane(own, dest, client);
    } finally {
      probing.delete(key);
    }
    const socket = secured as TLSSocket;
    // The tunnel (or the proxy) may have closed while the probe ran: nothing else would ever close this socket.
    if (own.released || closed) {
      socket.destroy();
      throw new BoundaryError('UPSTREAM_CLOSED', 'the tunnel closed while its upstream was chosen');
    }
    own.socket = socket;
    own.pool = upstreams.tunnelClient(dest, socket, { secured: true, maxConnections: MAX_H1_CONNECTIONS_PER_H2_TUNNEL });
    owned.add(own);
    return { kind: 'h1', pool: own.pool };
  }

  return {
    forTunnel(dest, first) {
      let choosing: Promise<TunnelUpstream> | undefined;
      let chosen: TunnelUpstream | undefined;
      const own: Own = { released: false };
      return {
        get() {
          if (own.released || closed) return Promise.reject(new BoundaryError('UPSTREAM_CLOSED', 'the tunnel has closed'));
          choosing ??= choose(dest, first, own).then((up) => {
            chosen = up;
            return up;
          });
          return choosing;
        },
        chosen: () => chosen,
        release() {
          own.released = true;
          // A pooled HTTP/2 client outlives the tunnel (other tunnels share it); its own client and pool do not.
          owned.delete(own);
          destroyOwn(own);
          if (choosing === undefined) first.destroy();
        },
      };
    },
    size: () => all.size,
    held() {
      let n = 0;
      for (const client of all) n += client.held();
      return n;
    },
    close() {
      closed = true;
      for (const client of all) client.destroy();
      for (const own of owned) destroyOwn(own);
      for (const socket of unused) socket.destroy();
      all.clear();
      clients.clear();
      owned.clear();
      unused.clear();
    },
  };
}
