// The audit events of policy DNS: per-query DNS Activity and NET:REFUSE, CONFIG:PUBLISHED with the correlation
// fields of docs/dns.md#correlation-fields, high water and exhaustion. Pure builders: the handler decides when to emit.

import type { DnsDecisionReason, Policy } from '../policy/types.js';
import type { Mapping, SyntheticPool } from '../net/synthetic.js';
import type { AuditEvent, Severity } from '../telemetry/event.js';
import { className, type DnsQuery, type Rcode, typeName } from './answer.js';
import type { DnsRequestInfo } from './server.js';

/** Refusals made before any intent exists: the question's name is not a name (decide() gives the rest). */
const DNS_OUTCOME_REASONS = ['invalid-name'] as const;
export type DnsOutcomeReason = (typeof DNS_OUTCOME_REASONS)[number];

/** What a question came to; shared by every query that asked it while it was being worked out. */
export interface DnsOutcome {
  readonly rcode: Rcode;
  readonly answers: readonly string[];
  readonly ttlSeconds: number | undefined;
  /** A negative answer carries a synthetic SOA with this TTL (answer.ts). */
  readonly negativeTtlSeconds?: number;
  /** A policy refusal (whatever its RCODE): the DNS Activity event says DENIED. */
  readonly denied?: boolean;
  /** Cache the answer until then (Infinity: until the policy generation changes); undefined: never cache. */
  readonly cacheUntil: number | undefined;
  readonly statusDetail?: string;
  /** The closed reason of the decision behind it (unmapped `reason_code`); absent for NOTIMP and upstream failures. */
  readonly reason?: DnsDecisionReason | DnsOutcomeReason;
  /** The policy key that covered the name, on allow. */
  readonly policy?: string;
  /** A NET:REFUSE event goes with every response carrying this outcome. */
  readonly refusal?: { readonly severity: Severity; readonly message: string; readonly unmapped?: Readonly<Record<string, unknown>> };
  readonly mappingId?: string;
}

/**
 * The per-query events of an outcome, built once and stamped with the asker's address on each use. Every
 * field is present (undefined where absent) so all bases share one shape and stamping is one plain literal;
 * the OCSF renderer treats an undefined field as absent.
 */
interface EventBase {
  readonly class: AuditEvent['class'];
  readonly activity: string;
  readonly severity: Severity;
  readonly action: AuditEvent['action'] | undefined;
  readonly engine: 'dns';
  readonly policy: string | undefined;
  readonly dst: { readonly host: string };
  readonly statusDetail: string | undefined;
  readonly message: string;
  readonly generation: number;
  readonly policyHash: string;
  readonly unmapped: Readonly<Record<string, unknown>> | undefined;
}
export interface PreparedEvents {
  readonly dns: Readonly<Record<DnsRequestInfo['transport'], EventBase>>;
  readonly refuse: EventBase | undefined;
}

export function stamp(b: EventBase, src: DnsRequestInfo['remote']): AuditEvent {
  return {
    class: b.class,
    activity: b.activity,
    severity: b.severity,
    action: b.action,
    engine: b.engine,
    policy: b.policy,
    dst: b.dst,
    src,
    statusDetail: b.statusDetail,
    message: b.message,
    generation: b.generation,
    policyHash: b.policyHash,
    unmapped: b.unmapped,
  } as AuditEvent;
}

export function prepareQueryEvents(query: DnsQuery, policy: Policy, outcome: DnsOutcome): PreparedEvents {
  const { rcode, answers } = outcome;
  const dst = { host: query.name };
  const qtype = typeName(query.type);
  const refuse: EventBase | undefined =
    outcome.refusal === undefined ? undefined : {
      class: 'NET',
      activity: 'REFUSE',
      severity: outcome.refusal.severity,
      action: 'DENIED',
      engine: 'dns',
      policy: outcome.policy,
      dst,
      statusDetail: outcome.statusDetail,
      message: outcome.refusal.message,
      generation: policy.generation,
      policyHash: policy.hash,
      // The question's type and the closed refusal reason travel with every refusal, so one event says what was asked.
      unmapped: {
        qtype,
        rcode,
        ...(outcome.reason === undefined ? {} : { reason_code: outcome.reason }),
        ...outcome.refusal.unmapped,
      },
    };
  const dnsEvent = (transport: DnsRequestInfo['transport']): EventBase => ({
    class: 'DNS',
    activity: 'QUERY',
    severity: 'INFO',
    action: outcome.denied === true || rcode === 'REFUSED' ? 'DENIED' : answers.length > 0 ? 'ALLOWED' : undefined,
    engine: 'dns',
    policy: outcome.policy,
    dst,
    statusDetail: outcome.statusDetail,
    message: `DNS ${qtype} ${query.name} ${rcode}${answers.length > 0 ? ` ${answers.join(',')}` : ''}`,
    generation: policy.generation,
    policyHash: policy.hash,
    unmapped: {
      qtype,
      qclass: className(query.qclass),
      rcode,
      answers,
      transport,
      ...(outcome.reason === undefined ? {} : { reason_code: outcome.reason }),
      ...(outcome.mappingId === undefined ? {} : { mapping_id: outcome.mappingId }),
    },
  });
  return { dns: { udp: dnsEvent('udp'), tcp: dnsEvent('tcp') }, refuse };
}

export function formerrEvent(why: string, info: DnsRequestInfo): AuditEvent {
  return { class: 'DNS', activity: 'QUERY', severity: 'LOW', engine: 'dns', src: info.remote, message: `DNS FORMERR: ${why}`, unmapped: { rcode: 'FORMERR', transport: info.transport } };
}

export function publishedEvent(m: Mapping, policy: Policy, dropped: readonly unknown[]): AuditEvent {
  return {
    class: 'CONFIG',
    activity: 'PUBLISHED',
    severity: 'INFO',
    engine: 'dns',
    dst: { host: m.name, ip: m.syntheticIp },
    message: `Policy DNS mapped ${m.name} resolved=${m.addresses.join(',')} synthetic=${m.syntheticIp} ports=${m.ports.join(',')}`,
    generation: policy.generation,
    policyHash: policy.hash,
    unmapped: {
      normalized_domain: m.name,
      address_family: m.family === 4 ? 'ipv4' : 'ipv6',
      approved_real_ip_candidates: m.addresses,
      synthetic_ip: m.syntheticIp,
      allowed_ports: m.ports,
      policy_generation: m.policyGeneration,
      mapping_generation: m.mappingGeneration,
      mapping_id: m.id,
      mapping_ttl_seconds: m.ttlSeconds,
      endpoint_ids: m.endpointIds,
      epoch: m.epoch,
      ...(dropped.length === 0 ? {} : { dropped }),
    },
  };
}

export function highWaterEvent(pool: SyntheticPool, policy: Policy): AuditEvent {
  const stats = pool.stats();
  return {
    class: 'CONFIG',
    activity: 'HIGH_WATER',
    severity: 'MED',
    engine: 'dns',
    statusDetail: 'policy_dns_pool_high_water',
    message: `Policy DNS synthetic pool ${pool.windows[4]} is ${stats.reserved[4]}/${stats.capacity[4]} reserved`,
    generation: policy.generation,
    policyHash: policy.hash,
    unmapped: { reserved: stats.reserved[4], capacity: stats.capacity[4], epoch: pool.epoch },
  };
}

export function exhaustedFinding(name: string, message: string, policy: Policy): AuditEvent {
  return {
    class: 'FINDING',
    activity: 'BLOCKED',
    severity: 'HIGH',
    action: 'DENIED',
    engine: 'dns',
    dst: { host: name },
    statusDetail: 'policy_dns_pool_exhausted',
    message: `Policy DNS cannot map ${name}: ${message}`,
    generation: policy.generation,
    policyHash: policy.hash,
  };
}
