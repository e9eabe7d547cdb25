// Dials only validated, pinned addresses, in answer order, each within CONNECT_TIMEOUT_MS. Never resolves a
// name: the caller hands over IP literals that ssrf.ts let through. An injected `dial` replaces net.connect.

import { connect, type Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { type Outcome, settle } from './events.js';
import { observeSince } from './timing.js';
import type { ProxyMetrics } from '../proxy/metrics.js';

export const CONNECT_TIMEOUT_MS = 10_000;

export interface DialTarget {
  /** Always an IP literal. */
  readonly host: string;
  readonly port: number;
}

export type DialFunction = (target: DialTarget) => Promise<Socket>;

const DIAL_FAILURES = ['timeout', 'refused', 'unreachable'] as const;
export type DialFailure = (typeof DIAL_FAILURES)[number];

/** Opens a TCP connection with net.connect; rejects with UPSTREAM_CONNECT_TIMEOUT / _REFUSED / UNREACHABLE. */
export function netDial(target: DialTarget, timeoutMs = CONNECT_TIMEOUT_MS): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
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

/** Marks `o` as a failed dial; RX-11: timeout, refused and unreachable stay apart in the event, not only in the detail. */
export function recordDialFailure(o: Outcome, target: string, err: unknown): void {
  const failure = dialFailureOf(err);
  settle(o, 'fail', 'dial-failed', `${target}: ${failure}: ${(err as Error).message}`, o.status);
  o.extra = { ...o.extra, dial_failure: failure };
}

/** The pinned dial failed (timeout, refused, unreachable): a 502 with `dial-failed`, not an upstream error. */
export function isDialError(err: unknown): boolean {
  return err instanceof BoundaryError && (err.code === 'UPSTREAM_CONNECT_TIMEOUT' || err.code === 'UPSTREAM_CONNECT_REFUSED' || err.code === 'UPSTREAM_UNREACHABLE');
}

export function dialFailureOf(err: unknown): DialFailure {
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

/** Tries each pinned address once, in order; the last failure is reported. */
export async function dialPinned(options: {
  readonly addresses: readonly string[];
  readonly port: number;
  readonly dial?: DialFunction | undefined;
  readonly timeoutMs?: number;
  /** Records the accepted attempt's connect time. */
  readonly metrics?: Pick<ProxyMetrics, 'now' | 'upstreamConnectSeconds'> | undefined;
}): Promise<Socket> {
  const timeoutMs = options.timeoutMs ?? CONNECT_TIMEOUT_MS;
  const { metrics } = options;
  // Built only on failure: an Error captures a stack trace, which showed up per CONNECT in profiles.
  let last: unknown;
  for (const host of options.addresses) {
    const target = { host, port: options.port };
    try {
      const started = metrics?.now() ?? 0;
      const socket = options.dial === undefined ? await netDial(target, timeoutMs) : await withTimeout(options.dial(target), target, timeoutMs);
      socket.setNoDelay(true);
      if (metrics !== undefined) observeSince(metrics, metrics.upstreamConnectSeconds, started);
      return socket;
    } catch (err) {
      last = err;
    }
  }
  throw last ?? new BoundaryError('UPSTREAM_UNREACHABLE', 'no validated address to dial');
}
