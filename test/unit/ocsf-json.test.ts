import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAuditSink } from '../../src/telemetry/audit.js';
import { type AuditEvent, EVENT_CLASSES } from '../../src/telemetry/event.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { MAX_FIELD_CHARS, type OcsfMeta, type ProductInfo, toOcsf, toShorthand } from '../../src/telemetry/ocsf.js';
import { jsonString } from '../../src/telemetry/json-text.js';
import { createOcsfJsonRenderer, createOcsfJsonRenderers, type OcsfJsonTemplate } from '../../src/telemetry/ocsf-json.js';
import { DEFAULT_PRODUCT } from '../../src/telemetry/ocsf.js';
import { FORWARD_ALLOWED_EVENT, randomEvent, randomMeta, randomText, seeded } from '../harness/audit-events.js';

const T = Date.UTC(2026, 0, 1);
const RANDOM_EVENTS = 4_000;

// One renderer for the whole file, so its memo of repeated fragments is exercised (hits and clears), and a
// fresh one per check for the cold path.
const shared = createOcsfJsonRenderer();

/** Both renderings of one event: equal text, or both throw. */
function assertSameJson(event: AuditEvent, meta: OcsfMeta, label: string): void {
  let expected: string | undefined;
  try {
    expected = JSON.stringify(toOcsf(event, meta));
  } catch {
    assert.throws(() => shared(event, meta), label);
    assert.throws(() => createOcsfJsonRenderer()(event, meta), label);
    return;
  }
  assert.equal(shared(event, meta), expected, label);
  assert.equal(createOcsfJsonRenderer()(event, meta), expected, `${label} (fresh renderer)`);
}

const base: AuditEvent = FORWARD_ALLOWED_EVENT;

const AWKWARD_TEXT = [
  '',
  'plain',
  'quote " and backslash \\ and slash /',
  'control \u0000\u0001\u001f tab\tnew\nline\rcr',
  'del \u007f c1 \u0085\u009f',
  'separators \u2028 and \u2029',
  'lone high \ud800 and lone low \udc00, pair 😀, reversed \udc00\ud800',
  'non-ASCII é ü 日本 ∑',
  'GET http://h/p?token=SECRET#frag tail',
  '/a/b?c=d and /x#y',
  'a?b#c',
  'x'.repeat(MAX_FIELD_CHARS + 5),
  `${'y'.repeat(MAX_FIELD_CHARS - 1)}😀tail`,
  `${'z'.repeat(MAX_FIELD_CHARS - 2)}"\\`,
  `${'w'.repeat(MAX_FIELD_CHARS)}?query=1`,
];

describe('createOcsfJsonRenderer', () => {
  it('renders the typical forward event exactly as JSON.stringify(toOcsf(...))', () => {
    assertSameJson(base, { time: T, uid: '3b241101-e2bb-4255-8caf-4136c566a962' }, 'forward');
    assertSameJson(base, { time: T }, 'no uid');
  });

  it('matches for every event class, activity label and action', () => {
    const activities: Record<string, string[]> = {
      NET: ['OPEN', 'CLOSE', 'RESET', 'FAIL', 'REFUSE', 'TRAFFIC', 'LISTEN', 'OTHER', 'open', 'WHAT'],
      HTTP: ['GET', 'POST', 'CONNECT', 'PATCH', 'UNKNOWN', 'PROPFIND', 'get'],
      DNS: ['QUERY', 'RESPONSE', 'TRAFFIC', 'NOPE'],
      CONFIG: ['LOADED', 'DETECTED', 'PUBLISHED', '', 'we"ird\n'],
      FINDING: ['BLOCKED', 'CREATE', 'UPDATE', 'CLOSE', 'OTHER'],
    };
    for (const cls of EVENT_CLASSES) {
      for (const activity of activities[cls] ?? []) {
        for (const action of [undefined, 'ALLOWED', 'DENIED'] as const) {
          const event: AuditEvent = { ...base, class: cls, activity, ...(action === undefined ? {} : { action }) };
          if (action === undefined) delete (event as { action?: string }).action;
          assertSameJson(event, { time: T, uid: 'u' }, `${cls}:${activity}:${action}`);
          assertSameJson({ class: cls, activity, severity: 'LOW', message: 'bare' }, { time: T }, `bare ${cls}:${activity}`);
        }
      }
    }
  });

  it('matches on awkward text in every free-text field', () => {
    for (const text of AWKWARD_TEXT) {
      const event: AuditEvent = {
        ...base,
        message: text,
        statusDetail: text,
        policy: text,
        detail: text,
        policyHash: text,
        dst: { host: text, ip: text, port: 1 },
        src: { ip: text },
        http: { method: text, url: `http://h.test/${text}` },
        unmapped: { [text]: text, nested: { [text]: [text, text] } },
      };
      assertSameJson(event, { time: T, uid: text, product: { name: text, vendorName: text, version: text } }, JSON.stringify(text));
      assertSameJson({ ...event, class: 'CONFIG', activity: text }, { time: T }, `config ${JSON.stringify(text)}`);
      assertSameJson({ ...event, class: 'DNS', unmapped: { qtype: text, rcode: text } }, { time: T }, `dns ${JSON.stringify(text)}`);
      assertSameJson({ ...event, class: 'FINDING' }, { time: T }, `finding ${JSON.stringify(text)}`);
    }
  });

  it('matches on IPv4, IPv6 and odd destination hosts and URLs', () => {
    const hosts = ['10.0.0.5', '127.1', '::1', '2001:db8::1', '[::1]', 'fe80::1%eth0', '1.2.3.4.5', '...', 'xn--nxasmq6b.test', 'EXAMPLE.test', 'h:80'];
    const urls = [
      'http://[::1]:8080/x?q=1',
      'http://[2001:db8::1]/',
      'http://127.1:8080/x',
      'https://api.example.test:443/b#frag',
      'http://h.test/a b/%2e%2e/../c',
      'http://h.test:99999/x',
      'http://user:pass@h.test/x',
      'http://h.test/é/日本',
      '/origin-form?x=1',
      'not a url',
      '',
    ];
    for (const host of hosts) {
      assertSameJson({ ...base, dst: { host, port: 443 } }, { time: T }, host);
      assertSameJson({ ...base, dst: { host, ip: '10.9.9.9' } }, { time: T }, `${host} + ip`);
      assertSameJson({ ...base, dst: { host } }, { time: T }, `${host} no port`);
    }
    for (const url of urls) assertSameJson({ ...base, http: { method: 'GET', url } }, { time: T }, url);
    assertSameJson({ ...base, dst: {}, src: {} }, { time: T }, 'empty endpoints');
    // The same text as a host, then as a bare address, then with another port or engine: no stale fragment.
    for (const dst of [{ host: 'name.test', port: 1 }, { ip: 'name.test', port: 1 }, { host: 'name.test', port: 2 }, { host: 'name.test', ip: '10.0.0.1', port: 2 }]) {
      assertSameJson({ ...base, dst }, { time: T }, JSON.stringify(dst));
    }
    for (const engine of ['policy', 'l7', undefined] as const) {
      const { engine: _e, ...rest } = base;
      assertSameJson(engine === undefined ? rest : { ...rest, engine }, { time: T }, `engine ${engine}`);
    }
    assertSameJson({ ...base, dst: { host: '' } }, { time: T }, 'empty host');
  });

  it('matches on censored, nested, wide and odd unmapped values, and own keys overriding same-named ones', () => {
    const wide = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`k${i}`, i]));
    // An array with a hole at index 1 (JSON writes null there).
    const holes = new Array<unknown>(3);
    holes[0] = 1;
    holes[2] = 3;
    const unmappedCases: Record<string, unknown>[] = [
      { headers: { authorization: 'x' }, Authorization: 'y', 'SET-COOKIE': ['z'], deep: { deeper: { secret: 's', value: 'v' } } },
      { nested: { a: { b: { c: { d: 1 } } } }, list: [[[['deep']]]], wide, long: Array.from({ length: 70 }, (_, i) => i) },
      { n: Number.NaN, inf: Number.POSITIVE_INFINITY, neg: -0, big: 12n, f: () => 1, s: Symbol('s'), u: undefined, nul: null, t: true, fl: false },
      { arr: [undefined, () => 1, Symbol('x'), null, 1.5e300, holes], date: new Date(0), map: new Map([[1, 2]]), boxed: new String('ab') },
      { 2: 'two', 1: 'one', b: 'b', a: 'a', '-1': 'neg' },
      { reason: 'theirs', state: 'theirs', policy_generation: 'theirs', policy_hash: 'theirs', other: 1 },
      { ...wide, reason: 'beyond the key limit' },
      JSON.parse('{"__proto__": {"polluted": 1}, "after": 2}') as Record<string, unknown>,
      JSON.parse('{"__proto__": "text", "toJSON": 1}') as Record<string, unknown>,
      { toJSON: () => 'not called', inner: { toJSON: () => 'nor this' } },
      { typed: new Uint8Array([1, 2]), err: new Error('boom') },
    ];
    for (const [i, unmapped] of unmappedCases.entries()) {
      assertSameJson({ ...base, unmapped }, { time: T }, `unmapped #${i}`);
      assertSameJson({ ...base, class: 'CONFIG', activity: 'LOADED', unmapped }, { time: T }, `config unmapped #${i}`);
      const { detail: _r, generation: _g, policyHash: _h, ...bare } = base;
      assertSameJson({ ...bare, unmapped }, { time: T }, `no own keys #${i}`);
    }
  });

  it('matches on numbers JSON writes specially, and on products with and without a version', () => {
    for (const n of [0, -0, 1.5, 1e21, -1e-7, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER]) {
      assertSameJson({ ...base, generation: n, dst: { host: 'h', port: n }, src: { port: n } }, { time: n }, String(n));
    }
    const products: ProductInfo[] = [{ name: 'boundary', vendorName: 'boundary', version: '1.2.3' }, { name: 'b', vendorName: 'v', version: '' }, { name: 'b', vendorName: 'v' }];
    for (const product of products) assertSameJson(base, { time: T, uid: 'u', product }, JSON.stringify(product));
  });

  it('throws where toOcsf throws and matches where it renders type-violating input', () => {
    const bad: unknown[] = [
      { class: 'NOPE', severity: 'NOPE' },
      { class: 'NET', severity: 'NOPE', activity: 'OPEN', message: 'm' },
      { class: 'toString', severity: 'INFO', activity: 'OPEN', message: 'm' },
      { class: 'NET', severity: 'INFO', activity: 'OPEN' },
      { ...base, dst: { host: 42, port: '443' } },
      { ...base, unmapped: ['a', 'b'] },
      { ...base, unmapped: 'text' },
      { ...base, generation: '7', engine: 5 },
      { ...base, http: { method: 'GET' } },
    ];
    for (const [i, event] of bad.entries()) assertSameJson(event as AuditEvent, { time: T }, `bad #${i}`);
    assertSameJson(base, { time: undefined as unknown as number }, 'no time');
  });

  it(`matches on ${RANDOM_EVENTS} seeded pseudo-random events`, () => {
    const random = seeded(20_260_101);
    for (let i = 0; i < RANDOM_EVENTS; i++) {
      const event = randomEvent(random);
      const meta = randomMeta(random);
      assertSameJson(event, meta, `random #${i}: ${JSON.stringify(event, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))}`);
    }
  });
});

/** The template filled with a meta's time and uid and the event's source port. */
function fill(template: OcsfJsonTemplate, meta: OcsfMeta, srcPort: number | undefined): string {
  let out = template.pieces[0] ?? '';
  template.holes.forEach((hole, i) => {
    out += hole === 'time' ? (Number.isFinite(meta.time) ? `${meta.time}` : 'null') : hole === 'uid' ? JSON.stringify(meta.uid) : Number.isFinite(srcPort) ? `${srcPort}` : 'null';
    out += template.pieces[i + 1] ?? '';
  });
  return out;
}

describe('OCSF JSON templates', () => {
  it(`filled, are JSON.stringify(toOcsf(...)) for ${RANDOM_EVENTS} seeded pseudo-random events, times, uids and ports`, () => {
    const random = seeded(4_242);
    const renderers = createOcsfJsonRenderers();
    let made = 0;
    for (let i = 0; i < RANDOM_EVENTS; i++) {
      const event = randomEvent(random);
      const meta = randomMeta(random);
      const withUid = { ...meta, uid: meta.uid ?? 'u' };
      const template = renderers.template(event, withUid.product ?? DEFAULT_PRODUCT);
      if (template === undefined) continue;
      made++;
      for (const [time, srcPort] of [[withUid.time, event.src?.port], [T + i, event.src?.port === undefined ? undefined : i]] as const) {
        const changed: AuditEvent = srcPort === undefined || event.src === undefined ? event : { ...event, src: { ...event.src, port: srcPort } };
        const expected = JSON.stringify(toOcsf(changed, { ...withUid, time }));
        assert.equal(fill(template, { ...withUid, time }, srcPort), expected, `random #${i}`);
      }
      assert.ok(template.holes.filter((hole) => hole === 'time').length === 1, `random #${i}: one time`);
    }
    assert.ok(made > RANDOM_EVENTS / 2, `${made} templates`);
  });
});

describe('jsonString', () => {
  it('escapes exactly as JSON.stringify does', () => {
    const random = seeded(7);
    const samples = [...AWKWARD_TEXT, ...Array.from({ length: 500 }, () => randomText(random))];
    for (const text of samples) assert.equal(jsonString(text), JSON.stringify(text), JSON.stringify(text));
  });
});

describe('audit lines through the sink', () => {
  it('are the bytes the writer wrote before: JSON.stringify of toOcsf and of the shorthand, for seeded events', () => {
    const chunks: string[] = [];
    const logger = createLogger({ format: 'json', destination: { write: (chunk: string) => chunks.push(chunk) }, now: () => T });
    const sink = createAuditSink({ logger, now: () => T, format: 'json' });
    const random = seeded(99);
    for (let i = 0; i < 500; i++) {
      const event = randomEvent(random);
      const before = chunks.length;
      sink.emit(event);
      const line = chunks[before] ?? '';
      const uid = /"metadata":\{.*?"uid":("(?:[^"\\]|\\.)*")/.exec(line)?.[1];
      assert.ok(uid !== undefined, line);
      const ocsf = JSON.stringify(toOcsf(event, { time: T, uid: JSON.parse(uid) as string }));
      assert.equal(line, `{"level":30,"time":${T},"ocsf":${ocsf},"msg":${JSON.stringify(toShorthand(event))}}\n`, `event #${i}`);
    }
  });

  it('hand the toOcsf object to subscribers with the uid the line carries', () => {
    const chunks: string[] = [];
    const logger = createLogger({ format: 'json', destination: { write: (chunk: string) => chunks.push(chunk) }, now: () => T });
    const sink = createAuditSink({ logger, now: () => T, format: 'json' });
    const seen: unknown[] = [];
    sink.subscribe((ocsf) => seen.push(ocsf));
    sink.emit(base);
    assert.equal(seen.length, 1);
    assert.ok(chunks[0]?.includes(`"ocsf":${JSON.stringify(seen[0])},"msg"`), chunks[0]);
  });
});
