// Destination validation (docs/destinations.md#validation-plans): picks the plan for an endpoint and filters resolved answers.
// Pure: never resolves, never dials, never decides policy. A refusal is a value naming the check that failed.

import { networkInterfaces } from 'node:os';
import { type AddressClass, type AddressInfo, classifyIp, parseDottedQuad } from './address.js';
import { normaliseHost } from './host.js';
import { type Cidr, cidrContains, formatIp, type Ip, parseCidr, parseIp } from './ip.js';

/** Answers looked at per destination; later ones are ignored (never dialled). A dialer needs only a few. */
export const MAX_ANSWERS_CHECKED = 32;

/** Kubernetes and etcd control-plane ports: blocked on every plan except public-only (pin NM-13). */
export const CONTROL_PLANE_PORTS: ReadonlySet<number> = new Set([2379, 2380, 6443, 10250, 10255]);

export const VALIDATION_PLANS = ['allowed-ips', 'ip-literal', 'exact-host', 'public-only'] as const;
export type ValidationPlan = (typeof VALIDATION_PLANS)[number];

/** Closed set, most severe first: a refusal reports the most severe check among its dropped answers. */
export const SSRF_CHECKS = [
  'self-address',
  'always-blocked',
  'metadata-name',
  'local-name',
  'invalid-host',
  'control-plane-port',
  'declared-endpoint',
  'allowed-ips',
  'internal-address',
  'no-addresses',
] as const;
type SsrfCheck = (typeof SSRF_CHECKS)[number];

/**
 * What a validation plan is chosen from: the matched endpoint's declared host, how it was written and its
 * allowed_ips. Declared here so net/ needs nothing from policy/; policy's Endpoint satisfies it as it is.
 */
export interface DeclaredEndpoint {
  /** Normalised host as declared; undefined for the hostless allowed_ips form. */
  readonly host: string | undefined;
  /** `exact` and `ip` select their own plans; any other form (wildcard, any) is public-only. */
  readonly hostKind: string;
  /** CIDRs in canonical text form; non-empty selects the allowed-ips plan. */
  readonly allowedIps: readonly string[];
}

interface Dropped {
  readonly ip: string;
  readonly class: AddressClass;
  readonly why: SsrfCheck;
}

export interface SelfAddress {
  readonly ip: string;
  readonly port: number;
}

/**
 * boundary's own listeners, parsed once by prepareSelfAddresses(). The owner (proxy/server.ts) builds one
 * when a listener moves and hands the same object to every check; nothing is looked up by identity.
 */
export interface SelfAddresses {
  /** The list as given, for messages and for whoever rebuilds it. */
  readonly list: readonly SelfAddress[];
  /** @internal parsed form read by validateDestination. */
  readonly parsed: readonly { readonly ip: Ip; readonly port: number; readonly any: boolean }[];
}

/** A list that contains no listener: for checks that have none to protect (tests, policy re-evaluation). */
export const NO_SELF_ADDRESSES: SelfAddresses = Object.freeze({ list: Object.freeze([]), parsed: Object.freeze([]) });

/** Shared empty lists: a check with nothing dropped, no metadata survivor, no allowed_ips makes none of its own. */
const NONE_DROPPED: readonly Dropped[] = Object.freeze([]);
const NO_ADDRESSES: readonly string[] = Object.freeze([]);
const NO_CIDRS: readonly Cidr[] = Object.freeze([]);

/** The addresses of this host's interfaces (the pod's, in a pod), as the kernel lists them now. */
function interfaceAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((addresses) => (addresses ?? []).map((a) => a.address));
}

/**
 * Parses `list` once (entries that are not IP literals are skipped); frozen, so it can be shared. A listener on an
 * unspecified address (0.0.0.0, ::) is reached on its port through every loopback address and through each of
 * `hostAddresses` (default: the interfaces' addresses now; a pod's do not change while it runs).
 */
export function prepareSelfAddresses(list: readonly SelfAddress[], hostAddresses: () => readonly string[] = interfaceAddresses): SelfAddresses {
  if (list.length === 0) return NO_SELF_ADDRESSES;
  const parsed: { ip: Ip; port: number; any: boolean }[] = [];
  let host: readonly Ip[] | undefined;
  for (const entry of list) {
    const ip = parseIp(entry.ip);
    if (ip === undefined) continue;
    const any = ip.bytes.every((b) => b === 0);
    parsed.push(Object.freeze({ ip, port: entry.port, any }));
    if (!any) continue;
    host ??= hostAddresses().flatMap((address) => parseIp(address) ?? []);
    for (const own of host) parsed.push(Object.freeze({ ip: own, port: entry.port, any: false }));
  }
  return Object.freeze({ list: Object.freeze(list.map((e) => Object.freeze({ ip: e.ip, port: e.port }))), parsed: Object.freeze(parsed) });
}

export interface DestinationInput {
  readonly endpoint: DeclaredEndpoint | undefined;
  /** Normalised destination host (net/host.ts); used in messages. */
  readonly host: string;
  readonly port: number;
  /** Resolver answers, or the IP literal itself. */
  readonly addresses: readonly string[];
  /** `--unsafe-allow-loopback-upstream`: 127.0.0.0/8 and ::1 pass every plan. Nothing else is relaxed. */
  readonly allowLoopback?: boolean | undefined;
  /** boundary's own listeners; an unspecified ip (0.0.0.0, ::) stands for every loopback address. */
  readonly selfAddresses?: SelfAddresses | undefined;
}

export type DestinationCheck =
  | {
      readonly ok: true;
      readonly plan: ValidationPlan;
      /** Survivors in canonical text form, in answer order: the only addresses that may be dialled. */
      readonly addresses: readonly string[];
      readonly dropped: readonly Dropped[];
      /** Survivors that are cloud metadata addresses (allowed internal ones such as 100.100.100.200): a finding. */
      readonly metadataAddresses: readonly string[];
    }
  | {
      readonly ok: false;
      readonly plan: ValidationPlan;
      readonly check: SsrfCheck;
      readonly message: string;
      readonly dropped: readonly Dropped[];
    };

/** First match wins: allowed_ips, then an IP-literal host, then an exact host, else public-only. */
export function selectPlan(endpoint: DeclaredEndpoint | undefined): ValidationPlan {
  if (endpoint === undefined) return 'public-only';
  if (endpoint.allowedIps.length > 0) return 'allowed-ips';
  if (endpoint.hostKind === 'ip') return 'ip-literal';
  if (endpoint.hostKind === 'exact') return 'exact-host';
  return 'public-only';
}

/** The port-level check, usable before resolving: undefined when the port is acceptable on the plan. */
export function checkPort(plan: ValidationPlan, port: number): SsrfCheck | undefined {
  return plan !== 'public-only' && CONTROL_PLANE_PORTS.has(port) ? 'control-plane-port' : undefined;
}

/** A refusal that happened before any address was looked at (names, ports). */
export function refuse(plan: ValidationPlan, check: SsrfCheck, message: string, dropped: readonly Dropped[] = []): DestinationCheck {
  return { ok: false, plan, check, message: `${check}: ${message}`, dropped };
}

interface Prepared {
  readonly plan: ValidationPlan;
  readonly port: number;
  readonly allowed: readonly Cidr[];
  readonly literal: string | undefined;
  readonly self: SelfAddresses['parsed'];
  readonly allowLoopback: boolean;
}

export function validateDestination(input: DestinationInput): DestinationCheck {
  const plan = selectPlan(input.endpoint);
  const addresses = input.addresses;
  if (addresses.length === 0) return refuse(plan, 'no-addresses', `${where(input, plan)} has no addresses`);
  const prepared = prepare(plan, input);
  const portProblem = checkPort(plan, input.port);
  const survivors: string[] = [];
  // Made only when an answer is dropped or is a metadata address: most checks have neither.
  let metadataAddresses: string[] | undefined;
  let dropped: Dropped[] | undefined;
  const checked = Math.min(addresses.length, MAX_ANSWERS_CHECKED);
  for (let i = 0; i < checked; i++) {
    const address = addresses[i] as string;
    const ip = readIp(address);
    if (ip === undefined) {
      dropped = appended(dropped, { ip: address, class: 'invalid', why: 'always-blocked' });
      continue;
    }
    // A strict dotted quad is already canonical; IPv6 answers are re-spelt (RFC 5952).
    const canonical = ip.family === 4 ? address : formatIp(ip);
    const info = classifyIp(ip);
    const why = judge(prepared, ip, canonical, info) ?? portProblem;
    if (why !== undefined) {
      dropped = appended(dropped, { ip: canonical, class: info.class, why });
      continue;
    }
    survivors.push(canonical);
    if (info.metadata) metadataAddresses = appended(metadataAddresses, canonical);
  }
  if (survivors.length > 0) return { ok: true, plan, addresses: survivors, dropped: dropped ?? NONE_DROPPED, metadataAddresses: metadataAddresses ?? NO_ADDRESSES };
  // Every answer was dropped: at least one is listed.
  dropped ??= [];
  let check: SsrfCheck = 'always-blocked';
  let rank: number = SSRF_CHECKS.length;
  for (const d of dropped) {
    const r = SSRF_CHECKS.indexOf(d.why);
    if (r < rank) {
      check = d.why;
      rank = r;
    }
  }
  const list = dropped.map((d) => `${d.ip} (${d.class}, ${d.why})`).join(', ');
  return refuse(plan, check, `${where(input, plan)}: every answer was dropped: ${list}`, dropped);
}

/** `list` with `item` at its end, made on the first item. */
function appended<T>(list: T[] | undefined, item: T): T[] {
  if (list === undefined) return [item];
  list.push(item);
  return list;
}

/** The destination as refusal messages name it; built only on a refusal. */
function where(input: DestinationInput, plan: ValidationPlan): string {
  return `${input.host}:${input.port} (${plan} plan)`;
}

/** One dotted quad at a time, overwritten by the next: validateDestination reads each answer's Ip within its
 *  own loop turn and keeps none (it keeps the text), so no array is made per answer. */
const V4_SCRATCH: { readonly family: 4; readonly bytes: Uint8Array } = { family: 4, bytes: new Uint8Array(4) };

/** parseIp, with a fast path for the common case: a dotted-quad A record (read into V4_SCRATCH). */
function readIp(text: string): Ip | undefined {
  const word = parseDottedQuad(text);
  if (word === undefined) return text.includes(':') ? parseIp(text) : undefined;
  const bytes = V4_SCRATCH.bytes;
  bytes[0] = word >>> 24;
  bytes[1] = (word >>> 16) & 0xff;
  bytes[2] = (word >>> 8) & 0xff;
  bytes[3] = word & 0xff;
  return V4_SCRATCH;
}

function prepare(plan: ValidationPlan, input: DestinationInput): Prepared {
  const endpoint = input.endpoint;
  let allowed: readonly Cidr[] = NO_CIDRS;
  if (plan === 'allowed-ips' && endpoint !== undefined) {
    const parsed: Cidr[] = [];
    // An entry that does not parse never matches: fail closed (the policy parser rejects those anyway).
    for (const text of endpoint.allowedIps) {
      const cidr = parseCidr(text);
      if (cidr !== undefined) parsed.push(cidr);
    }
    allowed = parsed;
  }
  let literal: string | undefined;
  if (plan === 'ip-literal' && endpoint?.host !== undefined) {
    // The parser stores hosts normalised already; normalising again costs little and tolerates `[v6]`.
    const normal = normaliseHost(endpoint.host);
    literal = normal.ok && normal.kind !== 'name' ? normal.host : undefined;
  }
  const self = (input.selfAddresses ?? NO_SELF_ADDRESSES).parsed;
  return { plan, port: input.port, allowed, literal, self, allowLoopback: input.allowLoopback === true };
}

function judge(p: Prepared, ip: Ip, canonical: string, info: AddressInfo): SsrfCheck | undefined {
  // Self first: not even --unsafe-allow-loopback-upstream may open a path back into boundary's own listeners.
  if (isSelf(p.self, p.port, ip, info)) return 'self-address';
  // Only plain 127/8 and ::1: mapped or embedded loopback stays blocked even in local development.
  if (p.allowLoopback && info.class === 'loopback' && info.embedded === undefined) return undefined;
  if (info.tier === 'blocked') return 'always-blocked';
  switch (p.plan) {
    case 'allowed-ips':
      return p.allowed.some((cidr) => cidrContains(cidr, ip)) ? undefined : 'allowed-ips';
    case 'ip-literal':
      return canonical === p.literal ? undefined : 'declared-endpoint';
    case 'exact-host':
      return undefined;
    case 'public-only':
      return info.tier === 'internal' ? 'internal-address' : undefined;
  }
}

/** True when `ip`:`port` reaches one of boundary's own listeners (for a check outside validateDestination). */
export function isSelfAddress(selves: SelfAddresses, ip: string, port: number): boolean {
  const parsed = parseIp(ip);
  return parsed !== undefined && isSelf(selves.parsed, port, parsed, classifyIp(parsed));
}

function isSelf(selves: SelfAddresses['parsed'], port: number, ip: Ip, info: AddressInfo): boolean {
  // Indexed: for...of made an iterator per check here.
  for (let i = 0; i < selves.length; i++) {
    const self = selves[i] as SelfAddresses['parsed'][number];
    if (self.port !== port) continue;
    if (self.any && info.class === 'loopback') return true;
    if (sameBytes(self.ip, ip)) return true;
    // ::ffff:10.0.0.5 reaches a listener on 10.0.0.5.
    if (info.embedded !== undefined && self.ip.family === 4 && info.embedded === formatIp(self.ip)) return true;
  }
  return false;
}

function sameBytes(a: Ip, b: Ip): boolean {
  if (a.family !== b.family) return false;
  for (let i = 0; i < a.bytes.length; i++) if (a.bytes[i] !== b.bytes[i]) return false;
  return true;
}
