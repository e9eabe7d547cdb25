// Renders an AuditEvent's OCSF object straight to JSON text: exactly JSON.stringify(toOcsf(event, meta)),
// without building the object, for the log line; also as a template with the per-event values left open
// (audit-line.ts). Pure. Anything outside the typed shape goes through toOcsf. Fragments: ocsf-fragments.ts.
import type { AuditEvent } from './event.js';
import { CLASSES, DEFAULT_PRODUCT, DNS_RCODES, MAX_FIELD_CHARS, MAX_QTYPE_CHARS, type OcsfMeta, type ProductInfo, SEVERITY_IDS, toOcsf } from './ocsf.js';
import {
  createFragmentMemo,
  dstJson,
  type FragmentMemo,
  headJson,
  httpJson,
  memoClean,
  ownKeys,
  productJson,
  ruleJson,
  srcJson,
  unmappedObjectJson,
} from './ocsf-fragments.js';
import { cleanJson, jsonNumber, jsonString } from './json-text.js';

const isOptionalString = (value: unknown): boolean => value === undefined || typeof value === 'string';
const isOptionalNumber = (value: unknown): boolean => value === undefined || typeof value === 'number';

function isPlainEndpoint(end: { host?: unknown; ip?: unknown; port?: unknown } | undefined): boolean {
  return end === undefined || (typeof end === 'object' && end !== null && isOptionalString(end.host) && isOptionalString(end.ip) && isOptionalNumber(end.port));
}

/** True when every field has its declared type: the renderer below assumes it; anything else uses toOcsf. */
function isTypedShape(event: AuditEvent, meta: OcsfMeta): boolean {
  const product = meta.product ?? DEFAULT_PRODUCT;
  const unmapped = event.unmapped as unknown;
  const http = event.http as { method?: unknown; url?: unknown } | undefined;
  return (
    Object.hasOwn(CLASSES, event.class) &&
    Object.hasOwn(SEVERITY_IDS, event.severity) &&
    typeof meta.time === 'number' &&
    isOptionalString(meta.uid) &&
    typeof product.name === 'string' &&
    typeof product.vendorName === 'string' &&
    isOptionalString(product.version) &&
    typeof event.activity === 'string' &&
    typeof event.message === 'string' &&
    isOptionalString(event.statusDetail) &&
    isOptionalString(event.policy) &&
    isOptionalString(event.engine) &&
    isOptionalString(event.detail) &&
    isOptionalString(event.policyHash) &&
    isOptionalNumber(event.generation) &&
    isPlainEndpoint(event.dst) &&
    isPlainEndpoint(event.src) &&
    (http === undefined || (typeof http === 'object' && http !== null && typeof http.method === 'string' && typeof http.url === 'string')) &&
    (unmapped === undefined || unmapped === null || (typeof unmapped === 'object' && !Array.isArray(unmapped)))
  );
}
type OcsfJsonRenderer = (event: AuditEvent, meta: OcsfMeta) => string;

/**
 * The JSON text of an event with its per-event values left open: `pieces[0] + <holes[0]> + pieces[1] + ...`,
 * where each hole is the JSON text of the time, the uid or the source port. Filled with the values of a meta
 * and a source port, it is renderOcsfJson's text for the same event, byte for byte.
 */
export interface OcsfJsonTemplate {
  readonly pieces: readonly string[];
  readonly holes: readonly OcsfHole[];
}
const OCSF_HOLES = ['time', 'uid', 'srcPort'] as const;
export type OcsfHole = (typeof OCSF_HOLES)[number];

/** What the template renderer writes where a hole goes: characters JSON text never holds unescaped (every
 *  string is written by JSON.stringify, jsonString or cleanJson, or admitted as plain by simpleHttpUrl), so
 *  each occurrence in the text is a hole and nothing else. */
const HOLE_MARKS: Readonly<Record<OcsfHole, string>> = { time: '\u0000', uid: '\u0001', srcPort: '\u0002' };
const HOLE_BY_MARK: Readonly<Record<string, OcsfHole>> = { '\u0000': 'time', '\u0001': 'uid', '\u0002': 'srcPort' };
const HOLE_MARK_SPLIT = /([\u0000-\u0002])/;

interface OcsfJsonRenderers {
  readonly render: OcsfJsonRenderer;
  /** The template of a typed event (undefined for any other: render it), for this product and a uid. */
  readonly template: (event: AuditEvent, product: ProductInfo) => OcsfJsonTemplate | undefined;
}

/** A renderer with its own memo of repeating fragments: JSON.stringify(toOcsf(event, meta)), byte for byte;
 *  throws where toOcsf throws. */
export function createOcsfJsonRenderer(): OcsfJsonRenderer {
  return createOcsfJsonRenderers().render;
}

/** The renderer and the template renderer, sharing one memo of repeating fragments. */
export function createOcsfJsonRenderers(): OcsfJsonRenderers {
  const memo = createFragmentMemo();
  return {
    render: function renderOcsfJson(event: AuditEvent, meta: OcsfMeta): string {
      if (!isTypedShape(event, meta)) return JSON.stringify(toOcsf(event, meta));
      const uidJson = meta.uid === undefined ? undefined : jsonString(meta.uid);
      const findingUidJson = event.class !== 'FINDING' ? '' : (uidJson ?? jsonString(`${CLASSES[event.class].uid}-${meta.time}`));
      const srcPort = event.src?.port;
      return renderTyped(memo, event, meta.product ?? DEFAULT_PRODUCT, jsonNumber(meta.time), uidJson, findingUidJson, srcPort === undefined ? undefined : jsonNumber(srcPort));
    },
    template: function renderOcsfJsonTemplate(event: AuditEvent, product: ProductInfo): OcsfJsonTemplate | undefined {
      if (!isTypedShape(event, { time: 0, uid: '', product })) return undefined;
      const { time, uid, srcPort } = HOLE_MARKS;
      const text = renderTyped(memo, event, product, time, uid, uid, event.src?.port === undefined ? undefined : srcPort);
      const parts = text.split(HOLE_MARK_SPLIT);
      const pieces: string[] = [];
      const holes: OcsfHole[] = [];
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i] as string;
        if (i % 2 === 0) pieces.push(part);
        else holes.push(HOLE_BY_MARK[part] as OcsfHole);
      }
      return { pieces, holes };
    },
  };
}

/** The JSON text of a typed event, with the per-event values already written as JSON text (or hole marks). */
function renderTyped(
  memo: FragmentMemo,
  event: AuditEvent,
  product: ProductInfo,
  timeJson: string,
  uidJson: string | undefined,
  findingUidJson: string,
  srcPortJson: string | undefined,
): string {
  const message = cleanJson(event.message);
  let out =
    `${headJson(memo, event)}${timeJson},"message":${message}${productJson(memo, product)}` +
    `${uidJson === undefined ? '' : `,"uid":${uidJson}`}},"unmapped":` +
    unmappedObjectJson(memo, (event.unmapped ?? {}) as Record<string, unknown>, 0, ownKeys(memo, event));
  if (event.statusDetail !== undefined) out += `,"status_detail":${memoClean(memo.texts, event.statusDetail, MAX_FIELD_CHARS)}`;
  if (event.action !== undefined) out += event.action === 'ALLOWED' ? ALLOWED_JSON : DENIED_JSON;
  if (event.dst !== undefined) out += dstJson(memo, event.dst);
  if (event.src !== undefined) out += srcJson(memo, event.src.ip, srcPortJson);
  if (event.policy !== undefined || event.engine !== undefined) out += ruleJson(memo, event.policy, event.engine);
  if (event.http !== undefined) out += `,"http_request":${httpJson(memo, event.http.method, event.http.url)}`;
  if (event.class === 'DNS') out += dnsJson(event);
  if (event.class === 'FINDING') {
    out += `,"finding_info":{"title":${message},"uid":${findingUidJson}}`;
    if (event.action === undefined) out += ',"disposition_id":2,"disposition":"Blocked"';
  }
  return `${out}}`;
}

const ALLOWED_JSON = ',"action_id":1,"action":"Allowed","disposition_id":1,"disposition":"Allowed"';
const DENIED_JSON = ',"action_id":2,"action":"Denied","disposition_id":2,"disposition":"Blocked"';

function dnsJson(event: AuditEvent): string {
  let out = '';
  const name = event.dst?.host;
  const qtype = event.unmapped?.qtype;
  if (name !== undefined) out += `,"query":{"hostname":${cleanJson(name)}${typeof qtype === 'string' ? `,"type":${cleanJson(qtype, MAX_QTYPE_CHARS)}` : ''}}`;
  const rcode = event.unmapped?.rcode;
  const known = typeof rcode === 'string' ? DNS_RCODES[rcode.toUpperCase()] : undefined;
  if (known !== undefined) out += `,"rcode_id":${known[0]},"rcode":${jsonString(known[1])}`;
  return out;
}
