// Renders an AuditEvent as an OCSF v1.8.0 object and as the one-line shorthand (docs/events.md). Pure: no
// clock, no I/O. Defensive on the way out: query strings are cut, control characters and lengths bounded.
import type { AuditEvent, EventClass, Severity } from './event.js';
import { simpleHttpUrl } from './simple-url.js';

export const OCSF_VERSION = '1.8.0';
/** docs/events.md#limits: the shorthand reason is at most 256 characters. */
export const MAX_REASON_CHARS = 256;
/** Any other string we render is cut here, so one event can never produce an unbounded line. */
export const MAX_FIELD_CHARS = 1024;
export const MAX_UNMAPPED_KEYS = 64;
/** Short fields, cut shorter: method and activity labels, a policy name or hash, the CONFIG state, a DNS type. */
export const MAX_METHOD_CHARS = 32;
export const MAX_NAME_CHARS = 128;
export const MAX_STATE_CHARS = 64;
export const MAX_QTYPE_CHARS = 16;
/** The sidecar does not know which workload process dialled; shorthand prints this in `<actor>(<pid>)`. */
export const UNKNOWN_ACTOR = '-(-)';

export interface ProductInfo {
  readonly name: string;
  readonly vendorName: string;
  readonly version?: string;
}
export const DEFAULT_PRODUCT: ProductInfo = { name: 'boundary', vendorName: 'boundary' };

export interface OcsfMeta {
  /** Epoch milliseconds. */
  readonly time: number;
  readonly product?: ProductInfo;
  readonly uid?: string;
}

interface OcsfEndpoint {
  domain?: string;
  ip?: string;
  port?: number;
}

/** The OCSF object as written to logs and forwarded to the supervisor. Field names are OCSF's. */
export interface OcsfEvent {
  class_uid: number;
  class_name: string;
  category_uid: number;
  category_name: string;
  activity_id: number;
  activity_name: string;
  type_uid: number;
  type_name: string;
  severity_id: number;
  severity: string;
  status_id: number;
  status: string;
  time: number;
  message: string;
  status_detail?: string;
  action_id?: number;
  action?: string;
  disposition_id?: number;
  disposition?: string;
  dst_endpoint?: OcsfEndpoint;
  src_endpoint?: OcsfEndpoint;
  firewall_rule?: { name?: string; type?: string };
  http_request?: {
    http_method: string;
    url: { url_string: string; scheme?: string; hostname?: string; port?: number; path?: string };
  };
  query?: { hostname: string; type?: string };
  rcode_id?: number;
  rcode?: string;
  finding_info?: { title: string; uid: string };
  metadata: { product: { name: string; vendor_name: string; version?: string }; version: string; uid?: string };
  unmapped: Record<string, unknown>;
}

/** Shared with ocsf-json.ts and ocsf-fragments.ts, which render the same object as JSON text. */
export const CLASSES: Readonly<Record<EventClass, { uid: number; name: string; category: number; categoryName: string }>> = {
  NET: { uid: 4001, name: 'Network Activity', category: 4, categoryName: 'Network Activity' },
  HTTP: { uid: 4002, name: 'HTTP Activity', category: 4, categoryName: 'Network Activity' },
  DNS: { uid: 4003, name: 'DNS Activity', category: 4, categoryName: 'Network Activity' },
  CONFIG: { uid: 5019, name: 'Device Config State Change', category: 5, categoryName: 'Discovery' },
  FINDING: { uid: 2004, name: 'Detection Finding', category: 2, categoryName: 'Findings' },
};

type ActivityTable = Readonly<Record<string, readonly [number, string]>>;
const NET_ACTIVITIES: ActivityTable = {
  OPEN: [1, 'Open'], CLOSE: [2, 'Close'], RESET: [3, 'Reset'], FAIL: [4, 'Fail'],
  REFUSE: [5, 'Refuse'], TRAFFIC: [6, 'Traffic'], LISTEN: [7, 'Listen'], OTHER: [99, 'Other'],
};
const HTTP_ACTIVITIES: ActivityTable = {
  UNKNOWN: [0, 'Unknown'], CONNECT: [1, 'Connect'], DELETE: [2, 'Delete'], GET: [3, 'Get'], HEAD: [4, 'Head'],
  OPTIONS: [5, 'Options'], POST: [6, 'Post'], PUT: [7, 'Put'], TRACE: [8, 'Trace'], PATCH: [9, 'Patch'],
};
const DNS_ACTIVITIES: ActivityTable = { QUERY: [1, 'Query'], RESPONSE: [2, 'Response'], TRAFFIC: [6, 'Traffic'] };
// Detection Finding activities are Create/Update/Close; the label (BLOCKED) is the disposition.
const FINDING_ACTIVITIES: ActivityTable = { BLOCKED: [1, 'Create'], CREATE: [1, 'Create'], UPDATE: [2, 'Update'], CLOSE: [3, 'Close'] };

export const SEVERITY_IDS: Readonly<Record<Severity, readonly [number, string]>> = {
  INFO: [1, 'Informational'], LOW: [2, 'Low'], MED: [3, 'Medium'], HIGH: [4, 'High'], CRIT: [5, 'Critical'], FATAL: [6, 'Fatal'],
};
export const DNS_RCODES: Readonly<Record<string, readonly [number, string]>> = {
  NOERROR: [0, 'NoError'], FORMERR: [1, 'FormError'], SERVFAIL: [2, 'ServError'],
  NXDOMAIN: [3, 'NXDomain'], NOTIMP: [4, 'NotImp'], REFUSED: [5, 'Refused'],
};
const FAILED_ACTIVITIES = new Set(['FAIL', 'REFUSE', 'RESET']);

/** OCSF status Failure: a denial, or a NET activity that did not complete. */
export function isFailure(event: AuditEvent): boolean {
  return event.action === 'DENIED' || (event.class === 'NET' && FAILED_ACTIVITIES.has(event.activity));
}

/** OCSF activity for the event's class; CONFIG labels are data-source specific (99 Other, label kept). */
export function activityOf(event: AuditEvent): readonly [number, string] {
  const label = event.activity.toUpperCase();
  const table =
    event.class === 'NET' ? NET_ACTIVITIES
    : event.class === 'HTTP' ? HTTP_ACTIVITIES
    : event.class === 'DNS' ? DNS_ACTIVITIES
    : event.class === 'FINDING' ? FINDING_ACTIVITIES
    : {};
  return table[label] ?? [99, label.length > 0 ? label : 'Other'];
}

// A URL (scheme://...) or a path (/...) followed by ?query or #fragment: keep only what precedes it.
const QUERY_IN_TEXT = /((?:[a-z][a-z0-9+.-]*:\/\/|\/)[^\s?#]*)[?#][^\s\]]*/gi;
// C0, DEL, C1 and the Unicode line separators: anything that could break or forge a log line.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** Any character either regex above could change: `?`, `#` or a control character (one native scan). */
const NOT_PLAIN = /[\u0000-\u001f#?\u007f-\u009f\u2028\u2029]/;

/** Bounded, single-line, query-free text. */
export function cleanText(text: string, maxChars = MAX_FIELD_CHARS): string {
  // Most fields (hosts, reasons, paths without a query) need no rewriting: one scan instead of two regexes.
  const cleaned = NOT_PLAIN.test(text) ? text.replace(CONTROL, ' ').replace(QUERY_IN_TEXT, '$1') : text;
  return cleaned.length > maxChars ? cleaned.slice(0, maxChars) : cleaned;
}

/** The URL without query string or fragment. */
export function stripQuery(url: string): string {
  const q = url.indexOf('?');
  const h = url.indexOf('#');
  const cut = q === -1 ? h : h === -1 ? q : Math.min(q, h);
  return cut === -1 ? url : url.slice(0, cut);
}

/**
 * Keys whose values are censored anywhere under `unmapped`: the secret-shaped keys and headers the logger's
 * redaction names, plus whole header maps. Audit lines bypass pino's redaction (they are rendered here from
 * closed fields), so this is where that second line of defence lives for them.
 */
export const CENSORED_UNMAPPED_KEYS: ReadonlySet<string> = new Set([
  'secret',
  'value',
  'password',
  'token',
  'headers',
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
]);
export const UNMAPPED_CENSOR = '[redacted]';

/** JSON-safe, bounded: strings cleaned, objects at most 3 deep and MAX_UNMAPPED_KEYS wide, no functions. */
function cleanUnmapped(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case 'string':
      return cleanText(value);
    case 'number':
    case 'boolean':
    case 'undefined':
      return value;
    case 'bigint':
      return value.toString();
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return null;
  if (depth >= 3) return '[nested]';
  if (Array.isArray(value)) {
    const items = value.length > MAX_UNMAPPED_KEYS ? value.slice(0, MAX_UNMAPPED_KEYS) : value;
    return items.map((item) => cleanUnmapped(item, depth + 1));
  }
  const out: Record<string, unknown> = {};
  let count = 0;
  for (const key in value as Record<string, unknown>) {
    if (!Object.hasOwn(value as object, key)) continue;
    if (count++ >= MAX_UNMAPPED_KEYS) break;
    out[key] = CENSORED_UNMAPPED_KEYS.has(key.toLowerCase()) ? UNMAPPED_CENSOR : cleanUnmapped((value as Record<string, unknown>)[key], depth + 1);
  }
  return out;
}

/** An IP literal in a destination `host` is an address, not a domain: digits and dots only, or any colon. */
export function isAddressHost(host: string): boolean {
  let digitsAndDots = host.length > 0;
  for (let i = 0; i < host.length; i++) {
    const c = host.charCodeAt(i);
    if (c === 58) return true; // ':'
    if (c !== 46 && (c < 48 || c > 57)) digitsAndDots = false;
  }
  return digitsAndDots;
}

function endpoint(host: string | undefined, ip: string | undefined, port: number | undefined): OcsfEndpoint | undefined {
  const out: OcsfEndpoint = {};
  if (host !== undefined && host.length > 0) {
    if (isAddressHost(host)) out.ip = cleanText(host);
    else out.domain = cleanText(host);
  }
  if (ip !== undefined) out.ip = cleanText(ip);
  if (port !== undefined) out.port = port;
  return Object.keys(out).length > 0 ? out : undefined;
}

export function httpRequest(method: string, rawUrl: string): NonNullable<OcsfEvent['http_request']> {
  const url_string = cleanText(stripQuery(rawUrl));
  const url: NonNullable<OcsfEvent['http_request']>['url'] = { url_string };
  if (simpleHttpUrl(url_string, url)) return { http_method: cleanText(method, MAX_METHOD_CHARS), url };
  try {
    const parsed = new URL(url_string);
    url.scheme = parsed.protocol.replace(/:$/, '');
    url.hostname = parsed.hostname.replace(/^\[|\]$/g, '');
    const port = parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port);
    url.port = port;
    url.path = parsed.pathname;
  } catch {
    // Not absolute (an origin-form path): url_string alone says what we know.
  }
  return { http_method: cleanText(method, MAX_METHOD_CHARS), url };
}

/** The OCSF v1.8.0 object for one event (docs/events.md#json-fields). */
export function toOcsf(event: AuditEvent, meta: OcsfMeta): OcsfEvent {
  const cls = CLASSES[event.class];
  const [activityId, activityName] = activityOf(event);
  const [severityId, severityName] = SEVERITY_IDS[event.severity];
  const failed = isFailure(event);
  const product = meta.product ?? DEFAULT_PRODUCT;
  // Plain assignments, no object spreads: this runs once per request on the hot path.
  const productOut: OcsfEvent['metadata']['product'] = { name: product.name, vendor_name: product.vendorName };
  if (product.version) productOut.version = product.version;
  const metadata: OcsfEvent['metadata'] = { product: productOut, version: OCSF_VERSION };
  if (meta.uid !== undefined) metadata.uid = meta.uid;
  const out: OcsfEvent = {
    class_uid: cls.uid,
    class_name: cls.name,
    category_uid: cls.category,
    category_name: cls.categoryName,
    activity_id: activityId,
    activity_name: activityName,
    type_uid: cls.uid * 100 + activityId,
    type_name: `${cls.name}: ${activityName}`,
    severity_id: severityId,
    severity: severityName,
    status_id: failed ? 2 : 1,
    status: failed ? 'Failure' : 'Success',
    time: meta.time,
    message: cleanText(event.message),
    metadata,
    unmapped: {},
  };
  if (event.statusDetail !== undefined) out.status_detail = cleanText(event.statusDetail);
  if (event.action !== undefined) {
    const allowed = event.action === 'ALLOWED';
    out.action_id = allowed ? 1 : 2;
    out.action = allowed ? 'Allowed' : 'Denied';
    out.disposition_id = allowed ? 1 : 2;
    out.disposition = allowed ? 'Allowed' : 'Blocked';
  }
  const dst = endpoint(event.dst?.host, event.dst?.ip, event.dst?.port);
  if (dst !== undefined) out.dst_endpoint = dst;
  const src = endpoint(undefined, event.src?.ip, event.src?.port);
  if (src !== undefined) out.src_endpoint = src;
  if (event.policy !== undefined || event.engine !== undefined) {
    const rule: NonNullable<OcsfEvent['firewall_rule']> = {};
    if (event.policy !== undefined) rule.name = cleanText(event.policy);
    if (event.engine !== undefined) rule.type = event.engine;
    out.firewall_rule = rule;
  }
  if (event.http !== undefined) out.http_request = httpRequest(event.http.method, event.http.url);
  if (event.class === 'DNS') dnsFields(out, event);
  if (event.class === 'FINDING') {
    out.finding_info = { title: out.message, uid: meta.uid ?? `${cls.uid}-${meta.time}` };
    out.disposition_id ??= 2;
    out.disposition ??= 'Blocked';
  }
  // cleanUnmapped returns a fresh object: our own keys are set on it directly (and win over same-named ones).
  const unmapped = cleanUnmapped(event.unmapped ?? {}, 0) as Record<string, unknown>;
  if (event.class === 'CONFIG') unmapped.state = cleanText(event.activity, MAX_STATE_CHARS);
  if (event.generation !== undefined) unmapped.policy_generation = event.generation;
  if (event.policyHash !== undefined) unmapped.policy_hash = cleanText(event.policyHash, MAX_NAME_CHARS);
  // OCSF keeps the name `reason` for the detail sentence (docs/events.md); only the TypeScript field is `detail`.
  const detail = event.detail;
  if (detail !== undefined) unmapped.reason = cleanText(detail, MAX_REASON_CHARS);
  out.unmapped = unmapped;
  return out;
}

function dnsFields(out: OcsfEvent, event: AuditEvent): void {
  const name = event.dst?.host;
  const qtype = event.unmapped?.qtype;
  if (name !== undefined) out.query = { hostname: cleanText(name), ...(typeof qtype === 'string' ? { type: cleanText(qtype, MAX_QTYPE_CHARS) } : {}) };
  const rcode = event.unmapped?.rcode;
  const known = typeof rcode === 'string' ? DNS_RCODES[rcode.toUpperCase()] : undefined;
  if (known !== undefined) {
    out.rcode_id = known[0];
    out.rcode = known[1];
  }
}

function hostPort(host: string, port: number | undefined): string {
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return port === undefined ? shown : `${shown}:${port}`;
}

/**
 * The shorthand line (docs/events.md#shorthand-line), without timestamp:
 * `<CLASS>:<ACTIVITY> [<SEV>] <ACTION> -(-) -> <host>:<port> [policy:<rule|-> engine:<engine>] [reason:<text>]`.
 * HTTP prints `-> <METHOD> <url>`; CONFIG adds `[version:<generation> hash:<hash>]`; `[error:<kind> <cause>]`
 * whenever the event carries `unmapped.error` (see errorPart). `[msg:...]` is printed on every line that is not a
 * decision (no action: lifecycle, configuration and control lines say what happened there) unless it has a reason or
 * an error part, and on a decision only when it has no target, no policy/engine and no reason. Parts that are
 * absent are omitted.
 */
export function toShorthand(event: AuditEvent): string {
  // String concatenation, no parts array + join: this runs once per request on the hot path.
  let line = `${event.class}:${cleanText(event.activity, MAX_METHOD_CHARS).toUpperCase()} [${event.severity}]`;
  if (event.action !== undefined) line += ` ${event.action}`;
  let target: string | undefined;
  if (event.http !== undefined) {
    target = `${cleanText(event.http.method, MAX_METHOD_CHARS)} ${cleanText(stripQuery(event.http.url))}`;
  } else {
    const host = event.dst?.host ?? event.dst?.ip;
    if (host !== undefined) target = hostPort(cleanText(host), event.dst?.port);
  }
  if (target !== undefined) line += ` ${UNKNOWN_ACTOR} -> ${target}`;
  const ruled = event.policy !== undefined || event.engine !== undefined;
  if (ruled) line += ` [policy:${event.policy === undefined ? '-' : cleanText(event.policy, MAX_NAME_CHARS)} engine:${event.engine ?? '-'}]`;
  if (event.class === 'CONFIG' && (event.generation !== undefined || event.policyHash !== undefined)) {
    const version = event.generation === undefined ? '' : `version:${event.generation}`;
    const hash = event.policyHash === undefined ? '' : `hash:${cleanText(event.policyHash, MAX_NAME_CHARS)}`;
    line += ` [${version}${version.length > 0 && hash.length > 0 ? ' ' : ''}${hash}]`;
  }
  const detail = event.detail;
  const error = event.unmapped?.error;
  const errorText = error === undefined ? '' : errorPart(error);
  if (detail !== undefined && detail.length > 0) line += ` [reason:${cleanText(detail, MAX_REASON_CHARS)}]`;
  else if (event.message.length > 0 && (event.action === undefined ? errorText.length === 0 : target === undefined && !ruled)) {
    line += ` [msg:${cleanText(event.message)}]`;
  }
  return line + errorText;
}

/**
 * ` [error:<kind> <cause>]` for an event's `unmapped.error`: `{ kind?, message? }` as the control channel and
 * the appliers set it, or a bare string (the cause alone). A failure that names neither prints nothing: the
 * line must not claim an error it cannot show.
 */
function errorPart(error: unknown): string {
  if (typeof error === 'string') return error.length > 0 ? ` [error:${cleanText(error)}]` : '';
  if (typeof error !== 'object' || error === null) return '';
  const { kind, message } = error as { kind?: unknown; message?: unknown };
  const shownKind = typeof kind === 'string' && kind.length > 0 ? cleanText(kind, MAX_NAME_CHARS) : '';
  const cause = typeof message === 'string' && message.length > 0 ? cleanText(message) : '';
  if (shownKind.length === 0 && cause.length === 0) return '';
  return ` [error:${shownKind}${shownKind.length > 0 && cause.length > 0 ? ' ' : ''}${cause}]`;
}
