// Admission to one listener (the proxy's, or the transparent capture listeners together): its connection limit,
// each source address's share of that limit, and the first-byte timeout that reaps a connection that stays
// silent. Bookkeeping only: the listener decides what a refused socket is told.

import type { Socket } from 'node:net';
import type { AdmissionListener, RefusedConnectionReason } from '../chain/events.js';
import type { ProxyMetrics } from './metrics.js';

/**
 * docs/destinations.md#limits: a connection that sends nothing this long after accept is closed, with no
 * response. Clients send their request or ClientHello within milliseconds of connecting; 5 s still covers a
 * loaded machine, and is half the head timeout, which used to be all that bounded a silent slot.
 */
export const FIRST_BYTE_TIMEOUT_MS = 5_000;
/**
 * No source address may hold more than this share of a listener's limit, so one hostile client leaves at least
 * the other half to everyone else. A source is an address, not a process: in a pod every workload process is
 * 127.0.0.1 (or the pod IP) and shares the one share (docs/destinations.md#limits).
 */
export const MAX_CONNECTIONS_PER_SOURCE_PERCENT = 50;
/** Silent connections are looked for at least this often: one is reaped at most this long after its timeout. */
export const FIRST_BYTE_SWEEP_INTERVAL_MS = 1_000;

export type AdmitResult = 'admitted' | RefusedConnectionReason;

interface AdmissionOptions {
  readonly listener: AdmissionListener;
  readonly maxConnections: number;
  readonly perSourcePercent: number;
  readonly firstByteTimeoutMs: number;
  /**
   * A captured connection may carry a server-first protocol (SMTP, SSH): a byte either way ends its wait.
   * On the proxy listener only the client's own first byte does.
   */
  readonly eitherWay: boolean;
  readonly metrics: Pick<ProxyMetrics, 'refusedConnections' | 'firstByteTimeouts' | 'watchSources'>;
  /** After an admitted socket closed, with how many are still open. */
  readonly onClosed?: (open: number) => void;
}

export interface Admission {
  /** Admits `socket` (tracked until it closes) or says why not; a refusal is counted here. */
  admit(socket: Socket): AdmitResult;
  /** How many connections one source address may hold. */
  readonly perSourceLimit: number;
  open(): number;
  sockets(): Iterable<Socket>;
  /** Starts the first-byte sweep: one unref'd interval per listener while any connection is silent, not a timer per
   *  connection. */
  start(): void;
  stop(): void;
}

/** The per-source share of `maxConnections`, at least one connection. */
export function perSourceLimit(maxConnections: number, percent: number): number {
  return Math.max(1, Math.min(maxConnections, Math.floor((maxConnections * percent) / 100)));
}

export function createAdmission(options: AdmissionOptions): Admission {
  const { listener, maxConnections, metrics } = options;
  const limit = perSourceLimit(maxConnections, options.perSourcePercent);
  // Admitted socket -> its source address (remoteAddress is gone once the socket has closed).
  const admitted = new Map<Socket, string>();
  const bySource = new Map<string, number>();
  // Socket -> the sweep tick it was admitted in. Insertion order is admission order, so a sweep stops at the
  // first silent socket that is not due yet: it visits only due or already heard-from sockets.
  const silent = new Map<Socket, number>();
  // The timeout in whole sweeps of at most FIRST_BYTE_SWEEP_INTERVAL_MS: a socket is due once more than
  // `dueAfterTicks` sweeps have passed, never before its timeout and at most one sweep after it.
  const dueAfterTicks = Math.ceil(options.firstByteTimeoutMs / FIRST_BYTE_SWEEP_INTERVAL_MS);
  const sweepMs = Math.ceil(options.firstByteTimeoutMs / dueAfterTicks);
  let tick = 0;
  let started = false;
  // Runs only while a connection is silent: an idle listener keeps no timer (idle wakeups cost every sandbox).
  let sweeper: NodeJS.Timeout | undefined;
  metrics.watchSources(listener, () => bySource.size);

  // bytesRead counts what the handle read even while the HTTP/1.1 server's parser consumes the socket natively.
  const heard = options.eitherWay ? (s: Socket): boolean => s.bytesRead > 0 || s.bytesWritten > 0 : (s: Socket): boolean => s.bytesRead > 0;

  // One function for every socket (`this` is the socket): admission adds no closure per connection.
  function release(this: Socket): void {
    const source = admitted.get(this) ?? '';
    admitted.delete(this);
    silent.delete(this);
    const held = (bySource.get(source) ?? 1) - 1;
    if (held === 0) bySource.delete(source);
    else bySource.set(source, held);
    options.onClosed?.(admitted.size);
  }

  function arm(): void {
    sweeper = setInterval(sweep, sweepMs);
    sweeper.unref();
  }

  function sweep(): void {
    tick++;
    for (const [socket, at] of silent) {
      if (heard(socket)) {
        silent.delete(socket);
        continue;
      }
      if (tick - at <= dueAfterTicks) break;
      silent.delete(socket);
      metrics.firstByteTimeouts.inc({ listener });
      // Nothing was asked, so nothing is answered: the client sees the connection close.
      socket.destroy();
    }
    if (silent.size === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  }

  return {
    perSourceLimit: limit,
    admit(socket) {
      const source = socket.remoteAddress ?? '';
      const held = bySource.get(source) ?? 0;
      // A full listener first: at 100 % the share is the whole limit, and a full listener is the reason.
      const refused = admitted.size >= maxConnections ? 'too-many-connections' : held >= limit ? 'too-many-connections-from-source' : undefined;
      if (refused !== undefined) {
        metrics.refusedConnections.inc({ reason: refused });
        return refused;
      }
      bySource.set(source, held + 1);
      admitted.set(socket, source);
      silent.set(socket, tick);
      if (sweeper === undefined && started) arm();
      socket.on('close', release);
      return 'admitted';
    },
    open: () => admitted.size,
    sockets: () => admitted.keys(),
    start() {
      started = true;
      if (sweeper === undefined && silent.size > 0) arm();
    },
    stop() {
      started = false;
      clearInterval(sweeper);
      sweeper = undefined;
    },
  };
}
