// What stands between a workload and the upstream for policy DNS (docs/dns.md#rate-limits, docs/dns.md#tunnelling):
// the refused and new-name rate limits, and tunnelling detection under allowed wildcards with its per-parent window
// and aggregated Detection Findings. Time comes from the injected clock only; policy-dns.ts asks, this answers.

import { compileHostPattern } from '../policy/match.js';
import type { DnsDecision, Endpoint, Policy } from '../policy/types.js';
import type { AuditEvent, AuditSink } from '../telemetry/event.js';
import type { DnsQuery } from './answer.js';
import { createLimitReport, createTokenBucket, DEFAULT_RATE_LIMITS, LIMIT_REPORT_INTERVAL_MS, type RateLimitSettings, refusedFromQuery } from './rate-limit.js';
import { classifySubdomain, DEFAULT_TUNNEL_DETECTION, subdomainUnder, type TunnelDetectionMode, type TunnelSignal } from './tunnel-detect.js';

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

interface ParentWindow {
  startedAt: number;
  /** The distinct names seen in this window, up to MAX_NEW_NAMES_PER_PARENT + 1. */
  readonly names: Set<string>;
  /** Flagged names since the last finding. */
  pending: number;
  reportedAt: number;
  readonly signals: Set<TunnelSignal>;
  lastName: string;
}

export interface DnsGuardStats {
  readonly rateLimited: Readonly<Record<'refused' | 'unique', number>>;
  readonly tunnelFlagged: number;
  readonly tunnelRefused: number;
}

export interface DnsGuard {
  /** A refusal may be answered in full; false: answer overLimit(query, 'refused') instead. */
  admitRefusal(): boolean;
  /** REFUSED from the query alone, counted; no per-query event. */
  overLimit(query: DnsQuery, limit: 'refused' | 'unique', policy: Policy): Buffer;
  /**
   * A name about to be resolved upstream, when only wildcards cover it: the tunnelling check, then the new-name bucket.
   * Returns the REFUSED answer when it must not go upstream (flagged in enforce mode, or over the limit).
   */
  screen(query: DnsQuery, decision: DnsDecision, policy: Policy): Buffer | undefined;
  /** Reports counts that are due (the server's tick). */
  tick(policy: Policy): void;
  stats(): DnsGuardStats;
}

export function createDnsGuard(options: {
  readonly sink: AuditSink;
  readonly now: () => number;
  readonly tunnelDetection?: TunnelDetectionMode;
  readonly rateLimits?: RateLimitSettings;
}): DnsGuard {
  const { sink, now } = options;
  const mode = options.tunnelDetection ?? DEFAULT_TUNNEL_DETECTION;
  const limits = options.rateLimits ?? DEFAULT_RATE_LIMITS;
  const refusals = createTokenBucket({ perSecond: limits.refusedPerSecond, burst: limits.refusedBurst, now });
  const newNames = createTokenBucket({ perSecond: limits.uniquePerSecond, burst: limits.uniqueBurst, now });
  const reports = {
    refused: createLimitReport({ limit: 'refused', perSecond: limits.refusedPerSecond, burst: limits.refusedBurst, sink, now }),
    unique: createLimitReport({ limit: 'unique', perSecond: limits.uniquePerSecond, burst: limits.uniqueBurst, sink, now }),
  };
  const parents = new Map<string, ParentWindow>();
  // Each endpoint's wildcard base, computed once per compiled endpoint (a reload brings new ones).
  const bases = new WeakMap<Endpoint, string>();
  let flagged = 0;
  let refused = 0;

  function windowOf(base: string, policy: Policy): ParentWindow {
    const t = now();
    let w = parents.get(base);
    if (w === undefined) {
      if (parents.size >= MAX_TRACKED_PARENTS) {
        const [oldest, dropped] = parents.entries().next().value as [string, ParentWindow];
        if (dropped.pending > 0) report(oldest, dropped, policy);
        parents.delete(oldest);
      }
      w = { startedAt: t, names: new Set(), pending: 0, reportedAt: Number.NEGATIVE_INFINITY, signals: new Set(), lastName: '' };
      parents.set(base, w);
    } else if (t - w.startedAt >= NEW_NAMES_WINDOW_MS) {
      w.startedAt = t;
      w.names.clear();
    }
    return w;
  }

  function report(base: string, w: ParentWindow, policy: Policy): void {
    sink.emit(tunnelFinding({ base, name: w.lastName, signals: [...w.signals], names: w.pending, mode, policy }));
    w.reportedAt = now();
    w.pending = 0;
    w.signals.clear();
  }

  return {
    admitRefusal: () => refusals.take(),
    overLimit(query, limit, policy) {
      reports[limit].count(policy, query.name);
      return refusedFromQuery(query);
    },
    screen(query, decision, policy) {
      // A name an endpoint lists exactly is one name, not a channel: neither checked nor charged, so a flood under a
      // wildcard never holds up the workload's own API endpoint.
      const base = wildcardBase(decision.endpoints, bases);
      if (base === undefined) return undefined;
      if (inspect(query, base, policy)) {
        refused++;
        return refusedFromQuery(query);
      }
      if (newNames.take()) return undefined;
      reports.unique.count(policy, query.name);
      return refusedFromQuery(query);
    },
    tick(policy) {
      reports.refused.flush(policy);
      reports.unique.flush(policy);
      for (const [base, w] of parents) if (w.pending > 0 && now() - w.reportedAt >= LIMIT_REPORT_INTERVAL_MS) report(base, w, policy);
    },
    stats: () => ({ rateLimited: { refused: reports.refused.total(), unique: reports.unique.total() }, tunnelFlagged: flagged, tunnelRefused: refused }),
  };

  /** Counts the name in its parent's window and reports it when flagged; true when enforce mode refuses it. */
  function inspect(query: DnsQuery, base: string, policy: Policy): boolean {
    if (mode === 'off') return false;
    const signals = classifySubdomain(subdomainUnder(query.name, base));
    const w = windowOf(base, policy);
    if (w.names.size <= MAX_NEW_NAMES_PER_PARENT) w.names.add(query.name);
    const many = w.names.size > MAX_NEW_NAMES_PER_PARENT;
    if (signals.length === 0 && !many) return false;
    flagged++;
    w.pending++;
    w.lastName = query.name;
    for (const s of signals) w.signals.add(s);
    if (many) w.signals.add('many-names');
    if (now() - w.reportedAt >= LIMIT_REPORT_INTERVAL_MS) report(base, w, policy);
    return mode === 'enforce';
  }
}

/**
 * The base of the most specific wildcard covering the name ('' for a hostless endpoint), or undefined when an endpoint
 * names it exactly: a listed name is one name, not a channel.
 */
function wildcardBase(endpoints: readonly Endpoint[], bases: WeakMap<Endpoint, string>): string | undefined {
  let best: string | undefined;
  for (const endpoint of endpoints) {
    if (endpoint.hostKind === 'exact') return undefined;
    let base = bases.get(endpoint);
    if (base === undefined) {
      base = endpoint.hostKind === 'wildcard' ? compileHostPattern(endpoint.host, 'wildcard').suffix : '';
      bases.set(endpoint, base);
    }
    if (best === undefined || base.length > best.length) best = base;
  }
  return best;
}

function tunnelFinding(o: { base: string; name: string; signals: readonly TunnelSignal[]; names: number; mode: TunnelDetectionMode; policy: Policy }): AuditEvent {
  const enforce = o.mode === 'enforce';
  const under = o.base === '' ? 'a hostless endpoint' : `*.${o.base}`;
  return {
    class: 'FINDING',
    activity: enforce ? 'BLOCKED' : 'CREATE',
    severity: 'HIGH',
    action: enforce ? 'DENIED' : 'ALLOWED',
    engine: 'dns',
    dst: { host: o.name },
    statusDetail: 'policy_dns_tunnel_suspected',
    message: `Policy DNS: tunnelling-shaped names under ${under} (${o.signals.join(', ')}): ${o.names} flagged, ${enforce ? 'refused' : 'answered (audit)'}`,
    generation: o.policy.generation,
    policyHash: o.policy.hash,
    unmapped: { parent: o.base, signals: o.signals, flagged_names: o.names, mode: o.mode },
  };
}
