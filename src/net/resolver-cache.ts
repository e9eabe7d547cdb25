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

interface CachingResolver extends Resolver {
  /** Forgets every answer, and any lookup still in flight: its source (the hosts file) changed under it. */
  clear(): void;
}

export function createCachingResolver(inner: Resolver, options: { now: () => number; maxEntries?: number }): CachingResolver {
  const maxEntries = options.maxEntries ?? MAX_CACHED_NAMES;
  // One map per family, keyed by the name itself: a per-request lookup hashes the host string it is handed
  // (usually one whose hash V8 already holds) instead of building and hashing a fresh `4/name` key each time.
  const entries: Readonly<Record<4 | 6, Map<string, Entry>>> = { 4: new Map(), 6: new Map() };
  // Concurrent questions for one name share one upstream exchange.
  const inFlight = new Map<string, Promise<ResolveResult>>();
  // Bumped by clear(): a lookup that began before it must not write its (possibly stale) answer back.
  let epoch = 0;

  function lifetimeMs(result: ResolveResult): number {
    if (result.ok) return Math.min(result.ttlSeconds * 1000, MAX_CACHE_TTL_MS);
    return NEGATIVE_FAILURES.has(result.failure) ? NEGATIVE_CACHE_TTL_MS : 0;
  }

  function remember(name: string, family: 4 | 6, result: ResolveResult): void {
    const ttl = lifetimeMs(result);
    if (ttl <= 0) return;
    const own = entries[family];
    // One bound over both families. Map iteration order is insertion order: dropping the first key evicts the
    // oldest entry of this family (of the other one when this one is empty).
    if (entries[4].size + entries[6].size >= maxEntries) {
      const from = own.size > 0 ? own : entries[family === 4 ? 6 : 4];
      from.delete(from.keys().next().value as string);
    }
    own.set(name, { result, expiresAt: options.now() + ttl });
  }

  /** The fresh entry for `name`, dropping an expired one: the one TTL check both methods share. */
  function fresh(name: string, family: 4 | 6): ResolveResult | undefined {
    const own = entries[family];
    const hit = own.get(name);
    if (hit === undefined) return undefined;
    if (hit.expiresAt > options.now()) return hit.result;
    own.delete(name);
    return undefined;
  }

  return {
    clear() {
      epoch++;
      entries[4].clear();
      entries[6].clear();
      inFlight.clear();
    },
    cached(name, family) {
      return fresh(name, family);
    },
    resolve(name, family) {
      const hit = fresh(name, family);
      if (hit !== undefined) return Promise.resolve(hit);
      const key = `${family}/${name}`;
      const pending = inFlight.get(key);
      if (pending !== undefined) return pending;
      const started = epoch;
      const lookup = inner.resolve(name, family).then(
        (result) => {
          if (started !== epoch) return result;
          inFlight.delete(key);
          remember(name, family, result);
          return result;
        },
        (err: unknown) => {
          if (started === epoch) inFlight.delete(key);
          throw err;
        },
      );
      inFlight.set(key, lookup);
      return lookup;
    },
  };
}
