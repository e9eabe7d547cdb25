// Turns a normalised destination into the validated addresses that may be dialled: name checks, one
// resolution (A only) through the lookup gate, then ssrf.ts. Never dials, never decides policy, never resolves an IP literal.

import { type HostCache, type HostForm, normaliseHost } from './host.js';
import type { LookupEndpoint, LookupGate, LookupRefusal } from './lookup-gate.js';
import type { ResolveFailure, ResolveResult } from './resolver.js';
import { checkPort, type DeclaredEndpoint, type DestinationCheck, refuse, type SelfAddresses, selectPlan, type ValidationPlan, validateDestination } from './ssrf.js';

/** Names that only ever lead to a cloud metadata service; refused before any resolution. */
export const KNOWN_METADATA_NAMES: ReadonlySet<string> = new Set([
  'metadata.google.internal',
  'metadata',
  'instance-data',
  'instance-data.ec2.internal',
]);

export interface DestinationRequest {
  /** Normalised host (net/host.ts normaliseHost). */
  readonly host: string;
  /** From normaliseHost; the host is normalised again here, so a mislabelled literal is still caught. */
  readonly kind: HostForm;
  readonly port: number;
  readonly endpoint: DeclaredEndpoint | undefined;
  /** The endpoints of the allow decision: the lookup gate screens and charges a name only wildcards cover. */
  readonly endpoints: readonly LookupEndpoint[];
  /** The one lookup gate (net/lookup-gate.ts): every resolution goes through it. */
  readonly lookups: LookupGate;
  readonly allowLoopback?: boolean | undefined;
  readonly selfAddresses?: SelfAddresses | undefined;
  /** The composition root's host cache (net/host.ts createHostCache): the re-normalisation below is then a hit. */
  readonly hosts?: HostCache | undefined;
}

/** The resolver could not answer: not an SSRF refusal. Adapters map it to 502 upstream_unreachable. */
export interface ResolveFailureResult {
  readonly ok: false;
  readonly kind: 'resolve-failed';
  readonly plan: ValidationPlan;
  readonly failure: ResolveFailure;
  readonly message: string;
}

export function isResolveFailure(result: DestinationResult): result is ResolveFailureResult {
  return 'kind' in result && result.kind === 'resolve-failed';
}

/** The lookup gate refused to send the name upstream (docs/dns.md#the-lookup-gate): nothing was resolved. */
export interface LookupRefusedResult {
  readonly ok: false;
  readonly kind: 'lookup-refused';
  readonly refusal: LookupRefusal;
}

export function isLookupRefused(result: DestinationResult): result is LookupRefusedResult {
  return 'kind' in result && result.kind === 'lookup-refused';
}

/** RFC 6761: `localhost` and everything under it is local by definition and is never sent to a resolver. */
export function isLocalName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost');
}

export type DestinationResult = DestinationCheck | ResolveFailureResult | LookupRefusedResult;

/** What a run lets through besides the policy: the same two switches checkDestination is handed. */
export interface RunDestinations {
  /** `--unsafe-allow-loopback-upstream`. */
  readonly allowLoopback: boolean;
  /** boundary's own listeners. */
  readonly selfAddresses: SelfAddresses;
  /** The proxy's memo of normalised hosts: asked once per request, most hosts repeat. */
  readonly hosts?: HostCache | undefined;
}

/** A destination no policy entry can open (docs/destinations.md#always-blocked): the check, and the address class. */
export interface PermanentRefusal {
  readonly check: string;
  /** The address class of an IP literal (`metadata`, `loopback`, ...), or the kind of name (`local-name`, `metadata-name`). */
  readonly addressClass: string;
  readonly message: string;
}

/** How a refused IP literal is described; CLASS is its address class. */
const PERMANENT_WHY: Readonly<Record<string, string>> = {
  'self-address': "is boundary's own listener",
  'always-blocked': 'is a CLASS address, always blocked',
  'control-plane-port': 'is a control-plane port on an IP literal',
};

/** permanentRefusal with a run's switches bound: what the proxy, explain and check are each handed. */
export type PermanentCheck = (host: string, port: number) => PermanentRefusal | undefined;

/**
 * Whether host:port is refused whatever the policy says, decided before any policy or resolver is asked: a local or
 * metadata name, an IP literal in an always-blocked class, boundary's own listener. The one answer the proxy, policy
 * check, policy explain and /v1/explain give. A name that merely resolves to such an address is found at runtime only.
 */
export function permanentRefusal(host: string, port: number, run: RunDestinations): PermanentRefusal | undefined {
  const normal = normaliseHost(host, run.hosts);
  if (!normal.ok) return { check: 'invalid-host', addressClass: 'invalid', message: `invalid-host: ${JSON.stringify(host)}: ${normal.message}` };
  const name = normal.host;
  if (normal.kind === 'name') {
    if (isLocalName(name)) return { check: 'local-name', addressClass: 'local-name', message: `local-name: ${name} is a local name and is never resolved` };
    if (KNOWN_METADATA_NAMES.has(name)) return { check: 'metadata-name', addressClass: 'metadata-name', message: `metadata-name: ${name} is a cloud metadata name` };
    return undefined;
  }
  // The literal's own plan (an entry naming exactly this address): what is still refused then, no entry can open.
  const endpoint = { host: name, hostKind: 'ip', allowedIps: [] };
  const check = validateDestination({ endpoint, host: name, port, addresses: [name], allowLoopback: run.allowLoopback, selfAddresses: run.selfAddresses });
  if (check.ok) return undefined;
  const addressClass = check.dropped[0]?.class ?? 'invalid';
  const where = `${name.includes(':') ? `[${name}]` : name}:${port}`;
  const why = PERMANENT_WHY[check.check] ?? `is refused (${check.check})`;
  return { check: check.check, addressClass, message: `${check.check}: ${where} ${why.replace('CLASS', addressClass)}` };
}


/**
 * Resolves once (through the lookup gate, never at dial time) and validates every answer for the endpoint's plan. The
 * result comes now when nothing must be asked (an IP literal, a name refused before resolving, a fresh answer the
 * gate holds), else as a promise: a request whose answers are at hand stays in its turn.
 */
export function checkDestination(request: DestinationRequest): DestinationResult | Promise<DestinationResult> {
  const name = preflight(request);
  if (typeof name !== 'string') return name;
  const plan = selectPlan(request.endpoint);
  const held = request.lookups.cached(name);
  if (held !== undefined) return answered(request, name, plan, held);
  // Once, A only: IPv6 egress is off. The connector dials only what survives below; nothing re-resolves.
  const pending = request.lookups.lookup(name, { endpoints: request.endpoints, via: 'proxy' });
  if ('refused' in pending) return { ok: false, kind: 'lookup-refused', refusal: pending };
  return pending.then((answer) => answered(request, name, plan, answer));
}

/** Everything decided before resolving: the check itself, or the normalised name that must be resolved. */
function preflight(request: DestinationRequest): DestinationCheck | string {
  const { port, endpoint } = request;
  // Callers pass normaliseHost output; normalising again is cheap and means a raw `127.1` or `0x7f.1` that
  // slipped through as a "name" is still treated as the IP literal it is and never reaches the resolver.
  const normal = normaliseHost(request.host, request.hosts);
  if (!normal.ok) return refuse(selectPlan(endpoint), 'invalid-host', `${JSON.stringify(request.host)}: ${normal.message}`);
  const host = normal.host;
  if (normal.kind !== 'name') return validate(request, host, [host]);
  const plan = selectPlan(endpoint);
  if (isLocalName(host)) return refuse(plan, 'local-name', `${host} is a local name and is never resolved`);
  if (KNOWN_METADATA_NAMES.has(host)) return refuse(plan, 'metadata-name', `${host} is a cloud metadata name`);
  // A port that the plan refuses whatever the answers are: no DNS query for it.
  const portProblem = checkPort(plan, port);
  if (portProblem !== undefined) return refuse(plan, portProblem, `port ${port} is a control-plane port (${plan} plan)`);
  return host;
}

function answered(request: DestinationRequest, host: string, plan: ValidationPlan, answer: ResolveResult): DestinationResult {
  if (!answer.ok) {
    return { ok: false, kind: 'resolve-failed', plan, failure: answer.failure, message: `resolving ${host} failed (${answer.failure}): ${answer.message}` };
  }
  return validate(request, host, answer.addresses);
}

function validate(request: DestinationRequest, host: string, addresses: readonly string[]): DestinationCheck {
  const { endpoint, port, allowLoopback, selfAddresses } = request;
  return validateDestination({ endpoint, host, port, addresses, allowLoopback, selfAddresses });
}
