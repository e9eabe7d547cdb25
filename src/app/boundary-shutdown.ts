// The deadline on the composition root's close(): the ordered drain races it, and whatever is still open when it
// passes is destroyed by the caller. Kept apart from boundary.ts so the rule (a drain always ends) reads on its own.

import type { DrainOutcome } from './boundary-types.js';

/**
 * close() ends within this, whatever state a part is in; what is still open then is destroyed and the drain is
 * 'forced' (`boundary run` exits 3); the default of `--shutdown-drain-ms` (config.ts shutdownDrainMs). Above the
 * proxy's CLOSE_GRACE_MS (in-flight requests), with room for the pools and the admin server;
 * below Kubernetes' default 30 s termination grace, so the drain is ours to end, not SIGKILL's.
 */
export const SHUTDOWN_DRAIN_MS = 8_000;

/** 'clean' when `drained` settles within `ms`, else 'forced' (issue 15: a stuck part must not hold the process). */
export async function drainWithin(drained: Promise<void>, ms: number): Promise<DrainOutcome> {
  let deadline: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      drained.then((): DrainOutcome => 'clean'),
      new Promise<DrainOutcome>((resolve) => {
        deadline = setTimeout(() => resolve('forced'), ms);
      }),
    ]);
  } finally {
    clearTimeout(deadline);
  }
}

/**
 * The admin listener's share of the drain. It closes last so /readyz says `closing` while the rest drains, and its
 * requests take milliseconds; but server.close() waits for every connection that is not idle, and one that sent
 * half a request head (any process in the pod reaches 127.0.0.1:9901) would otherwise hold the whole drain to the
 * deadline and turn every SIGTERM into a forced exit (issue 15). Far above a scrape of /metrics.
 */
export const ADMIN_CLOSE_GRACE_MS = 1_000;

/** A part's close(), then its forceClose() if close() has not settled within `ms`; resolves once either did. */
export async function closeWithin(part: { close(): Promise<void>; forceClose(): void }, ms: number): Promise<void> {
  if ((await drainWithin(part.close(), ms)) === 'forced') part.forceClose();
}
