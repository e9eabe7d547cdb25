// Destination validation (docs/destinations.md#validation-plans): picks the plan for an endpoint and filters resolved answers.
// Pure: never resolves, never dials, never decides policy. A refusal is a value naming the check that failed.

import type { Endpoint } from '../policy/types.js';
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
export type SsrfCheck = (typeof SSRF_CHECKS)[number];

export interface Dropped {
  readonly ip: string;
  readonly class: AddressClass;
  readonly why: SsrfCheck;
}

export interface SelfAddress {
  readonly ip: string;
  readonly port: number;
}

export interface DestinationInput {
  readonly endpoint: Endpoint | undefined;
  /** Normalised destination host (net/host.ts); used in messages. */
  readonly host: string;
  readonly port: number;
  /** Resolver answers, or the IP literal itself. */
  readonly addresses: readonly string[];
  /** `--unsafe-allow-loopback-upstream`: 127.0.0.0/8 and ::1 pass every plan. Nothing else is relaxed. */
  readonly allowLoopback?: boolean | undefined;
  /** boundary's own listeners; an unspecified ip (0.0.0.0, ::) stands for every loopback address. */
  readonly selfAddresses?: readonly SelfAddress[] | undefined;
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
export function selectPlan(endpoint: Endpoint | undefined): ValidationPlan {
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
  readonly self: readonly { readonly ip: Ip; readonly port: number; readonly any: boolean }[];
  readonly allowLoopback: boolean;
}

export function validateDestination(input: DestinationInput): DestinationCheck {
  const plan = selectPlan(input.endpoint);
  const addresses = input.addresses;
  if (addresses.length === 0) return refuse(plan, 'no-addresses', `${where(input, plan)} has no addresses`);
  const prepared = prepare(plan, input);
  const portProblem = checkPort(plan, input.port);
  const survivors: string[] = [];
  const metadataAddresses: string[] = [];
  const dropped: Dropped[] = [];
  const checked = Math.min(addresses.length, MAX_ANSWERS_CHECKED);
  for (let i = 0; i < checked; i++) {
    const address = addresses[i] as string;
    const ip = readIp(address);
    if (ip === undefined) {
      dropped.push({ ip: address, class: 'invalid', why: 'always-blocked' });
      continue;
    }
    // A strict dotted quad is already canonical; IPv6 answers are re-spelt (RFC 5952).
    const canonical = ip.family === 4 ? address : formatIp(ip);
    const info = classifyIp(ip);
    const why = judge(prepared, ip, canonical, info) ?? portProblem;
    if (why !== undefined) {
      dropped.push({ ip: canonical, class: info.class, why });
      continue;
    }
    survivors.push(canonical);
    if (info.metadata) metadataAddresses.push(canonical);
  }
  if (survivors.length > 0) return { ok: true, plan, addresses: survivors, dropped, metadataAddresses };
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

/** The destination as refusal messages name it; built only on a refusal. */
function where(input: DestinationInput, plan: ValidationPlan): string {
  return `${input.host}:${input.port} (${plan} plan)`;
}

/** parseIp, with a fast path for the common case: a dotted-quad A record. */
function readIp(text: string): Ip | undefined {
  const word = parseDottedQuad(text);
  if (word === undefined) return text.includes(':') ? parseIp(text) : undefined;
  // Filled in place: cheaper than Uint8Array.of, which takes its arguments through the generic path.
  const bytes = new Uint8Array(4);
  bytes[0] = word >>> 24;
  bytes[1] = (word >>> 16) & 0xff;
  bytes[2] = (word >>> 8) & 0xff;
  bytes[3] = word & 0xff;
  return { family: 4, bytes };
}

function prepare(plan: ValidationPlan, input: DestinationInput): Prepared {
  const endpoint = input.endpoint;
  const allowed: Cidr[] = [];
  if (plan === 'allowed-ips' && endpoint !== undefined) {
    // An entry that does not parse never matches: fail closed (the policy parser rejects those anyway).
    for (const text of endpoint.allowedIps) {
      const cidr = parseCidr(text);
      if (cidr !== undefined) allowed.push(cidr);
    }
  }
  let literal: string | undefined;
  if (plan === 'ip-literal' && endpoint?.host !== undefined) {
    // The parser stores hosts normalised already; normalising again costs little and tolerates `[v6]`.
    const normal = normaliseHost(endpoint.host);
    literal = normal.ok && normal.kind !== 'name' ? normal.host : undefined;
  }
  const self = input.selfAddresses === undefined ? NO_SELF : prepareSelf(input.selfAddresses);
  return { plan, port: input.port, allowed, literal, self, allowLoopback: input.allowLoopback === true };
}

type PreparedSelf = Prepared['self'];
const NO_SELF: PreparedSelf = Object.freeze([]);

// The proxy hands the same frozen self-address list to every request (rebuilt only when a listener moves):
// parse it once per list. Keyed by identity, and only for frozen lists, whose entries cannot change under
// the key, so a hit is exactly what parsing again would give. Weak: a replaced list takes its entry along.
const preparedSelves = new WeakMap<readonly SelfAddress[], PreparedSelf>();

function prepareSelf(list: readonly SelfAddress[]): PreparedSelf {
  const memo = preparedSelves.get(list);
  if (memo !== undefined) return memo;
  const self: { ip: Ip; port: number; any: boolean }[] = [];
  for (const entry of list) {
    const ip = parseIp(entry.ip);
    if (ip === undefined) continue;
    self.push({ ip, port: entry.port, any: ip.bytes.every((b) => b === 0) });
  }
  if (Object.isFrozen(list) && list.every((entry) => Object.isFrozen(entry))) preparedSelves.set(list, Object.freeze(self));
  return self;
}

function judge(p: Prepared, ip: Ip, canonical: string, info: AddressInfo): SsrfCheck | undefined {
  // Self first: not even --unsafe-allow-loopback-upstream may open a path back into boundary's own listeners.
  if (isSelf(p, ip, info)) return 'self-address';
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

function isSelf(p: Prepared, ip: Ip, info: AddressInfo): boolean {
  for (const self of p.self) {
    if (self.port !== p.port) continue;
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
