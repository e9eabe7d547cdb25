// A TTL-bounded cache in front of a Resolver, so the forward path does not send one upstream DNS query
// per request. Caches answers, never decisions: every cached answer is still classified per use.

import type { ResolveResult, Resolver } from './resolver.js';

export const MAX_CACHED_NAMES = 4_096;
/** Answers are kept for their TTL, capped here; TTL 0 (rebinding games) is never cached. */
export const MAX_CACHE_TTL_MS = 30_000;
/** NXDOMAIN/NODATA are kept briefly; transient failures (timeouts, I/O) are never cached. */
export const NEGATIVE_CACHE_TTL_MS = 5_000;

const NEGATIVE_FAILURES: ReadonlySet<string> = new Set(['nxdomain', 'nodata']);

interface Entry {
  readonly result: ResolveResult;
  readonly expiresAt: number;
}

export function createCachingResolver(inner: Resolver, options: { now: () => number; maxEntries?: number }): Resolver {
  const maxEntries = options.maxEntries ?? MAX_CACHED_NAMES;
  const entries = new Map<string, Entry>();
  // Concurrent questions for one name share one upstream exchange.
  const inFlight = new Map<string, Promise<ResolveResult>>();

  function lifetimeMs(result: ResolveResult): number {
    if (result.ok) return Math.min(result.ttlSeconds * 1000, MAX_CACHE_TTL_MS);
    return NEGATIVE_FAILURES.has(result.failure) ? NEGATIVE_CACHE_TTL_MS : 0;
  }

  function remember(key: string, result: ResolveResult): void {
    const ttl = lifetimeMs(result);
    if (ttl <= 0) return;
    // Map iteration order is insertion order: dropping the first key evicts the oldest entry.
    if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
    entries.set(key, { result, expiresAt: options.now() + ttl });
  }

  /** The fresh entry for `key`, dropping an expired one: the one TTL check both methods share. */
  function fresh(key: string): ResolveResult | undefined {
    const hit = entries.get(key);
    if (hit === undefined) return undefined;
    if (hit.expiresAt > options.now()) return hit.result;
    entries.delete(key);
    return undefined;
  }

  return {
    cached(name, family) {
      return fresh(`${family}/${name}`);
    },
    resolve(name, family) {
      const key = `${family}/${name}`;
      const hit = fresh(key);
      if (hit !== undefined) return Promise.resolve(hit);
      const pending = inFlight.get(key);
      if (pending !== undefined) return pending;
      const lookup = inner.resolve(name, family).then(
        (result) => {
          inFlight.delete(key);
          remember(key, result);
          return result;
        },
        (err: unknown) => {
          inFlight.delete(key);
          throw err;
        },
      );
      inFlight.set(key, lookup);
      return lookup;
    },
  };
}
