// The policy DNS query handler (docs/dns.md#query-handling, docs/dns.md#wire-responses): bytes of one query in, bytes of one response out.
// Eligibility is decide()'s DnsDecision, mapped here to an RCODE; answers are resolved upstream through the lookup gate,
// validated like the proxy's, and replaced by one synthetic address. Never touches sockets (server.ts does) and never
// decides a port.

import { decide } from '../policy/decide.js';
import type { DnsDecision, DnsDecisionReason, Endpoint, Policy } from '../policy/types.js';
import type { AuditSink, Severity } from '../telemetry/event.js';
import { type HostCache, normaliseHost } from '../net/host.js';
import type { LookupGate } from '../net/lookup-gate.js';
import type { ResolveFailure, ResolveResult } from '../net/resolver.js';
import { type SelfAddresses, validateDestination } from '../net/ssrf.js';
import { contractDigest, type MappingRoute, type SyntheticPool } from '../net/synthetic.js';
import { createQueryParser, type DnsQuery, encodeAnswer, QCLASS_IN, QTYPE_A, QTYPE_AAAA, type Rcode, respondFrom, responseLimit } from './answer.js';
import {
  type DnsOutcome,
  type DnsOutcomeReason,
  formerrEvent,
  highWaterEvent,
  type PreparedEvents,
  prepareQueryEvents,
  publishedEvent,
  stamp,
} from './events.js';
import { createMappingRefusals } from './mapping-refusals.js';
import type { OwnQueries } from './own-queries.js';
import { ANSWER_SLOTS, type AnswerReplicas, answerSlot, type CacheEntry } from './replicas.js';
import type { BucketLimits } from '../net/token-bucket.js';
import { createRefusalLimit, DEFAULT_REFUSAL_LIMITS, type RefusalLimit, refusedFromQuery } from './rate-limit.js';
import { type DnsAnswer, type DnsHandler, type DnsRequestInfo, NO_RESPONSE } from './server.js';

/** Wire-form answers kept for the fast path (refusals and live mappings); the oldest is evicted first. */
export const MAX_CACHED_ANSWERS = 4_096;

/**
 * How long a resolver may cache a policy refusal (the synthetic SOA's TTL and MINIMUM, RFC 2308). Short, because a
 * reload can make the name eligible and a cached refusal would outlive it; long enough that a retry loop is served
 * from the stub's cache where it has one (docs/dns.md#why-nxdomain).
 */
export const NEGATIVE_CACHE_TTL_SECONDS = 5;

/** Denials for a name no endpoint covers; only these become NXDOMAIN under a search domain. */
const UNCOVERED: ReadonlySet<DnsDecisionReason> = new Set(['no-policy', 'no-endpoint-matched']);

const UPSTREAM_DETAIL: Readonly<Record<ResolveFailure, string>> = {
  nxdomain: 'nxdomain',
  nodata: 'no_data',
  timeout: 'timeout',
  'io-failed': 'io_failed',
  'malformed-response': 'malformed_response',
  'oversized-response': 'oversized_response',
  'error-response': 'error_response',
  'cname-limit': 'cname_limit',
  'dns-loop': 'dns_loop',
};

interface PolicyDnsOptions {
  /** The current policy (PolicyStore.current). Read on every query: a swap takes effect at once. */
  readonly policy: () => Policy;
  /** The boundary's one lookup gate (net/lookup-gate.ts), shared with the proxy: new names, tunnelling, the resolver. */
  readonly lookups: LookupGate;
  readonly pool: SyntheticPool;
  readonly sink: AuditSink;
  readonly now: () => number;
  /** `--unsafe-allow-loopback-upstream` (tests): loopback answers survive validation. */
  readonly allowLoopback?: boolean;
  /** boundary's own listeners, prepared once (net/ssrf.ts prepareSelfAddresses). */
  readonly selfAddresses?: SelfAddresses;
  /** The composition root's host cache (net/host.ts createHostCache); without one every name is parsed afresh. */
  readonly hosts?: HostCache;
  readonly maxCachedAnswers?: number;
  /** The workload's resolv.conf `search` domains (normalised); names under them that policy does not cover get NXDOMAIN. */
  readonly searchDomains?: readonly string[];
  /** The refused-name bucket (docs/dns.md#rate-limits); rate-limit.ts DEFAULT_REFUSAL_LIMITS without it. */
  readonly refusalLimits?: BucketLimits;
  /** `--dns-workers`: the replay workers cacheable answers are handed to (dns/workers.ts); none without. */
  readonly replicas?: AnswerReplicas;
  /** boundary's own upstream queries in flight (dns/own-queries.ts): one that comes back fails as a loop, unanswered. */
  readonly ownQueries?: OwnQueries;
}

interface PolicyDnsStats {
  readonly cached: number;
  readonly hits: number;
  readonly upstreamQueries: number;
  readonly dropped: number;
  /** Refusals answered REFUSED over the refused-name rate. */
  readonly refusalsOverLimit: number;
}

export interface PolicyDns {
  readonly handler: DnsHandler;
  clearCache(): void;
  /** Reports refusal-limit and mapping counts that are due; the server's tick calls it. */
  tick(): void;
  stats(): PolicyDnsStats;
}

export function createPolicyDns(options: PolicyDnsOptions): PolicyDns {
  const { lookups, pool, sink, now } = options;
  const mappingRefusals = createMappingRefusals({ sink, now });
  const maxCached = options.maxCachedAnswers ?? MAX_CACHED_ANSWERS;
  // Cached answers for IN-class A/AAAA questions, one map per (type, EDNS use) because the template differs.
  const slots = Array.from({ length: ANSWER_SLOTS }, () => new Map<string, CacheEntry>());
  const { replicas, ownQueries } = options;
  const parse = createQueryParser();
  const searchSuffixes = (options.searchDomains ?? []).map((domain) => `.${domain}`);
  const inflight = new Map<string, Promise<DnsOutcome>>();
  const refusalLimits = options.refusalLimits ?? DEFAULT_REFUSAL_LIMITS;
  // With workers, one bucket for every thread: a name refused on one socket is charged to the same rate as on another.
  const refusals: RefusalLimit = createRefusalLimit({
    sink,
    now,
    limits: refusalLimits,
    ...(replicas === undefined ? {} : { bucket: replicas.shareRefusals(refusalLimits, (count, name) => refusals.answeredElsewhere(count, name)) }),
  });
  let hits = 0;
  let upstreamQueries = 0;
  let dropped = 0;

  function emitPrepared(events: PreparedEvents, info: DnsRequestInfo): void {
    if (events.refuse !== undefined) sink.emit(stamp(events.refuse, info.remote));
    sink.emit(stamp(events.dns[info.transport], info.remote));
  }

  function respond(query: DnsQuery, info: DnsRequestInfo, policy: Policy, outcome: DnsOutcome, epoch: number): Buffer {
    const template = encodeAnswer(query, {
      rcode: outcome.rcode,
      addresses: outcome.answers,
      ttlSeconds: outcome.ttlSeconds ?? 0,
      ...(outcome.negativeTtlSeconds === undefined ? {} : { negativeTtlSeconds: outcome.negativeTtlSeconds }),
    });
    const events = prepareQueryEvents(query, policy, outcome);
    const index = answerSlot(query);
    const slot = slots[index];
    if (slot !== undefined && outcome.cacheUntil !== undefined && outcome.cacheUntil > now()) {
      if (slot.size >= maxCached / slots.length) slot.delete(slot.keys().next().value as string);
      const entry: CacheEntry = { template, events, generation: policy.generation, until: outcome.cacheUntil, denied: outcome.denied === true, epoch };
      slot.set(query.name, entry);
      // Only an answer made under the epoch still current: one that began before a change is the main thread's alone.
      if (replicas !== undefined && epoch === replicas.epoch() && policy.generation === options.policy().generation) replicas.publish(index, query.name, entry, undefined);
    }
    emitPrepared(events, info);
    return respondFrom(template, query, responseLimit(query, info.transport));
  }

  /**
   * A worker passed on a question the main thread has a valid answer for: that worker lacks it (evicted, new), or every
   * worker dropped it at an epoch change. Valid now under the current policy and clock, it is stamped with the
   * current epoch (kept here too) and handed to every worker; otherwise only to the one that asked.
   */
  function handOver(to: AnswerReplicas, slot: Map<string, CacheEntry>, index: number, name: string, entry: CacheEntry, worker: number): void {
    const epoch = to.epoch();
    if (entry.epoch === epoch) {
      to.publish(index, name, entry, worker);
      return;
    }
    const current: CacheEntry = { ...entry, epoch };
    slot.set(name, current);
    to.publish(index, name, current, undefined);
  }

  /**
   * Answers everything that needs no upstream: decide() on the name, its DnsDecision mapped to an RCODE. Returns
   * the allow decision instead when the name must be resolved (an eligible A question).
   */
  function answerLocally(query: DnsQuery, policy: Policy): DnsOutcome | DnsDecision {
    const qtype = query.qclass !== QCLASS_IN ? undefined : query.type === QTYPE_A ? 'A' : query.type === QTYPE_AAAA ? 'AAAA' : undefined;
    if (qtype === undefined) return plain('NOTIMP', undefined);
    const host = normaliseHost(query.name === '' ? '.' : query.name, options.hosts);
    // Not a name at all: there is nothing to ask the policy about.
    if (!host.ok) return refused(`${query.name}: ${host.message}`, 'invalid-name');
    const decision = decide(policy, { adapter: 'dns', host: host.host, form: host.kind, qtype });
    if (decision.verdict === 'deny') {
      // A stub resolver walks the search list first (Kubernetes ClusterFirst: ndots:5, three cluster suffixes).
      // musl (Alpine images) gives up at the first candidate answered with anything but NXDOMAIN or NODATA, so
      // a REFUSED for `api.example.com.default.svc.cluster.local` would fail the lookup of `api.example.com`
      // (glibc stops the walk and then tries the name as is). Such names get NXDOMAIN like every refusal, but
      // as a routine candidate, with no refusal event: still answered here, never asked upstream.
      if (UNCOVERED.has(decision.reason) && searchSuffixes.some((suffix) => host.host.endsWith(suffix))) return notUnderPolicy(decision);
      return refused(decision.detail, decision.reason);
    }
    // IPv6 egress is off: an eligible AAAA gets an empty NOERROR and no upstream query.
    if (qtype === 'AAAA') return { ...plain('NOERROR', Number.POSITIVE_INFINITY), ...covered(decision) };
    return decision;
  }

  async function resolveName(name: string, policy: Policy, decision: DnsDecision, pending: Promise<ResolveResult>): Promise<DnsOutcome> {
    const endpoints: readonly Endpoint[] = decision.endpoints;
    upstreamQueries++;
    const result = await pending;
    if (options.policy().generation !== policy.generation) {
      return failed('SERVFAIL', 'policy_dns_stale_generation', 'LOW', `${name}: the policy changed while resolving`);
    }
    if (!result.ok) {
      const rcode: Rcode = result.failure === 'nxdomain' ? 'NXDOMAIN' : result.failure === 'nodata' ? 'NOERROR' : 'SERVFAIL';
      return failed(rcode, `policy_dns_upstream_${UPSTREAM_DETAIL[result.failure]}`, 'LOW', `Policy DNS upstream ${result.failure}: ${result.message}`);
    }
    const routes = new Map<number, { endpointIds: string[]; addresses: string[] }>();
    const approved: string[] = [];
    const droppedAnswers = new Map<string, { ip: string; class: string; why: string }>();
    for (const endpoint of endpoints) {
      for (const port of endpoint.ports) {
        const check = validateDestination({
          endpoint,
          host: name,
          port,
          addresses: result.addresses,
          ...(options.allowLoopback === undefined ? {} : { allowLoopback: options.allowLoopback }),
          ...(options.selfAddresses === undefined ? {} : { selfAddresses: options.selfAddresses }),
        });
        for (const d of check.dropped) droppedAnswers.set(d.ip, d);
        if (!check.ok) continue;
        const route = routes.get(port) ?? { endpointIds: [], addresses: [] };
        if (!route.endpointIds.includes(endpoint.id)) route.endpointIds.push(endpoint.id);
        for (const ip of check.addresses) {
          if (!route.addresses.includes(ip)) route.addresses.push(ip);
          if (!approved.includes(ip)) approved.push(ip);
        }
        routes.set(port, route);
      }
    }
    const dropped = [...droppedAnswers.values()];
    if (routes.size === 0) {
      const list = dropped.map((d) => `${d.ip} (${d.class}, ${d.why})`).join(', ');
      return failed('SERVFAIL', 'policy_dns_no_valid_address', 'MED', `Policy DNS ${name}: no answer passed destination validation: ${list}`, {
        dropped,
      });
    }
    const mappingRoutes: MappingRoute[] = [...routes.entries()].sort(([a], [b]) => a - b).map(([port, r]) => ({ port, ...r }));
    const allocation = pool.allocate({
      name,
      family: 4,
      contract: contractDigest(endpoints),
      endpointIds: endpoints.map((e) => e.id),
      addresses: approved,
      routes: mappingRoutes,
      ttlSeconds: result.ttlSeconds,
      policyGeneration: policy.generation,
    });
    if (!allocation.ok) {
      if (allocation.failure === 'stale-generation') return failed('SERVFAIL', 'policy_dns_stale_generation', 'LOW', allocation.message);
      // Rate or live limit, or (never with the shipped limits) a full window: one finding per interval, not per query.
      return mappingRefusals.refuse(allocation.failure, name, allocation.message, policy);
    }
    if (allocation.highWater) sink.emit(highWaterEvent(pool, policy));
    sink.emit(publishedEvent(allocation.mapping, policy, dropped));
    const m = allocation.mapping;
    return { rcode: 'NOERROR', answers: [m.syntheticIp], ttlSeconds: m.ttlSeconds, cacheUntil: m.expiresAt, mappingId: m.id, ...covered(decision) };
  }

  function answer(message: Buffer, info: DnsRequestInfo): DnsAnswer | Promise<DnsAnswer> {
    const parsed = parse(message);
    if (parsed.kind === 'drop') {
      dropped++;
      return NO_RESPONSE;
    }
    if (parsed.kind === 'formerr') {
      sink.emit(formerrEvent(parsed.why, info));
      return parsed.response;
    }
    const query = parsed.query;
    // Before the cache and the policy: whatever they would say, boundary's own lookup must not be answered by itself.
    if (ownQueries?.returned(info.transport, info.remote.port, query.id, query.name) === true) return NO_RESPONSE;
    // Read before the policy: an answer is stamped with the epoch of the state it was worked out from.
    const epoch = replicas?.epoch() ?? 0;
    const policy = options.policy();
    const index = answerSlot(query);
    const slot = slots[index];
    const entry = slot?.get(query.name);
    if (entry !== undefined && entry.generation === policy.generation) {
      const until = entry.until;
      // Floor, not round: a client never holds a synthetic answer past the mapping's expiry.
      const ttl = until === Number.POSITIVE_INFINITY ? undefined : Math.floor((until - now()) / 1000);
      if (ttl === undefined || ttl >= 1) {
        // First, so that a worker passing on a refusal over the rate learns to answer the next one itself.
        if (info.worker !== undefined && replicas !== undefined && slot !== undefined) handOver(replicas, slot, index, query.name, entry, info.worker);
        // Over the refusal rate, a repeat refusal costs the header copy only: no events, no SOA.
        if (entry.denied && !refusals.admit()) return refusals.overLimit(query, policy);
        hits++;
        emitPrepared(entry.events, info);
        return respondFrom(entry.template, query, responseLimit(query, info.transport), ttl);
      }
    }
    const local = answerLocally(query, policy);
    if (!('verdict' in local)) {
      // Nor is an over-limit refusal encoded or cached: a flood of new refused names must not evict live answers.
      if (local.denied === true && !refusals.admit()) return refusals.overLimit(query, policy);
      return respond(query, info, policy, local, epoch);
    }
    // Concurrent askers of one name share one upstream resolution and one mapping publication.
    const flightKey = `${policy.generation}|${query.name}`;
    let flight = inflight.get(flightKey);
    if (flight === undefined) {
      // Only a name that would go upstream is a channel: the gate screens it and charges it to the new-name budget, or
      // refuses it; the over-limit answer is REFUSED from the query alone, with no per-query event.
      const lookup = lookups.lookup(query.name, { endpoints: local.endpoints, via: 'dns' });
      if ('refused' in lookup) return refusedFromQuery(query);
      flight = resolveName(query.name, policy, local, lookup).finally(() => inflight.delete(flightKey));
      inflight.set(flightKey, flight);
    }
    return flight.then((outcome) => respond(query, info, policy, outcome, epoch));
  }

  return {
    handler: { answer },
    clearCache() {
      for (const slot of slots) slot.clear();
    },
    tick() {
      refusals.tick(options.policy());
      mappingRefusals.tick(options.policy());
    },
    stats() {
      return { cached: slots.reduce((n, slot) => n + slot.size, 0), hits, upstreamQueries, dropped, refusalsOverLimit: refusals.total() };
    },
  };
}

function plain(rcode: Rcode, cacheUntil: number | undefined): DnsOutcome {
  return { rcode, answers: [], ttlSeconds: undefined, cacheUntil };
}

/** The decision fields an outcome carries into its events: the closed reason and the covering policy. */
function covered(decision: DnsDecision): Pick<DnsOutcome, 'reason' | 'policy'> {
  return decision.policy === undefined ? { reason: decision.reason } : { reason: decision.reason, policy: decision.policy };
}

function notUnderPolicy(decision: DnsDecision): DnsOutcome {
  // Depends only on the policy, like a refusal; a search-list candidate is routine, so no refusal finding.
  return {
    rcode: 'NXDOMAIN',
    answers: [],
    ttlSeconds: undefined,
    negativeTtlSeconds: NEGATIVE_CACHE_TTL_SECONDS,
    cacheUntil: Number.POSITIVE_INFINITY,
    statusDetail: 'policy_dns_search_suffix',
    reason: decision.reason,
  };
}

/**
 * A name decide() denied, or a question that is not a name at all (`invalid-name`): NXDOMAIN with a synthetic SOA,
 * not REFUSED. Measured (docs/dns.md#why-nxdomain): glibc, and so Python and Node's dns.lookup, report REFUSED as
 * EAI_AGAIN, a temporary failure that invites retries; NXDOMAIN with an SOA is EAI_NONAME / ENOTFOUND / Go's
 * IsNotFound everywhere, a final answer an agent can act on.
 */
function refused(detail: string, reason: DnsDecisionReason | DnsOutcomeReason): DnsOutcome {
  return {
    rcode: 'NXDOMAIN',
    answers: [],
    ttlSeconds: undefined,
    negativeTtlSeconds: NEGATIVE_CACHE_TTL_SECONDS,
    denied: true,
    // Refusals depend only on the policy: cached until the generation changes.
    cacheUntil: Number.POSITIVE_INFINITY,
    statusDetail: 'policy_dns_ineligible',
    reason,
    refusal: { severity: 'MED', message: `Policy DNS refused: ${detail}`, unmapped: { reason_code: reason } },
  };
}

function failed(rcode: Rcode, statusDetail: string, severity: Severity, message: string, unmapped?: Readonly<Record<string, unknown>>): DnsOutcome {
  return {
    rcode,
    answers: [],
    ttlSeconds: undefined,
    cacheUntil: undefined,
    statusDetail,
    refusal: { severity, message, ...(unmapped === undefined ? {} : { unmapped }) },
  };
}
