// Seeded pseudo-random AuditEvents for differential tests of the renderers (ocsf-json.ts against toOcsf,
// toShorthand against its reference): typed like real events, with awkward text, hosts, URLs and unmapped values.
import { type AuditEvent, ENGINES, EVENT_CLASSES, SEVERITIES } from '../../src/telemetry/event.js';
import { MAX_FIELD_CHARS, type OcsfMeta } from '../../src/telemetry/ocsf.js';
import { type Random, seeded } from './seeded.js';

export { type Random, seeded };

function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function maybe<T>(random: Random, make: () => T): T | undefined {
  return random() < 0.5 ? undefined : make();
}

const PIECES = [
  'a', 'Z', '0', ' ', '.', ':', '/', '-', '_', '"', '\\', '?', '#', '=', '&', '[', ']', '%2e', 'é', '日', '😀',
  '\u0000', '\t', '\n', '\r', '\u001f', '\u007f', '\u0085', '\u009f', '\u00a0', '\u2028', '\u2029', '\ud800', '\udfff',
  'http://h.test/p?token=SECRET', '/v1/items?x=1#f', 'api.example.test', '::1', 'CANARY',
];

/** Short text mostly; now and then long enough to be cut at MAX_FIELD_CHARS (sometimes inside a pair). */
export function randomText(random: Random): string {
  const roll = random();
  if (roll < 0.05) return '';
  if (roll < 0.1) return `${'x'.repeat(MAX_FIELD_CHARS - 1 - Math.floor(random() * 3))}${pick(random, PIECES)}${pick(random, PIECES)}`;
  let out = '';
  const count = 1 + Math.floor(random() * 8);
  for (let i = 0; i < count; i++) out += random() < 0.5 ? pick(random, ['word', 'allowed', 'GET', 'origin']) : pick(random, PIECES);
  return out;
}

const HOSTS = ['origin.example.test', '10.0.0.5', '127.1', '::1', '2001:db8::1', '[::1]', 'EXAMPLE.test', 'xn--nxasmq6b.test', '', '1.2.3.4.5'];
const URLS = [
  'http://origin.example.test:8080/v1/items',
  'http://origin.example.test/',
  'https://api.example.test:443/b?sig=SECRET',
  'http://[::1]:8080/x#frag',
  'http://127.1/x',
  'http://h.test/a/../b',
  'http://h.test/a b',
  'http://h.test:0080/x',
  '/origin-form?q=1',
];
const NUMBERS = [0, -0, 1, 443, 65_535, 1.5, 1e21, Number.NaN, Number.POSITIVE_INFINITY];
const KEYS = ['adapter', 'verdict', 'reason', 'state', 'policy_generation', 'policy_hash', 'qtype', 'rcode', 'secret', 'Value', 'headers', 'Cookie', 'x-api-key', '1', '0', 'toJSON', 'k"ey', 'k\u2028'];
const ACTIVITIES = ['OPEN', 'CLOSE', 'FAIL', 'REFUSE', 'RESET', 'GET', 'post', 'QUERY', 'LOADED', 'BLOCKED', 'UPDATE', 'weird'];

function randomValue(random: Random, depth: number): unknown {
  const roll = random();
  if (roll < 0.3) return randomText(random);
  if (roll < 0.45) return pick(random, NUMBERS);
  if (roll < 0.5) return random() < 0.5;
  if (roll < 0.55) return pick(random, [null, undefined, 12n, () => 1, Symbol('s')]);
  if (roll < 0.6) return pick(random, ['A', 'AAAA', 'NOERROR', 'nxdomain', 'REFUSED', 'bogus']);
  if (depth > 4) return 'leaf';
  if (roll < 0.75) return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  return randomObject(random, depth + 1);
}

function randomObject(random: Random, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const count = Math.floor(random() * 6);
  for (let i = 0; i < count; i++) out[random() < 0.6 ? pick(random, KEYS) : randomText(random)] = randomValue(random, depth);
  return out;
}

function randomEndpoint(random: Random, withHost: boolean): { host?: string; ip?: string; port?: number } {
  const out: { host?: string; ip?: string; port?: number } = {};
  if (withHost && random() < 0.8) out.host = random() < 0.7 ? pick(random, HOSTS) : randomText(random);
  if (random() < 0.3) out.ip = pick(random, HOSTS);
  if (random() < 0.7) out.port = pick(random, NUMBERS);
  return out;
}

export function randomEvent(random: Random): AuditEvent {
  const event: { -readonly [K in keyof AuditEvent]: AuditEvent[K] } = {
    class: pick(random, EVENT_CLASSES),
    activity: random() < 0.8 ? pick(random, ACTIVITIES) : randomText(random),
    severity: pick(random, SEVERITIES),
    message: randomText(random),
  };
  const action = maybe(random, () => pick(random, ['ALLOWED', 'DENIED'] as const));
  if (action !== undefined) event.action = action;
  const engine = maybe(random, () => pick(random, ENGINES));
  if (engine !== undefined) event.engine = engine;
  const optionalText = ['policy', 'statusDetail', 'detail', 'policyHash'] as const;
  for (const key of optionalText) if (random() < 0.5) event[key] = randomText(random);
  if (random() < 0.7) event.dst = randomEndpoint(random, true);
  if (random() < 0.5) event.src = randomEndpoint(random, false);
  if (random() < 0.4) event.http = { method: random() < 0.8 ? 'GET' : randomText(random), url: random() < 0.7 ? pick(random, URLS) : randomText(random) };
  if (random() < 0.5) event.generation = random() < 0.8 ? Math.floor(random() * 100) : pick(random, NUMBERS);
  if (random() < 0.8) event.unmapped = randomObject(random, 0);
  return event;
}

export function randomMeta(random: Random): OcsfMeta {
  const time = random() < 0.9 ? 1_767_225_600_000 + Math.floor(random() * 1e9) : pick(random, NUMBERS);
  const uid = maybe(random, () => (random() < 0.8 ? '3b241101-e2bb-4255-8caf-4136c566a962' : randomText(random)));
  const product = maybe(random, () => ({ name: randomText(random), vendorName: 'boundary', ...(random() < 0.5 ? { version: randomText(random) } : {}) }));
  return { time, ...(uid === undefined ? {} : { uid }), ...(product === undefined ? {} : { product }) };
}

/** A typical forward-allowed HTTP event, the fixed sample several renderer tests start from. */
export const FORWARD_ALLOWED_EVENT: AuditEvent = {
  class: 'HTTP',
  activity: 'GET',
  severity: 'INFO',
  action: 'ALLOWED',
  engine: 'policy',
  policy: 'bench',
  dst: { host: 'origin.example.test', port: 8080 },
  src: { ip: '127.0.0.1', port: 50123 },
  http: { method: 'GET', url: 'http://origin.example.test:8080/v1/items' },
  message: 'FORWARD allowed GET origin.example.test:8080/v1/items',
  statusDetail: 'FORWARD allowed',
  detail: 'endpoint origin.example.test:8080 of policy bench',
  generation: 1,
  policyHash: 'sha256:abc',
  unmapped: { adapter: 'forward', verdict: 'allow', reason_code: 'allowed', status_code: 200, rule: undefined },
};

/** The oracle for http_request.url: what WHATWG parsing of `urlString` gives (url_string alone if it fails). */
export function whatwgUrlParts(urlString: string): Record<string, unknown> {
  try {
    const parsed = new URL(urlString);
    return {
      url_string: urlString,
      scheme: parsed.protocol.replace(/:$/, ''),
      hostname: parsed.hostname.replace(/^\[|\]$/g, ''),
      port: parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port),
      path: parsed.pathname,
    };
  } catch {
    // Not absolute: url_string only.
    return { url_string: urlString };
  }
}
