// The one gate in front of every upstream lookup (docs/dns.md#the-lookup-gate): policy DNS and the proxy's destination
// check resolve only through it. A new name under a wildcard is screened for tunnelling and charged to one new-name
// budget; a known name and a name an endpoint lists exactly pass free. Refusals are values; reports go to `report`.

import { createTally, type LookupVia, pendingTotal, reportDue, type Tally, takePending, type ViaCounts } from './lookup-tally.js';
import type { ResolveResult, Resolver } from './resolver.js';
import { type BucketLimits, createTokenBucket } from './token-bucket.js';
import { classifySubdomain, DEFAULT_TUNNEL_DETECTION, subdomainUnder, type TunnelDetectionMode, type TunnelSignal } from './tunnel-detect.js';

/**
 * New names resolved upstream per second. This is the bandwidth a DNS tunnel gets under an allowed wildcard, through
 * any adapter: each new name carries up to ~250 bytes to the zone's server. A workload asks each name it uses again at
 * most once per answer TTL (30 s at most), so 10/s keeps 300 names live.
 */
export const NEW_NAMES_PER_SECOND = 10;
/** New names in a burst: a start-up that resolves every dependency at once (package registries, APIs, CDNs). */
export const NEW_NAMES_BURST = 100;
/**
 * How long a name let through stays known: asking it again, through any adapter, is not a new name. The longest an
 * answer is cached (resolver-cache.ts MAX_CACHE_TTL_MS, synthetic.ts MAX_MAPPING_TTL_SECONDS).
 */
export const KNOWN_NAME_MS = 30_000;
/** Known names remembered; beyond it the oldest is forgotten (and charged again if asked). */
export const MAX_KNOWN_NAMES = 4_096;
/** The window in which new names under one wildcard base are counted. */
export const NEW_NAMES_WINDOW_MS = 60_000;
/**
 * New names under one wildcard base per window beyond which the traffic is tunnel-shaped whatever the labels spell:
 * a tool's small polls and acks carry too few bytes for the shape signals, but each is a new name. A workload that
 * touches 64 distinct hosts of one CDN or bucket family in a minute is rare; a tunnel does that in a second.
 */
export const MAX_NEW_NAMES_PER_PARENT = 64;
/** Wildcard bases whose window is tracked; beyond it the base tracked longest is dropped (its count reported first). */
export const MAX_TRACKED_PARENTS = 64;

export const DEFAULT_NEW_NAME_LIMITS: BucketLimits = Object.freeze({ perSecond: NEW_NAMES_PER_SECOND, burst: NEW_NAMES_BURST });

/** What the gate reads of a policy endpoint covering the name; policy's Endpoint fits as it is. */
export interface LookupEndpoint {
  /** Normalised host pattern as written; undefined for a hostless endpoint. */
  readonly host: string | undefined;
  /** `exact` names one host: no channel. Any other form covers many names. */
  readonly hostKind: string;
}

export interface LookupAsk {
  /** The endpoints that made the name eligible (the decision's); an exact one means the name is not screened. */
  readonly endpoints: readonly LookupEndpoint[];
  readonly via: LookupVia;
}

export const LOOKUP_REFUSALS = ['rate-limited', 'tunnel-suspected'] as const;
export type LookupRefusalKind = (typeof LOOKUP_REFUSALS)[number];

/** A name the gate did not send upstream. Nothing was resolved. */
export interface LookupRefusal {
  readonly refused: LookupRefusalKind;
  readonly name: string;
  /** The wildcard base it was counted under ('' for a hostless endpoint). */
  readonly base: string;
  /** tunnel-suspected: why the name looks like encoded data. */
  readonly signals: readonly TunnelSignal[];
  /** rate-limited: when the budget admits a new name again; 0 otherwise. */
  readonly retryAfterMs: number;
  readonly limits: BucketLimits;
}

/** What the gate holds back and reports: over-limit names, and flagged names per wildcard base. */
export type LookupReport =
  | { readonly kind: 'rate-limited'; readonly names: number; readonly byVia: ViaCounts; readonly name: string | undefined; readonly limits: BucketLimits }
  | {
      readonly kind: 'tunnel-suspected';
      readonly names: number;
      readonly byVia: ViaCounts;
      readonly name: string;
      readonly base: string;
      readonly signals: readonly TunnelSignal[];
      readonly mode: Exclude<TunnelDetectionMode, 'off'>;
    };

export interface LookupGateStats {
  readonly rateLimited: number;
  readonly tunnelFlagged: number;
  readonly tunnelRefused: number;
  readonly knownNames: number;
}

export interface LookupGate {
  /** The fresh answer the resolver holds now (Resolver.cached), else undefined. Never charged, never starts a query. */
  cached(name: string): ResolveResult | undefined;
  /** Resolves `name` (normalised, never an IP literal; A only) upstream, or refuses it: the refusal is returned at once. */
  lookup(name: string, ask: LookupAsk): Promise<ResolveResult> | LookupRefusal;
  /** Reports counts that are due (policy DNS's tick). */
  tick(): void;
  /** Reports everything pending, due or not (on close, before telemetry closes). */
  flush(): void;
  stats(): LookupGateStats;
}

interface ParentWindow {
  startedAt: number;
  /** The distinct names seen in this window, up to MAX_NEW_NAMES_PER_PARENT + 1. */
  readonly names: Set<string>;
  readonly flagged: Tally;
  readonly signals: Set<TunnelSignal>;
  lastName: string;
}

export function createLookupGate(options: {
  readonly resolver: Resolver;
  readonly now: () => number;
  readonly report: (report: LookupReport) => void;
  readonly tunnelDetection?: TunnelDetectionMode;
  readonly newNames?: BucketLimits;
}): LookupGate {
  const { resolver, now, report } = options;
  const mode = options.tunnelDetection ?? DEFAULT_TUNNEL_DETECTION;
  const limits = options.newNames ?? DEFAULT_NEW_NAME_LIMITS;
  const budget = createTokenBucket({ ...limits, now });
  const known = new Map<string, number>();
  const parents = new Map<string, ParentWindow>();
  const limited = createTally();
  let limitedName = '';
  let limitedTotal = 0;
  let flagged = 0;
  let tunnelRefused = 0;
  // Each endpoint's wildcard base, computed once per compiled endpoint (a reload brings new ones).
  const bases = new WeakMap<LookupEndpoint, string>();

  function isKnown(name: string, at: number): boolean {
    const until = known.get(name);
    if (until !== undefined) {
      if (until > at) return true;
      known.delete(name);
    }
    return resolver.cached?.(name, 4) !== undefined;
  }

  function remember(name: string, at: number): void {
    if (known.size >= MAX_KNOWN_NAMES) known.delete(known.keys().next().value as string);
    known.set(name, at + KNOWN_NAME_MS);
  }

  function reportLimited(at: number, force: boolean): void {
    if (!reportDue(limited, at, force)) return;
    const names = pendingTotal(limited);
    report({ kind: 'rate-limited', names, byVia: takePending(limited, at), name: names === 1 ? limitedName : undefined, limits });
  }

  function reportFlagged(base: string, w: ParentWindow, at: number, force: boolean): void {
    if (mode === 'off' || !reportDue(w.flagged, at, force)) return;
    const names = pendingTotal(w.flagged);
    report({ kind: 'tunnel-suspected', names, byVia: takePending(w.flagged, at), name: w.lastName, base, signals: [...w.signals], mode });
    w.signals.clear();
  }

  function windowOf(base: string, at: number): ParentWindow {
    let w = parents.get(base);
    if (w === undefined) {
      if (parents.size >= MAX_TRACKED_PARENTS) {
        const [oldest, dropped] = parents.entries().next().value as [string, ParentWindow];
        reportFlagged(oldest, dropped, at, true);
        parents.delete(oldest);
      }
      w = { startedAt: at, names: new Set(), flagged: createTally(), signals: new Set(), lastName: '' };
      parents.set(base, w);
    } else if (at - w.startedAt >= NEW_NAMES_WINDOW_MS) {
      w.startedAt = at;
      w.names.clear();
    }
    return w;
  }

  /** Counts the new name in its parent's window and reports it when flagged; the signals when enforce mode refuses it. */
  function inspect(name: string, base: string, via: LookupVia, at: number): readonly TunnelSignal[] | undefined {
    if (mode === 'off') return undefined;
    const signals = classifySubdomain(subdomainUnder(name, base));
    const w = windowOf(base, at);
    if (w.names.size <= MAX_NEW_NAMES_PER_PARENT) w.names.add(name);
    const many = w.names.size > MAX_NEW_NAMES_PER_PARENT;
    if (signals.length === 0 && !many) return undefined;
    flagged++;
    w.flagged.pending[via]++;
    w.lastName = name;
    const own: readonly TunnelSignal[] = many ? [...signals, 'many-names'] : signals;
    for (const s of own) w.signals.add(s);
    reportFlagged(base, w, at, false);
    return mode === 'enforce' ? own : undefined;
  }

  /** The base of the most specific wildcard covering the name, or undefined when an endpoint names it exactly. */
  function channelBase(endpoints: readonly LookupEndpoint[]): string | undefined {
    // No endpoint at all cannot happen for an allowed name; if it did, the name is charged like a hostless one.
    let best = '';
    for (const endpoint of endpoints) {
      if (endpoint.hostKind === 'exact') return undefined;
      let base = bases.get(endpoint);
      if (base === undefined) {
        base = endpoint.hostKind === 'wildcard' ? wildcardBase(endpoint.host ?? '') : '';
        bases.set(endpoint, base);
      }
      if (base.length > best.length) best = base;
    }
    return best;
  }

  return {
    cached: (name) => resolver.cached?.(name, 4),
    lookup(name, ask) {
      // A name an endpoint lists exactly is one name, not a channel: neither screened nor charged, so a flood under a
      // wildcard never holds up the workload's own API endpoint.
      const base = channelBase(ask.endpoints);
      if (base === undefined) return resolver.resolve(name, 4);
      const at = now();
      if (isKnown(name, at)) return resolver.resolve(name, 4);
      const signals = inspect(name, base, ask.via, at);
      if (signals !== undefined) {
        tunnelRefused++;
        return { refused: 'tunnel-suspected', name, base, signals, retryAfterMs: 0, limits };
      }
      if (!budget.take()) {
        limitedTotal++;
        limited.pending[ask.via]++;
        limitedName = name;
        reportLimited(at, false);
        return { refused: 'rate-limited', name, base, signals: [], retryAfterMs: budget.waitMs(), limits };
      }
      remember(name, at);
      return resolver.resolve(name, 4);
    },
    tick() {
      const at = now();
      reportLimited(at, false);
      for (const [base, w] of parents) reportFlagged(base, w, at, false);
    },
    flush() {
      const at = now();
      reportLimited(at, true);
      for (const [base, w] of parents) reportFlagged(base, w, at, true);
    },
    stats: () => ({ rateLimited: limitedTotal, tunnelFlagged: flagged, tunnelRefused, knownNames: known.size }),
  };
}

/** `*.t.example.com` and `**.example.com` -> `t.example.com`, `example.com`: the labels after the last one with a `*`. */
export function wildcardBase(pattern: string): string {
  const labels = pattern.split('.');
  let last = -1;
  for (let i = 0; i < labels.length; i++) if (labels[i]?.includes('*')) last = i;
  return labels.slice(last + 1).join('.');
}
