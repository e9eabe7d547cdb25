// The fragments of an OCSF JSON line that repeat from event to event (head, product, endpoints, rule, unmapped
// keys), rendered as JSON text exactly as JSON.stringify(toOcsf()) writes them, each memoised per renderer. Pure.
import { type AuditEvent, EVENT_CLASSES, SEVERITIES } from './event.js';
import {
  activityOf,
  CENSORED_UNMAPPED_KEYS,
  CLASSES,
  cleanText,
  httpRequest,
  isAddressHost,
  isFailure,
  MAX_FIELD_CHARS,
  MAX_METHOD_CHARS,
  MAX_NAME_CHARS,
  MAX_REASON_CHARS,
  MAX_STATE_CHARS,
  MAX_UNMAPPED_KEYS,
  OCSF_VERSION,
  type OcsfEvent,
  type ProductInfo,
  SEVERITY_IDS,
  stripQuery,
  UNMAPPED_CENSOR,
} from './ocsf.js';
import { cleanJson, flat, jsonNumber, jsonString } from './json-text.js';
import { simpleHttpUrl } from './simple-url.js';

const CENSORED_JSON = JSON.stringify(UNMAPPED_CENSOR);
const NESTED_JSON = '"[nested]"';

/** Rendered fragments that repeat from event to event (the same policy, endpoint, adapter, reason...), per
 *  renderer. Each map holds at most MAX_MEMO_ENTRIES and is emptied when full; texts longer than
 *  MEMO_MAX_TEXT_CHARS are never kept. A hit skips the scan and keeps the line's string tree small (flattening
 *  it to bytes costs per piece). */
export const MAX_MEMO_ENTRIES = 256;
const MEMO_MAX_TEXT_CHARS = 256;

export interface FragmentMemo {
  /** cleanJson(text) by text. */
  readonly texts: Map<string, string>;
  /** cleanJson(text, MAX_REASON_CHARS) and cleanJson(text, MAX_NAME_CHARS) by text. */
  readonly reasons: Map<string, string>;
  readonly hashes: Map<string, string>;
  /** cleanJson(method, MAX_METHOD_CHARS) by method. */
  readonly methods: Map<string, string>;
  /** `,"key":` by unmapped key. */
  readonly keys: Map<string, string>;
  /** `,"dst_endpoint":{...}` / `,"src_endpoint":{...` (without port) / `,"firewall_rule":{...}` by their inputs. */
  readonly endpoints: Map<string, Rendered>;
  readonly addresses: Map<string, Rendered>;
  readonly sources: Map<string, string>;
  readonly rules: Map<string, Rendered>;
  readonly unnamedRules: Map<string, Rendered>;
  /** Everything before the time, by activity label, one map per class, severity and status. */
  readonly heads: (Map<string, string> | undefined)[];
  product: ProductInfo | undefined;
  productJson: string;
}

const CLASS_INDEX: Readonly<Record<string, number>> = Object.fromEntries(EVENT_CLASSES.map((name, i) => [name, i]));
const SEVERITY_INDEX: Readonly<Record<string, number>> = Object.fromEntries(SEVERITIES.map((name, i) => [name, i]));


/** Stores `json` flattened: every later line that reuses it then holds one piece, not a small tree. */
function remember(map: Map<string, string>, key: string, json: string): string {
  if (map.size >= MAX_MEMO_ENTRIES) map.clear();
  const flatJson = flat(json);
  map.set(key, flatJson);
  return flatJson;
}

export function memoClean(map: Map<string, string>, text: string, maxChars: number): string {
  if (text.length > MEMO_MAX_TEXT_CHARS) return cleanJson(text, maxChars);
  return map.get(text) ?? remember(map, text, cleanJson(text, maxChars));
}

function keyJson(memo: FragmentMemo, key: string): string {
  return memo.keys.get(key) ?? remember(memo.keys, key, `,${jsonString(key)}:`);
}

/** cleanUnmapped's value, as JSON; undefined where cleanUnmapped yields undefined (JSON omits the key). */
function unmappedJson(memo: FragmentMemo, value: unknown, depth: number): string | undefined {
  switch (typeof value) {
    case 'string':
      return memoClean(memo.texts, value, MAX_FIELD_CHARS);
    case 'number':
      return jsonNumber(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return jsonString(value.toString());
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';
  if (depth >= 3) return NESTED_JSON;
  if (Array.isArray(value)) {
    const count = Math.min(value.length, MAX_UNMAPPED_KEYS);
    let out = '[';
    for (let i = 0; i < count; i++) out += `${i === 0 ? '' : ','}${unmappedJson(memo, value[i], depth + 1) ?? 'null'}`;
    return `${out}]`;
  }
  return unmappedObjectJson(memo, value as Record<string, unknown>, depth, undefined);
}

/** toOcsf's own `unmapped` keys, rendered; undefined where toOcsf does not set the key. */
interface OwnKeys {
  state: string | undefined;
  policy_generation: string | undefined;
  policy_hash: string | undefined;
  reason: string | undefined;
}
const OWN_KEY_NAMES = ['state', 'policy_generation', 'policy_hash', 'reason'] as const;
const OWN_KEY_JSON = OWN_KEY_NAMES.map((key) => flat(`,"${key}":`));
const OWN_KEY_FIRST_JSON = OWN_KEY_NAMES.map((key) => flat(`"${key}":`));

/**
 * cleanUnmapped's object as JSON: own enumerable keys in for-in order, the first MAX_UNMAPPED_KEYS of them,
 * censored keys replaced, keys whose value cleans to undefined left out (as JSON.stringify leaves them).
 * At the top level, `own` holds toOcsf's own keys, which it assigns to the cleaned object afterwards: each
 * replaces a same-named key where it stands (if that key was kept), or is appended in OWN_KEY_NAMES order.
 */
export function unmappedObjectJson(memo: FragmentMemo, value: Record<string, unknown>, depth: number, own: OwnKeys | undefined): string {
  let out = '';
  let count = 0;
  let placed = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (count++ >= MAX_UNMAPPED_KEYS) break;
    // `out.__proto__ = x` sets a prototype, not a key: JSON.stringify never shows it.
    if (key === '__proto__') continue;
    let json: string | undefined;
    if (own !== undefined && (key === 'state' || key === 'policy_generation' || key === 'policy_hash' || key === 'reason') && own[key] !== undefined) {
      json = own[key];
      placed |= 1 << OWN_KEY_NAMES.indexOf(key);
    } else {
      json = CENSORED_UNMAPPED_KEYS.has(key.toLowerCase()) ? CENSORED_JSON : unmappedJson(memo, value[key], depth + 1);
    }
    if (json !== undefined) out += `${out.length === 0 ? keyJson(memo, key).slice(1) : keyJson(memo, key)}${json}`;
  }
  if (own !== undefined) {
    for (let i = 0; i < OWN_KEY_NAMES.length; i++) {
      const key = OWN_KEY_NAMES[i] as (typeof OWN_KEY_NAMES)[number];
      const json = own[key];
      if (json !== undefined && (placed & (1 << i)) === 0) out += `${out.length === 0 ? OWN_KEY_FIRST_JSON[i] : OWN_KEY_JSON[i]}${json}`;
    }
  }
  return `{${out}}`;
}

/** `portJson` is the port as JSON text (or a template hole), undefined when there is no port. */
function endpointJson(memo: FragmentMemo, host: string | undefined, ip: string | undefined, portJson: string | undefined): string | undefined {
  let out = '';
  let hostIp: string | undefined;
  if (host !== undefined && host.length > 0) {
    if (isAddressHost(host)) hostIp = host;
    else out = `"domain":${memoClean(memo.texts, host, MAX_FIELD_CHARS)}`;
  }
  // toOcsf sets `ip` from the host first and then from `ip`: one key, where the first put it.
  const address = ip ?? hostIp;
  if (address !== undefined) out += `${out.length === 0 ? '"ip":' : ',"ip":'}${memoClean(memo.texts, address, MAX_FIELD_CHARS)}`;
  if (portJson !== undefined) out += `${out.length === 0 ? '"port":' : ',"port":'}${portJson}`;
  return out.length === 0 ? undefined : `{${out}}`;
}

export function httpJson(memo: FragmentMemo, method: string, url: string): string {
  const methodJson = method.length <= MEMO_MAX_TEXT_CHARS ? (memo.methods.get(method) ?? remember(memo.methods, method, cleanJson(method, MAX_METHOD_CHARS))) : cleanJson(method, MAX_METHOD_CHARS);
  const urlString = cleanText(stripQuery(url));
  const parts: UrlParts = { url_string: urlString };
  if (simpleHttpUrl(urlString, parts)) {
    // The simple shape admits only characters JSON writes as they are: no escaping, fewer pieces.
    return `{"http_method":${methodJson},"url":{"url_string":"${urlString}${parts.scheme === 'https' ? HTTPS_HOST_JSON : HTTP_HOST_JSON}${parts.hostname}","port":${parts.port},"path":"${parts.path}"}}`;
  }
  const request = httpRequest(method, url);
  const found = request.url;
  let out = `{"http_method":${methodJson},"url":{"url_string":${jsonString(found.url_string)}`;
  if (found.scheme !== undefined) out += `,"scheme":${jsonString(found.scheme)}`;
  if (found.hostname !== undefined) out += `,"hostname":${jsonString(found.hostname)}`;
  if (found.port !== undefined) out += `,"port":${jsonNumber(found.port)}`;
  if (found.path !== undefined) out += `,"path":${jsonString(found.path)}`;
  return `${out}}}`;
}

type UrlParts = NonNullable<OcsfEvent['http_request']>['url'];
const HTTP_HOST_JSON = '","scheme":"http","hostname":"';
const HTTPS_HOST_JSON = '","scheme":"https","hostname":"';

export function ownKeys(memo: FragmentMemo, event: AuditEvent): OwnKeys | undefined {
  const detail = event.detail;
  if (event.class !== 'CONFIG' && event.generation === undefined && event.policyHash === undefined && detail === undefined) return undefined;
  return {
    state: event.class === 'CONFIG' ? cleanJson(event.activity, MAX_STATE_CHARS) : undefined,
    policy_generation: event.generation === undefined ? undefined : jsonNumber(event.generation),
    policy_hash: event.policyHash === undefined ? undefined : memoClean(memo.hashes, event.policyHash, MAX_NAME_CHARS),
    reason: detail === undefined ? undefined : memoClean(memo.reasons, detail, MAX_REASON_CHARS),
  };
}

/** `{"class_uid":...` up to `"time":`: fixed by class, activity label, severity and status. */
export function headJson(memo: FragmentMemo, event: AuditEvent): string {
  const failed = isFailure(event);
  const index = ((CLASS_INDEX[event.class] as number) * SEVERITIES.length + (SEVERITY_INDEX[event.severity] as number)) * 2 + (failed ? 1 : 0);
  let heads = memo.heads[index];
  if (heads === undefined) {
    heads = new Map();
    memo.heads[index] = heads;
  }
  const known = event.activity.length <= MEMO_MAX_TEXT_CHARS ? heads.get(event.activity) : undefined;
  if (known !== undefined) return known;
  const cls = CLASSES[event.class];
  const activity = activityOf(event);
  const severity = SEVERITY_IDS[event.severity];
  const json =
    `{"class_uid":${cls.uid},"class_name":${jsonString(cls.name)},"category_uid":${cls.category},` +
    `"category_name":${jsonString(cls.categoryName)},"activity_id":${activity[0]},"activity_name":${jsonString(activity[1])},` +
    `"type_uid":${cls.uid * 100 + activity[0]},"type_name":${jsonString(`${cls.name}: ${activity[1]}`)},` +
    `"severity_id":${severity[0]},"severity":${jsonString(severity[1])},` +
    (failed ? '"status_id":2,"status":"Failure"' : '"status_id":1,"status":"Success"') +
    ',"time":';
  // Flattened once here, so every line that reuses it holds one piece, not a tree.
  return event.activity.length <= MEMO_MAX_TEXT_CHARS ? remember(heads, event.activity, json) : json;
}

/** `,"metadata":{"product":{...},"version":"1.8.0"` for the product (usually the same one every time). */
export function productJson(memo: FragmentMemo, product: ProductInfo): string {
  if (memo.product === product) return memo.productJson;
  const json =
    `,"metadata":{"product":{"name":${jsonString(product.name)},"vendor_name":${jsonString(product.vendorName)}` +
    `${product.version ? `,"version":${jsonString(product.version)}` : ''}},"version":"${OCSF_VERSION}"`;
  memo.product = product;
  memo.productJson = flat(json);
  return memo.productJson;
}

/** A memoised fragment and the other inputs it was rendered from (the map key is the first input). */
interface Rendered {
  readonly second: string | undefined;
  readonly port: number | undefined;
  readonly json: string;
}

function rememberRendered(map: Map<string, Rendered>, key: string, entry: Rendered): string {
  if (map.size >= MAX_MEMO_ENTRIES) map.clear();
  map.set(key, entry);
  return entry.json;
}

/** `,"dst_endpoint":{...}`, memoised by host (or ip), checked against the other two inputs. */
export function dstJson(memo: FragmentMemo, dst: NonNullable<AuditEvent['dst']>): string {
  const { host, ip, port } = dst;
  const key = host ?? ip;
  const second = host === undefined ? undefined : ip;
  const cacheable = key !== undefined && key.length + (second?.length ?? 0) <= MEMO_MAX_TEXT_CHARS;
  // By host and by bare ip in separate maps: the same text is a domain in one and an address in the other.
  const endpoints = host === undefined ? memo.addresses : memo.endpoints;
  const known = cacheable ? endpoints.get(key) : undefined;
  if (known !== undefined && known.second === second && known.port === port) return known.json;
  const rendered = endpointJson(memo, host, ip, port === undefined ? undefined : jsonNumber(port));
  const json = rendered === undefined ? '' : flat(`,"dst_endpoint":${rendered}`);
  return cacheable ? rememberRendered(endpoints, key, { second, port, json }) : json;
}

/** `,"src_endpoint":{...}`: the source port changes with every connection, the fragment before it repeats.
 *  `portJson` is the port as JSON text (or a template hole), undefined when src has no port. */
export function srcJson(memo: FragmentMemo, ip: string | undefined, portJson: string | undefined): string {
  if (ip === undefined || ip.length > MEMO_MAX_TEXT_CHARS) {
    const json = endpointJson(memo, undefined, ip, portJson);
    return json === undefined ? '' : `,"src_endpoint":${json}`;
  }
  const head = memo.sources.get(ip) ?? remember(memo.sources, ip, `,"src_endpoint":{"ip":${memoClean(memo.texts, ip, MAX_FIELD_CHARS)}`);
  return portJson === undefined ? `${head}}` : `${head},"port":${portJson}}`;
}

/** `,"firewall_rule":{...}`, memoised by policy name and checked against the engine. */
export function ruleJson(memo: FragmentMemo, policy: string | undefined, engine: string | undefined): string {
  const key = policy ?? '';
  const cacheable = key.length <= MEMO_MAX_TEXT_CHARS && (engine?.length ?? 0) <= MEMO_MAX_TEXT_CHARS;
  const rules = policy === undefined ? memo.unnamedRules : memo.rules;
  const known = cacheable ? rules.get(key) : undefined;
  if (known !== undefined && known.second === engine) return known.json;
  const name = policy === undefined ? '' : `"name":${memoClean(memo.texts, policy, MAX_FIELD_CHARS)}`;
  const type = engine === undefined ? '' : `"type":${jsonString(engine)}`;
  const json = flat(`,"firewall_rule":{${name}${name.length > 0 && type.length > 0 ? ',' : ''}${type}}`);
  return cacheable ? rememberRendered(rules, key, { second: engine, port: undefined, json }) : json;
}

/** An empty memo: one per renderer (createOcsfJsonRenderers). */
export function createFragmentMemo(): FragmentMemo {
  return {
    texts: new Map(),
    reasons: new Map(),
    hashes: new Map(),
    methods: new Map(),
    keys: new Map(),
    endpoints: new Map(),
    addresses: new Map(),
    sources: new Map(),
    rules: new Map(),
    unnamedRules: new Map(),
    heads: [],
    product: undefined,
    productJson: '',
  };
}
