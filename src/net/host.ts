// Hostname and authority normalisation for every adapter: one canonical spelling per destination.
// Pure. Numeric IPv4 in any WHATWG spelling (`127.1`, `0x7f.1`, `2852039166`) becomes a dotted quad here,
// so no caller ever hands such a string to a resolver (docs/destinations.md#the-host-parsing-trap). Never resolves, never classifies.

import { domainToASCII } from 'node:url';
import { formatIp, parseIp } from './ip.js';

/** Inputs longer than this are refused before any parsing (a name is at most 253 octets; slack for brackets). */
const MAX_HOST_INPUT_CHARS = 1_024;
/** RFC 1035: a name is at most 253 octets in text form without the trailing dot. */
export const MAX_NAME_CHARS = 253;
export const MAX_LABEL_CHARS = 63;
/** Distinct texts each parse memo (HostCache, memoisedAuthorityParser) holds; past this the oldest entry is forgotten. */
export const MAX_MEMO_ENTRIES = 1_024;
/** Longer texts are parsed every time: no valid authority is this long, and it bounds the memo's memory. */
export const MAX_MEMO_TEXT_CHARS = 300;

/** What a normalised host is: a DNS name or an IP literal of one family. */
const HOST_FORMS = ['name', 'ipv4', 'ipv6'] as const;
export type HostForm = (typeof HOST_FORMS)[number];

type HostResult =
  | { readonly ok: true; readonly host: string; readonly kind: HostForm }
  | { readonly ok: false; readonly message: string };

export type AuthorityResult =
  | { readonly ok: true; readonly host: string; readonly port: number; readonly kind: HostForm }
  | { readonly ok: false; readonly message: string };

// Refused anywhere in a host or authority: controls, space, DEL, and characters that would make a URL parser
// read userinfo, path, query or fragment. `%` is refused because URL-style parsers percent-decode hosts.
const FORBIDDEN_CHAR = /[\u0000-\u0020\u007f%@/?#\\]/;
// After IDNA a name label holds only these (underscore accepted: SRV-style labels, pin HA-14).
const NAME_CHARS = /^[a-z0-9_.-]+$/;
/** Port digits: 1-5 of them, no leading zero (`/^[1-9][0-9]{0,4}$/`, without a regex on the request path). */
const MAX_PORT_DIGITS = 5;

function isPortText(text: string): boolean {
  if (text.length === 0 || text.length > MAX_PORT_DIGITS || text.charCodeAt(0) === 0x30) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

function fail(message: string): { readonly ok: false; readonly message: string } {
  return { ok: false, message };
}

/** Adds `value` under `key`, forgetting the oldest entry (Map order is insertion order) once full. */
function remember<T>(memo: Map<string, T>, key: string, value: T): void {
  if (memo.size >= MAX_MEMO_ENTRIES) memo.delete(memo.keys().next().value as string);
  memo.set(key, value);
}

/**
 * A bounded memo of normaliseHost successes, keyed on the exact raw text. The composition root creates one
 * (createBoundary) and hands it to the request path: a proxy sees the same few hosts over and over, and each
 * request normalises its host twice (parseAuthority, then checkDestination). A hit also hands back the very
 * string stored the first time, whose hash V8 keeps, so the resolver cache and host index need not hash it again.
 */
export interface HostCache {
  get(raw: string): HostResult | undefined;
  /** Keeps successes only, frozen; texts longer than MAX_MEMO_TEXT_CHARS are never kept. */
  set(raw: string, result: HostResult): void;
  readonly size: number;
}

export function createHostCache(): HostCache {
  const memo = new Map<string, HostResult>();
  return {
    get: (raw) => memo.get(raw),
    set(raw, result) {
      if (result.ok && raw.length <= MAX_MEMO_TEXT_CHARS) remember(memo, raw, Object.freeze(result));
    },
    get size() {
      return memo.size;
    },
  };
}

/**
 * Canonical host: lower-case A-label name without the trailing dot, dotted-quad IPv4, or RFC 5952 IPv6
 * without brackets. Accepts `[v6]` and bare `v6`. Zone ids, percent-encoding and URL delimiters are refused.
 * With a `cache`, a text seen before is answered from it (the same frozen result); without one, parsed afresh.
 */
export function normaliseHost(raw: string, cache?: HostCache): HostResult {
  if (cache === undefined) return normaliseHostUncached(raw);
  const hit = cache.get(raw);
  if (hit !== undefined) return hit;
  const result = normaliseHostUncached(raw);
  cache.set(raw, result);
  return result;
}

/** normaliseHost without the memo: the full path, every time. */
export function normaliseHostUncached(raw: string): HostResult {
  if (raw.length === 0) return fail('host is empty');
  if (raw.length > MAX_HOST_INPUT_CHARS) return fail(`host is longer than ${MAX_HOST_INPUT_CHARS} characters`);
  // Fast path for the usual spelling: a name (or dotted quad) already in canonical characters passes every
  // character check below unchanged, so only the name/number rules remain to apply.
  if (isPlainLowerName(raw)) return normaliseAsciiName(raw, true);
  if (FORBIDDEN_CHAR.test(raw)) return fail('host contains whitespace, a control byte, %, @, /, ?, # or \\');
  if (raw.startsWith('[')) {
    if (!raw.endsWith(']')) return fail('unterminated [ in host');
    return normaliseIpv6(raw.slice(1, -1));
  }
  if (raw.includes(']')) return fail('unexpected ] in host');
  if (raw.includes(':')) return normaliseIpv6(raw);
  return normaliseNameOrIpv4(raw);
}

function normaliseIpv6(text: string): HostResult {
  if (text.includes('[') || text.includes(']')) return fail('nested brackets in host');
  const ip = parseIp(text);
  if (ip === undefined || ip.family !== 6) return fail('not a valid IPv6 literal');
  return { ok: true, host: formatIp(ip), kind: 'ipv6' };
}

/** Only `[a-z0-9_.-]`: already ASCII and lower-case, free of every FORBIDDEN_CHAR, and all NAME_CHARS. */
function isPlainLowerName(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (!((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d || c === 0x5f)) return false;
  }
  return true;
}

function normaliseNameOrIpv4(raw: string): HostResult {
  // IDNA first (as the WHATWG host parser does), so fullwidth digits or dots cannot dodge the IPv4 check.
  // domainToASCII also lower-cases; it returns '' for anything it cannot map.
  let ascii = raw;
  if (!/^[\u0000-\u007f]*$/.test(raw)) {
    ascii = domainToASCII(raw);
    if (ascii === '') return fail('host is not a valid internationalised domain name');
    if (FORBIDDEN_CHAR.test(ascii)) return fail('host maps to forbidden characters under IDNA');
  }
  ascii = ascii.toLowerCase();
  return normaliseAsciiName(ascii, false);
}

// From here on `ascii` is ASCII, lower-case and free of FORBIDDEN_CHAR; `plain` when it passed
// isPlainLowerName, so every NAME_CHARS test on it (or on a part of it) is already known to pass.
function normaliseAsciiName(ascii: string, plain: boolean): HostResult {
  if (endsInNumber(ascii)) {
    const ipv4 = parseWhatwgIpv4(ascii);
    if (ipv4 === undefined) return fail('host ends in a number but is not a valid IPv4 address');
    return { ok: true, host: ipv4, kind: 'ipv4' };
  }
  const name = ascii.endsWith('.') ? ascii.slice(0, -1) : ascii;
  if (name.length === 0) return fail('host is empty');
  if (name.length > MAX_NAME_CHARS) return fail(`host is longer than ${MAX_NAME_CHARS} characters`);
  if (!plain && !NAME_CHARS.test(name)) return fail('host has characters other than letters, digits, -, _ and .');
  let start = 0;
  for (let i = 0; i <= name.length; i++) {
    if (i < name.length && name.charCodeAt(i) !== 0x2e) continue;
    const length = i - start;
    if (length === 0) return fail('host has an empty label');
    if (length > MAX_LABEL_CHARS) return fail(`host has a label longer than ${MAX_LABEL_CHARS} characters`);
    start = i + 1;
  }
  // Validates xn-- labels (bad punycode maps to ''); a plain LDH name comes back unchanged.
  if (name.includes('xn--')) {
    const checked = domainToASCII(name);
    if (checked !== name) return fail('host has an invalid A-label (xn--)');
  }
  return { ok: true, host: name, kind: 'name' };
}

/** WHATWG "ends in a number": the last label (ignoring one trailing dot) is decimal digits or a 0x number. */
function endsInNumber(text: string): boolean {
  let end = text.length;
  if (text.endsWith('.')) {
    if (end === 1) return false;
    end -= 1;
  }
  const last = text.slice(text.lastIndexOf('.', end - 1) + 1, end);
  if (last.length === 0) return false;
  if (/^[0-9]+$/.test(last)) return true;
  return parseIpv4Number(last) !== undefined;
}

/** WHATWG IPv4 parser: 1-4 parts, each decimal, octal (leading 0) or hex (0x); the last part fills the rest. */
export function parseWhatwgIpv4(text: string): string | undefined {
  const parts = text.split('.');
  if (parts[parts.length - 1] === '' && parts.length > 1) parts.pop();
  if (parts.length > 4) return undefined;
  const numbers: number[] = [];
  for (const part of parts) {
    const value = parseIpv4Number(part);
    if (value === undefined) return undefined;
    numbers.push(value);
  }
  const last = numbers.pop() ?? 0;
  if (numbers.some((n) => n > 255)) return undefined;
  if (last >= 256 ** (4 - numbers.length)) return undefined;
  let address = last;
  numbers.forEach((n, i) => {
    address += n * 256 ** (3 - i);
  });
  return `${address >>> 24}.${(address >>> 16) & 0xff}.${(address >>> 8) & 0xff}.${address & 0xff}`;
}

/** `Number.parseInt(char, radix)` for one character (radix 8, 10 or 16), with -1 for NaN; no string built. */
function digitValue(code: number, radix: number): number {
  let digit = -1;
  if (code >= 0x30 && code <= 0x39) digit = code - 0x30;
  else if (code >= 0x61 && code <= 0x7a) digit = code - 0x61 + 10;
  else if (code >= 0x41 && code <= 0x5a) digit = code - 0x41 + 10;
  return digit < radix ? digit : -1;
}

/** One WHATWG IPv4 part (decimal, octal with a leading 0, hex with 0x); Infinity beyond 32 bits. */
export function parseIpv4Number(part: string): number | undefined {
  if (part.length === 0) return undefined;
  let radix = 10;
  let digits = part;
  if (part.length >= 2 && (part.startsWith('0x') || part.startsWith('0X'))) {
    radix = 16;
    digits = part.slice(2);
  } else if (part.length >= 2 && part.startsWith('0')) {
    radix = 8;
    digits = part.slice(1);
  }
  let value = 0;
  for (let i = 0; i < digits.length; i++) {
    const digit = digitValue(digits.charCodeAt(i), radix);
    if (digit < 0) return undefined;
    value = value * radix + digit;
    // Still a number (so the host "ends in a number"), but one that fails every range check: stop before
    // precision is lost. Returning undefined here would let `0x100000000` pass as a name.
    if (value > 0xffff_ffff) return Number.POSITIVE_INFINITY;
  }
  return value;
}

/**
 * `host:port` as in a CONNECT target or Host header. IPv6 must be bracketed; the port is digits only, no
 * leading zero, 1-65535. Without a port, `defaultPort` is used when given, else the authority is refused.
 */
export function parseAuthority(text: string, options: { readonly defaultPort?: number; readonly hosts?: HostCache | undefined } = {}): AuthorityResult {
  if (text.length === 0) return fail('authority is empty');
  if (text.length > MAX_HOST_INPUT_CHARS) return fail(`authority is longer than ${MAX_HOST_INPUT_CHARS} characters`);
  if (FORBIDDEN_CHAR.test(text)) return fail('authority contains whitespace, a control byte, %, @, /, ?, # or \\');
  let hostText: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return fail('unterminated [ in authority');
    hostText = text.slice(0, close + 1);
    const rest = text.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return fail('unexpected characters after ] in authority');
      portText = rest.slice(1);
    }
  } else {
    const colon = text.indexOf(':');
    if (colon !== text.lastIndexOf(':')) return fail('IPv6 literal in an authority must be bracketed');
    hostText = colon < 0 ? text : text.slice(0, colon);
    if (colon >= 0) portText = text.slice(colon + 1);
  }
  let port: number;
  if (portText === undefined) {
    if (options.defaultPort === undefined) return fail('authority has no port');
    port = options.defaultPort;
  } else {
    if (!isPortText(portText)) return fail('port must be digits 1-65535 without leading zeros');
    port = Number(portText);
    if (port > 65_535) return fail('port must be digits 1-65535 without leading zeros');
  }
  if (hostText.length === 0) return fail('authority has an empty host');
  const host = normaliseHost(hostText, options.hosts);
  if (!host.ok) return host;
  return { ok: true, host: host.host, port, kind: host.kind };
}

/**
 * parseAuthority(text, { defaultPort }) behind a bounded memo keyed on the exact text (the default port is
 * fixed per memo): a client sends the same absolute-form authority request after request. Only successes
 * are kept, frozen and shared between callers.
 */
export function memoisedAuthorityParser(defaultPort: number): (text: string) => AuthorityResult {
  const memo = new Map<string, AuthorityResult>();
  const options = { defaultPort };
  return function parseAuthorityMemoised(text: string): AuthorityResult {
    if (text.length > MAX_MEMO_TEXT_CHARS) return parseAuthority(text, options);
    const hit = memo.get(text);
    if (hit !== undefined) return hit;
    const result = parseAuthority(text, options);
    if (result.ok) remember(memo, text, Object.freeze(result));
    return result;
  };
}

/** `host:port`, with IPv6 bracketed. */
export function formatAuthority(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
