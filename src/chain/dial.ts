// Dials only validated, pinned addresses, in answer order, each within CONNECT_TIMEOUT_MS. Never resolves a
// name: the caller hands over IP literals that ssrf.ts let through. An injected `dial` replaces net.connect; the
// upstream proxy's dial (upstream-proxy-dial.ts) is one, and names its own attempts and budget.

import { connect, type Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { observeSince } from './timing.js';
import { connectForBulkReads } from './bulk-reads.js';
import type { Denial } from './denials.js';
import { dialFailedDenial } from './upstream-denials.js';
import type { ProxyMetrics } from '../proxy/metrics.js';

export const CONNECT_TIMEOUT_MS = 10_000;

export interface DialTarget {
  /** An IP literal; a name only when an upstream proxy is asked to connect by name (--upstream-proxy-connect-by-name). */
  readonly host: string;
  readonly port: number;
  /** The destination's name, when it has one: the upstream proxy's bypass list reads it. */
  readonly name?: string | undefined;
  /** Through the upstream proxy (a CONNECT to it), not a direct dial. */
  readonly viaProxy?: boolean;
  /** A passthrough tunnel's upstream: its reads can go to the relay without a buffer each (bulk-reads.ts). */
  readonly bulkReads?: boolean;
}

export interface DialFunction {
  (target: DialTarget, timeoutMs: number): Promise<Socket>;
  /** The attempts for one destination, in order; default: each address, directly. */
  readonly attempts?: (addresses: readonly string[], port: number, name: string | undefined) => readonly DialTarget[];
  /**
   * One budget for every attempt of a destination, split evenly over the attempts left; default: timeoutMs each.
   * A dial with a budget enforces each attempt's share itself.
   */
  readonly budget?: { readonly ms: number; readonly now: () => number };
}

const DIAL_FAILURES = ['timeout', 'refused', 'unreachable', 'proxy-refused', 'proxy-unreachable', 'proxy-timeout', 'proxy-malformed'] as const;
export type DialFailure = (typeof DIAL_FAILURES)[number];

/** The upstream proxy failed the dial; `proxyStatus` is its answer's status when it sent a well-formed one. */
export class UpstreamProxyError extends BoundaryError {
  readonly proxyStatus: number | undefined;
  constructor(code: UpstreamProxyErrorCode, message: string, options?: ErrorOptions & { readonly proxyStatus?: number }) {
    super(code, message, options);
    this.proxyStatus = options?.proxyStatus;
  }
}
type UpstreamProxyErrorCode = 'UPSTREAM_PROXY_REFUSED' | 'UPSTREAM_PROXY_UNREACHABLE' | 'UPSTREAM_PROXY_TIMEOUT' | 'UPSTREAM_PROXY_MALFORMED';
const PROXY_FAILURES: Readonly<Record<UpstreamProxyErrorCode, DialFailure>> = {
  UPSTREAM_PROXY_REFUSED: 'proxy-refused',
  UPSTREAM_PROXY_UNREACHABLE: 'proxy-unreachable',
  UPSTREAM_PROXY_TIMEOUT: 'proxy-timeout',
  UPSTREAM_PROXY_MALFORMED: 'proxy-malformed',
};
const DIAL_REASONS: Readonly<Record<DialFailure, DialReason>> = {
  timeout: 'dial-failed',
  refused: 'dial-failed',
  unreachable: 'dial-failed',
  'proxy-refused': 'upstream-proxy-refused',
  'proxy-unreachable': 'upstream-proxy-unreachable',
  'proxy-timeout': 'upstream-proxy-timeout',
  'proxy-malformed': 'upstream-proxy-malformed',
};
type DialReason = 'dial-failed' | 'upstream-proxy-refused' | 'upstream-proxy-unreachable' | 'upstream-proxy-timeout' | 'upstream-proxy-malformed';

export interface DialRefusal {
  readonly reason: DialReason;
  readonly failure: DialFailure;
  readonly proxyStatus: number | undefined;
  readonly detail: string;
  readonly denial: Denial;
}

/** What a failed dial becomes, the same on every adapter: the event's reason and facts, and the agent's denial. */
export function dialRefusalOf(target: string, err: unknown): DialRefusal {
  const failure = dialFailureOf(err);
  const proxyStatus = err instanceof UpstreamProxyError ? err.proxyStatus : undefined;
  return {
    reason: DIAL_REASONS[failure],
    failure,
    proxyStatus,
    detail: `${target}: ${failure}: ${(err as Error).message}`,
    denial: dialFailedDenial(target, failure, proxyStatus),
  };
}

// The target each tunnel through the upstream proxy reached, by socket: its TLS session cache keys on it.
const tunnelTargets = new WeakMap<Socket, DialTarget>();

/** Records that `socket` is a tunnel through the upstream proxy to `target`. */
export function rememberTunnelTarget(socket: Socket, target: DialTarget): void {
  tunnelTargets.set(socket, target);
}

/** The target of a tunnel through the upstream proxy; undefined for a direct connection. */
export function tunnelTargetOf(socket: Socket): DialTarget | undefined {
  return tunnelTargets.get(socket);
}

/** Opens a TCP connection with net.connect; rejects with UPSTREAM_CONNECT_TIMEOUT / _REFUSED / UNREACHABLE. */
export function netDial(target: DialTarget, timeoutMs = CONNECT_TIMEOUT_MS): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const options = { host: target.host, port: target.port, allowHalfOpen: true, noDelay: true };
    const socket = target.bulkReads === true ? connectForBulkReads(options) : connect(options);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new BoundaryError('UPSTREAM_CONNECT_TIMEOUT', `${target.host}:${target.port} gave no answer in ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeListener('error', onError);
      resolve(socket);
    });
    function onError(err: NodeJS.ErrnoException): void {
      clearTimeout(timer);
      socket.destroy();
      const code = err.code === 'ECONNREFUSED' ? 'UPSTREAM_CONNECT_REFUSED' : 'UPSTREAM_UNREACHABLE';
      reject(new BoundaryError(code, `${target.host}:${target.port}: ${err.message}`, { cause: err }));
    }
    socket.once('error', onError);
  });
}

/** The pinned dial failed (timeout, refused, unreachable): a 502 with `dial-failed`, not an upstream error. */
export function isDialError(err: unknown): boolean {
  return (
    err instanceof UpstreamProxyError ||
    (err instanceof BoundaryError && (err.code === 'UPSTREAM_CONNECT_TIMEOUT' || err.code === 'UPSTREAM_CONNECT_REFUSED' || err.code === 'UPSTREAM_UNREACHABLE'))
  );
}

export function dialFailureOf(err: unknown): DialFailure {
  if (err instanceof UpstreamProxyError) return PROXY_FAILURES[err.code as UpstreamProxyErrorCode];
  if (err instanceof BoundaryError) {
    if (err.code === 'UPSTREAM_CONNECT_TIMEOUT') return 'timeout';
    if (err.code === 'UPSTREAM_CONNECT_REFUSED') return 'refused';
  }
  if ((err as NodeJS.ErrnoException | undefined)?.code === 'ECONNREFUSED') return 'refused';
  return 'unreachable';
}

function withTimeout(promise: Promise<Socket>, target: DialTarget, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      reject(new BoundaryError('UPSTREAM_CONNECT_TIMEOUT', `${target.host}:${target.port} gave no answer in ${timeoutMs} ms`));
    }, timeoutMs);
    promise.then(
      (socket) => {
        clearTimeout(timer);
        if (done) socket.destroy();
        else resolve(socket);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Tries each pinned address once, in order (or the dial's own attempts); the last failure is reported. */
export async function dialPinned(options: {
  readonly addresses: readonly string[];
  readonly port: number;
  /** The destination's name, when it has one (the upstream proxy's bypass list and connect-by-name read it). */
  readonly name?: string | undefined;
  readonly dial?: DialFunction | undefined;
  readonly timeoutMs?: number;
  /** Records the accepted attempt's connect time. */
  readonly metrics?: Pick<ProxyMetrics, 'now' | 'upstreamConnectSeconds'> | undefined;
  /** The socket will be a passthrough tunnel's upstream (DialTarget.bulkReads); direct attempts only. */
  readonly bulkReads?: boolean;
}): Promise<Socket> {
  const { dial, metrics, port } = options;
  const timeoutMs = options.timeoutMs ?? CONNECT_TIMEOUT_MS;
  const bulkReads = options.bulkReads === true;
  const attempts: readonly DialTarget[] = dial?.attempts?.(options.addresses, port, options.name) ?? options.addresses.map((host) => (bulkReads ? { host, port, bulkReads } : { host, port }));
  const budget = dial?.budget;
  const deadline = budget === undefined ? undefined : budget.now() + budget.ms;
  // Built only on failure: an Error captures a stack trace, which showed up per CONNECT in profiles.
  let last: unknown;
  for (const [i, target] of attempts.entries()) {
    // A budget is shared: each attempt gets an even share of what is left, so one silent address cannot use it all.
    // A direct attempt (an upstream proxy's bypass) keeps its own timeout within that share.
    const share = deadline === undefined || budget === undefined ? timeoutMs : Math.max(1, Math.floor((deadline - budget.now()) / (attempts.length - i)));
    const allowed = target.viaProxy === true ? share : Math.min(timeoutMs, share);
    try {
      const started = metrics?.now() ?? 0;
      // A dial with a budget times its own attempts: its timeout names what was slow (the proxy or the origin).
      const socket = dial === undefined ? await netDial(target, allowed) : budget === undefined ? await withTimeout(dial(target, allowed), target, allowed) : await dial(target, allowed);
      socket.setNoDelay(true);
      if (metrics !== undefined) observeSince(metrics, metrics.upstreamConnectSeconds, started);
      return socket;
    } catch (err) {
      last = err;
    }
  }
  throw last ?? new BoundaryError('UPSTREAM_UNREACHABLE', 'no validated address to dial');
}
