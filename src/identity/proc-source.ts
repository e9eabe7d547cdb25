// The IdentitySource that reads /proc itself (docs/identity.md#where-lookups-run): boundary running as root on a
// host, the workload running as boundary's own uid, or `boundary identity serve` in its privileged sidecar.
// Lookups that arrive while a scan runs wait for the next one, so a burst of connections costs one read of the
// socket tables and one walk of the process table, not one each.

import { existsSync } from 'node:fs';
import type { ProcFs } from './proc-fs.js';
import { createScanContext, scanBatch } from './proc-scan.js';
import { type Scanner, threadScanner } from './proc-thread.js';
import { failed, IDENTITY_LOOKUP_TIMEOUT_MS, type IdentityResult, type IdentitySource, type LookupRequest, MAX_PENDING_LOOKUPS } from './source.js';

/** Lookups served by one scan; the rest wait for the next. */
export const MAX_BATCH_LOOKUPS = 256;

export interface ProcSourceOptions {
  /** `/proc` unless a test (or a host whose /proc is mounted elsewhere) says otherwise. */
  readonly procRoot?: string;
  /** Tests: walk on this thread with these calls (counted, or failing on purpose) instead of on the worker. */
  readonly fs?: ProcFs;
  readonly now: () => number;
  /** Pids never examined; default this process (its fds are the proxy's ends). */
  readonly skipPids?: readonly number[];
  readonly timeoutMs?: number;
  /** Start the walk's thread in start(), not on the first lookup: for the identity server, which does nothing else. */
  readonly warm?: boolean;
}

interface Waiter {
  readonly request: LookupRequest;
  readonly resolve: (result: IdentityResult) => void;
  timer: NodeJS.Timeout | undefined;
  settled: boolean;
}

export function createProcIdentitySource(options: ProcSourceOptions): IdentitySource {
  const root = options.procRoot ?? '/proc';
  const skipPids = options.skipPids ?? [process.pid];
  const scanner = options.fs === undefined ? threadScanner({ procRoot: root, skipPids }) : inlineScanner(root, options.fs, skipPids);
  const timeoutMs = options.timeoutMs ?? IDENTITY_LOOKUP_TIMEOUT_MS;
  let queue: Waiter[] = [];
  let running = false;
  let closed = false;
  let problem: string | undefined;

  function settle(waiter: Waiter, result: IdentityResult): void {
    if (waiter.settled) return;
    waiter.settled = true;
    clearTimeout(waiter.timer);
    waiter.resolve(result);
  }

  async function runBatch(): Promise<void> {
    const batch = queue.splice(0, MAX_BATCH_LOOKUPS).filter((w) => !w.settled);
    let results: IdentityResult[];
    try {
      results = batch.length === 0 ? [] : [...(await scanner.scan(batch.map((w) => w.request), options.now()))];
    } catch (err) {
      results = batch.map(() => failed('source-unavailable', err instanceof Error ? err.message : String(err)));
    }
    // What /readyz says: the last scan's verdict on /proc itself, not on any one connection.
    const unreadable = results.find((r) => !r.ok && r.failure === 'proc-unavailable');
    if (results.length > 0) problem = unreadable !== undefined && !unreadable.ok ? unreadable.detail : undefined;
    for (const [i, waiter] of batch.entries()) settle(waiter, results[i] as IdentityResult);
    running = false;
    schedule();
  }

  function schedule(): void {
    if (running || queue.length === 0 || closed) return;
    running = true;
    // One turn later: every connection accepted in this turn joins the same scan.
    setImmediate(() => void runBatch());
  }

  return {
    lookup(request) {
      if (closed) return Promise.resolve(failed('source-unavailable', 'the identity source is closed'));
      if (queue.length >= MAX_PENDING_LOOKUPS) return Promise.resolve(failed('overloaded', `${MAX_PENDING_LOOKUPS} lookups are already waiting`));
      return new Promise<IdentityResult>((resolve) => {
        const waiter: Waiter = { request, resolve, settled: false, timer: undefined };
        // Counted from when the walk's thread runs: its one-time start is not this lookup's delay.
        void scanner.started().then(() => {
          if (waiter.settled) return;
          waiter.timer = setTimeout(() => settle(waiter, failed('timeout', `no answer from ${root} within ${timeoutMs} ms`)), timeoutMs);
          waiter.timer.unref();
        });
        queue.push(waiter);
        schedule();
      });
    },
    problem: () => problem,
    async start() {
      if (!existsSync(`${root}/net/tcp`)) problem = `${root}/net/tcp does not exist: is /proc mounted?`;
      if (options.warm === true) await scanner.started();
    },
    async close() {
      closed = true;
      const left = queue;
      queue = [];
      for (const waiter of left) settle(waiter, failed('source-unavailable', 'the identity source closed'));
      await scanner.close();
    },
  };
}

/** The walk on the caller's thread: for tests that count or fail reads (proc-fs.ts SYNC_PROC_FS blocks). */
function inlineScanner(root: string, fs: ProcFs, skipPids: readonly number[]): Scanner {
  let clock = 0;
  const ctx = createScanContext({ root, fs, skipPids, now: () => clock });
  return {
    scan(requests, now) {
      clock = now;
      return scanBatch(ctx, requests);
    },
    started: () => Promise.resolve(),
    close: async () => undefined,
  };
}
