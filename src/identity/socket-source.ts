// The IdentitySource that asks `boundary identity serve` over its unix socket (docs/identity.md#the-identity-socket):
// one connection, lookups multiplexed by id, each answered within IDENTITY_LOOKUP_TIMEOUT_MS or failed closed.
// A lost connection fails what was in flight and is dialled again (backoff up to IDENTITY_RECONNECT_MAX_MS);
// a lookup made while it is down dials at once and fails closed if that dial fails.

import { connect, type Socket } from 'node:net';
import type { IdentityFailure } from '../policy/binary-identity.js';
import { failed, IDENTITY_LOOKUP_TIMEOUT_MS, type IdentityResult, type IdentitySource, type LookupRequest, MAX_PENDING_LOOKUPS } from './source.js';
import { decodeAnswer, encodeLine, lineSplitter } from './wire.js';

/** First reconnect delay after a failed dial or a lost connection; doubles per failure. */
export const IDENTITY_RECONNECT_MIN_MS = 100;
export const IDENTITY_RECONNECT_MAX_MS = 5_000;
/** How long start() waits for the server (a sidecar started just before boundary may still be booting). */
export const IDENTITY_CONNECT_WAIT_MS = 10_000;

interface Pending {
  readonly resolve: (result: IdentityResult) => void;
  readonly timer: NodeJS.Timeout;
  readonly line: Buffer;
}

export function createSocketIdentitySource(options: { readonly socketPath: string; readonly timeoutMs?: number; readonly connectWaitMs?: number }): IdentitySource {
  const { socketPath } = options;
  const timeoutMs = options.timeoutMs ?? IDENTITY_LOOKUP_TIMEOUT_MS;
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let socket: Socket | undefined;
  let connected = false;
  let closed = false;
  let delay = IDENTITY_RECONNECT_MIN_MS;
  let retry: NodeJS.Timeout | undefined;
  let problem: string | undefined = 'not connected yet';
  let onConnected: (() => void)[] = [];

  function answer(id: number, result: IdentityResult): void {
    const waiter = pending.get(id);
    if (waiter === undefined) return;
    pending.delete(id);
    clearTimeout(waiter.timer);
    waiter.resolve(result);
  }

  function failAll(failure: IdentityFailure, detail: string): void {
    for (const id of [...pending.keys()]) answer(id, failed(failure, detail));
  }

  function dial(): void {
    if (closed || socket !== undefined) return;
    clearTimeout(retry);
    retry = undefined;
    const s = connect(socketPath);
    socket = s;
    s.on('connect', () => {
      connected = true;
      problem = undefined;
      delay = IDENTITY_RECONNECT_MIN_MS;
      // Lookups made while it was down go out now, in order.
      for (const waiter of pending.values()) s.write(waiter.line);
      const waiting = onConnected;
      onConnected = [];
      for (const notify of waiting) notify();
    });
    const drop = (why: string): void => {
      problem = `identity socket ${socketPath}: ${why}`;
      s.destroy();
    };
    s.on(
      'data',
      lineSplitter(
        (line) => {
          try {
            const { id, result } = decodeAnswer(line);
            answer(id, result);
          } catch (err) {
            drop(err instanceof Error ? err.message : String(err));
          }
        },
        () => drop('answer too large'),
      ),
    );
    s.on('error', (err) => {
      problem = `identity socket ${socketPath}: ${err.message}`;
    });
    s.on('close', () => {
      socket = undefined;
      connected = false;
      // In flight, or waiting for this dial: failed now (closed) rather than at their timeout.
      failAll('source-unavailable', problem ?? 'the identity server closed the connection');
      if (closed) return;
      retry = setTimeout(dial, delay);
      retry.unref();
      delay = Math.min(delay * 2, IDENTITY_RECONNECT_MAX_MS);
    });
  }

  return {
    lookup(request: LookupRequest) {
      if (closed) return Promise.resolve(failed('source-unavailable', 'the identity source is closed'));
      if (pending.size >= MAX_PENDING_LOOKUPS) return Promise.resolve(failed('overloaded', `${MAX_PENDING_LOOKUPS} lookups are already waiting`));
      const id = nextId++;
      const line = encodeLine({ id, ...request });
      return new Promise<IdentityResult>((resolve) => {
        const timer = setTimeout(() => answer(id, failed('timeout', `no answer from ${socketPath} within ${timeoutMs} ms${connected ? '' : ` (${problem})`}`)), timeoutMs);
        timer.unref();
        pending.set(id, { resolve, timer, line });
        if (connected) socket?.write(line);
        // Down and waiting out a backoff: try now, this lookup is waiting.
        else dial();
      });
    },
    problem: () => problem,
    async start() {
      dial();
      if (connected) return;
      // Bounded: a server that never comes leaves /readyz saying so, and lookups failing closed. Not unref'd: while
      // boundary starts this wait may be all that is alive (the dial's backoff timer is unref'd).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, options.connectWaitMs ?? IDENTITY_CONNECT_WAIT_MS);
        onConnected.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      socket?.destroy();
      failAll('source-unavailable', 'the identity source closed');
      const waiting = onConnected;
      onConnected = [];
      for (const notify of waiting) notify();
    },
  };
}
