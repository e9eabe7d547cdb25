import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_AUDIT_MEMO_ENTRIES, MAX_AUDIT_MEMO_EVENT_CHARS, MAX_AUDIT_MEMO_KEY_CHARS, MAX_AUDIT_MEMO_UNMAPPED_KEYS } from '../../src/telemetry/audit-memo.js';
import { createAuditSink } from '../../src/telemetry/audit.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { joinParts } from '../../src/telemetry/log-destination.js';
import { createLogger, type LinePart, type Logger } from '../../src/telemetry/logger.js';
import { type ProductInfo, toOcsf, toShorthand } from '../../src/telemetry/ocsf.js';
import { FORWARD_ALLOWED_EVENT, randomEvent, type Random, seeded } from '../harness/audit-events.js';

const T = Date.UTC(2026, 0, 1);
type Mutable = { -readonly [K in keyof AuditEvent]: AuditEvent[K] };

/** A memory destination; with `parts`, it also takes lines in parts (as the stdout destination does). */
function memory(parts: boolean): { chunks: string[]; write(chunk: string): boolean; writeParts?(parts: readonly LinePart[]): boolean } {
  const chunks: string[] = [];
  const write = (chunk: string): boolean => chunks.push(chunk) > 0;
  return parts ? { chunks, write, writeParts: (p: readonly LinePart[]) => write(joinParts(p)) } : { chunks, write };
}

const UID = /"metadata":\{.*?"uid":("(?:[^"\\]|\\.)*")/;

/**
 * Emits `events` in order through a sink on a JSON logger; asserts each line is the one the writer wrote
 * before templates: pino's start (with the same bindings), JSON.stringify of toOcsf(event) with the uid the
 * line carries, and JSON.stringify of toShorthand(event).
 */
function assertLines(events: readonly AuditEvent[], options: { parts: boolean; product?: ProductInfo; bindings?: Record<string, unknown>; label: string }): void {
  const out = memory(options.parts);
  const base = createLogger({ format: 'json', destination: out, now: () => T });
  const logger: Logger = options.bindings === undefined ? base : base.child(options.bindings);
  const sink = createAuditSink({ logger, now: () => T, format: 'json', ...(options.product === undefined ? {} : { product: options.product }) });
  const start = `{"level":30,"time":${T}${options.bindings === undefined ? '' : `,${JSON.stringify(options.bindings).slice(1, -1)}`}`;
  for (const [i, event] of events.entries()) {
    sink.emit(event);
    const line = out.chunks[i] ?? '';
    const uid = UID.exec(line)?.[1];
    assert.ok(uid !== undefined, `${options.label} #${i}: ${line}`);
    const meta = { time: T, uid: JSON.parse(uid) as string, ...(options.product === undefined ? {} : { product: options.product }) };
    const expected = `${start},"ocsf":${JSON.stringify(toOcsf(event, meta))},"msg":${JSON.stringify(toShorthand(event))}}\n`;
    assert.equal(line, expected, `${options.label} #${i}`);
  }
  assert.equal(out.chunks.length, events.length);
}

/** Every way the typical forward event can differ from itself in one field that shapes the line. */
function variants(base: AuditEvent): AuditEvent[] {
  const b = base as Mutable;
  const out: AuditEvent[] = [];
  const vary = (change: (e: Mutable) => void): void => {
    const e: Mutable = { ...b, dst: { ...b.dst }, src: { ...b.src }, unmapped: { ...b.unmapped } };
    if (b.http !== undefined) e.http = { ...b.http };
    change(e);
    out.push(e);
  };
  vary(() => {});
  vary((e) => {
    e.src = { ip: '127.0.0.1', port: 1 };
  });
  vary((e) => {
    e.src = { ip: '10.0.0.9', port: 1 };
  });
  vary((e) => {
    e.src = { ip: '127.0.0.1' };
  });
  vary((e) => {
    e.src = { port: 7 };
  });
  vary((e) => {
    delete e.src;
  });
  vary((e) => {
    e.src = { ip: '127.0.0.1', port: Number.NaN };
  });
  vary((e) => {
    e.class = 'NET';
  });
  vary((e) => {
    e.class = 'FINDING';
  });
  vary((e) => {
    e.class = 'DNS';
  });
  vary((e) => {
    e.class = 'CONFIG';
  });
  vary((e) => {
    e.activity = 'POST';
  });
  vary((e) => {
    e.severity = 'HIGH';
  });
  vary((e) => {
    e.action = 'DENIED';
  });
  vary((e) => {
    delete e.action;
  });
  vary((e) => {
    e.engine = 'l7';
  });
  vary((e) => {
    delete e.engine;
  });
  vary((e) => {
    e.policy = 'other';
  });
  vary((e) => {
    delete e.policy;
  });
  vary((e) => {
    e.statusDetail = 'FORWARD denied';
  });
  vary((e) => {
    e.detail = 'another reason';
  });
  vary((e) => {
    e.detail = '';
  });
  vary((e) => {
    e.generation = 2;
  });
  vary((e) => {
    e.generation = 0;
  });
  vary((e) => {
    e.generation = -0;
  });
  vary((e) => {
    e.generation = Number.NaN;
  });
  vary((e) => {
    e.policyHash = 'sha256:def';
  });
  vary((e) => {
    e.dst = { host: 'other.example.test', port: 8080 };
  });
  vary((e) => {
    e.dst = { host: 'origin.example.test', port: 8081 };
  });
  vary((e) => {
    e.dst = { host: 'origin.example.test', ip: '10.0.0.1', port: 8080 };
  });
  vary((e) => {
    e.dst = { ip: 'origin.example.test', port: 8080 };
  });
  vary((e) => {
    delete e.dst;
  });
  vary((e) => {
    e.http = { method: 'POST', url: 'http://origin.example.test:8080/v1/items' };
  });
  vary((e) => {
    e.http = { method: 'GET', url: 'http://origin.example.test:8080/v1/other' };
  });
  vary((e) => {
    e.http = { method: 'GET', url: 'http://origin.example.test:8080/v1/items?token=SECRET' };
  });
  vary((e) => {
    delete e.http;
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, status_code: 404 };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, status_code: '200' };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, extra: true };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, extra: null };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, extra: undefined };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, secret: 'CANARY' };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, nested: { a: 1 } };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, list: ['a'] };
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, big: 12n };
  });
  vary((e) => {
    const { adapter: _a, ...rest } = e.unmapped as Record<string, unknown>;
    e.unmapped = { ...rest, adapter: 'forward' };
  });
  vary((e) => {
    e.unmapped = { 1: 'one', ...e.unmapped };
  });
  vary((e) => {
    e.unmapped = Object.fromEntries(Array.from({ length: MAX_AUDIT_MEMO_UNMAPPED_KEYS + 1 }, (_, i) => [`k${i}`, i]));
  });
  vary((e) => {
    e.unmapped = JSON.parse('{"__proto__": 1, "after": 2}') as Record<string, unknown>;
  });
  vary((e) => {
    e.unmapped = Object.assign(Object.create({ inherited: 'x' }) as object, { own: 1 });
  });
  vary((e) => {
    delete e.unmapped;
  });
  vary((e) => {
    e.message = `${e.message} é 😀`;
  });
  vary((e) => {
    e.detail = 'non-ASCII é in the middle, 😀 too';
  });
  vary((e) => {
    e.message = '\u2028 starts odd';
  });
  vary((e) => {
    e.message = `${e.message}/${'m'.repeat(MAX_AUDIT_MEMO_KEY_CHARS)}`;
  });
  vary((e) => {
    e.unmapped = { ...e.unmapped, long: 'x'.repeat(MAX_AUDIT_MEMO_EVENT_CHARS) };
  });
  return out;
}

/** A denial as chain/events.ts builds one: `unmapped.replay` is an object, with a list of query keys. */
const DENIAL: AuditEvent = {
  ...FORWARD_ALLOWED_EVENT,
  severity: 'MED',
  action: 'DENIED',
  message: 'FORWARD denied GET origin.example.test:8080/admin',
  statusDetail: 'FORWARD denied',
  detail: 'no policy allows origin.example.test:8080',
  http: { method: 'GET', url: 'http://origin.example.test:8080/admin?a=1&b=2' },
  unmapped: {
    adapter: 'forward',
    verdict: 'deny',
    reason_code: 'no-rule-matched',
    status_code: 403,
    replay: { scheme: 'http', method: 'GET', host: 'origin.example.test', port: 8080, path: '/admin', query_keys: ['a', 'b'] },
  },
};

/** Every way a denial's replay can differ from itself: each field, the list, the keys' order, and shapes not kept. */
function replayVariants(base: AuditEvent): AuditEvent[] {
  const replay = (base.unmapped as { replay: Record<string, unknown> }).replay;
  const out: AuditEvent[] = [];
  const vary = (change: (r: Record<string, unknown>) => Record<string, unknown> | undefined): void => {
    const next = change({ ...replay, query_keys: [...(replay.query_keys as string[])] });
    out.push({ ...base, src: { ...base.src }, unmapped: { ...base.unmapped, replay: next } });
  };
  vary((r) => r);
  vary((r) => ({ ...r, path: '/admin/x' }));
  vary((r) => ({ ...r, port: 8081 }));
  vary((r) => ({ ...r, port: Number.NaN }));
  vary((r) => ({ ...r, query_keys: ['a'] }));
  vary((r) => ({ ...r, query_keys: ['b', 'a'] }));
  vary((r) => ({ ...r, query_keys: [] }));
  vary((r) => ({ ...r, query_keys: ['a', 'b', 'c'] }));
  vary((r) => ({ ...r, query_keys: ['a', 2] }));
  vary((r) => ({ ...r, query_keys: Array.from({ length: MAX_AUDIT_MEMO_UNMAPPED_KEYS + 1 }, (_, i) => `k${i}`) }));
  vary((r) => ({ ...r, query_keys_truncated: true }));
  vary((r) => ({ ...r, binary: '/usr/bin/curl' }));
  vary((r) => {
    const { query_keys: _q, ...rest } = r;
    return rest;
  });
  vary((r) => {
    const { scheme, ...rest } = r;
    return { ...rest, scheme };
  });
  vary((r) => ({ ...r, extra: undefined }));
  vary((r) => ({ ...r, extra: null }));
  vary((r) => ({ ...r, deeper: { a: 1 } }));
  vary((r) => ({ ...r, list: [{ a: 1 }] }));
  vary((r) => ({ ...r, when: new Date(0) }));
  vary((r) => ({ ...r, toJSON: () => 'x' }));
  vary((r) => Object.assign(Object.create({ inherited: 'x' }) as object, r));
  vary((r) => Object.assign(Object.create(null) as object, r));
  vary((r) => JSON.parse(`{"__proto__": 1, ${JSON.stringify(r).slice(1)}`) as Record<string, unknown>);
  vary((r) => ({ ...r, ...Object.fromEntries(Array.from({ length: MAX_AUDIT_MEMO_UNMAPPED_KEYS }, (_, i) => [`k${i}`, i])) }));
  vary((r) => ({ ...r, path: `/${'p'.repeat(MAX_AUDIT_MEMO_EVENT_CHARS)}` }));
  vary(() => undefined);
  out.push({ ...base, unmapped: { ...base.unmapped, replay: 'not an object' } });
  out.push({ ...base, unmapped: { ...base.unmapped, replay: [1, 2] } });
  return out;
}

function shuffledRepeats(random: Random, items: readonly AuditEvent[], count: number): AuditEvent[] {
  return Array.from({ length: count }, () => items[Math.floor(random() * items.length)] as AuditEvent);
}

describe('audit lines from the memo of line templates', () => {
  const forward = FORWARD_ALLOWED_EVENT;

  it('are the lines pino writes, for every single-field variant of an event, repeated in random order', () => {
    const random = seeded(5);
    const events = shuffledRepeats(random, variants(forward), 3_000);
    for (const parts of [false, true]) {
      assertLines(events, { parts, label: `parts ${parts}` });
      assertLines(events, { parts, bindings: { sandbox: 'sb-1', note: 'é' }, label: `bindings, parts ${parts}` });
      assertLines(events, { parts, product: { name: 'b', vendorName: 'v', version: '1.2.3' }, label: `product, parts ${parts}` });
    }
  });

  it("are the lines pino writes for a denial and every variant of its replay, repeated in random order", () => {
    const random = seeded(13);
    const events = shuffledRepeats(random, [...replayVariants(DENIAL), ...variants(DENIAL)], 3_000);
    for (const parts of [false, true]) assertLines(events, { parts, label: `denial, parts ${parts}` });
  });

  it('are the lines pino writes for seeded pseudo-random events, each repeated with new source ports', () => {
    const random = seeded(77);
    const pool = Array.from({ length: 400 }, () => randomEvent(random));
    const events = shuffledRepeats(random, pool, 4_000).map((event) => (event.src === undefined || random() < 0.5 ? event : { ...event, src: { ...event.src, port: Math.floor(random() * 65_536) } }));
    for (const parts of [false, true]) assertLines(events, { parts, label: `random, parts ${parts}` });
  });

  it('stay right beyond the memo bound, and when an emitted event is changed and emitted again', () => {
    const many = Array.from({ length: MAX_AUDIT_MEMO_ENTRIES * 3 }, (_, i) => ({ ...forward, message: `m${i % (MAX_AUDIT_MEMO_ENTRIES + 7)}` }));
    assertLines([...many, ...many], { parts: true, label: 'bound' });
    const changing: Mutable = { ...forward, unmapped: { ...forward.unmapped }, dst: { ...forward.dst } };
    const events: AuditEvent[] = [];
    const out = memory(true);
    const sink = createAuditSink({ logger: createLogger({ format: 'json', destination: out, now: () => T }), now: () => T, format: 'json' });
    for (let i = 0; i < 6; i++) {
      (changing.unmapped as Record<string, unknown>).status_code = i % 2 === 0 ? 200 : 500;
      (changing.dst as { port?: number }).port = 8080 + (i % 3);
      sink.emit(changing);
      events.push(structuredClone(changing));
    }
    for (const [i, event] of events.entries()) {
      assert.equal(JSON.parse(out.chunks[i] ?? '').ocsf.unmapped.status_code, (event.unmapped as { status_code: number }).status_code);
      assert.equal(JSON.parse(out.chunks[i] ?? '').ocsf.dst_endpoint.port, event.dst?.port);
    }
  });

  it('follow bindings changed after the sink was made', () => {
    const out = memory(true);
    const logger = createLogger({ format: 'json', destination: out, now: () => T });
    const sink = createAuditSink({ logger, now: () => T, format: 'json' });
    for (let i = 0; i < 3; i++) sink.emit(forward);
    logger.setBindings({ sandbox: 'later' });
    sink.emit(forward);
    assert.ok(!(out.chunks[2] ?? '').includes('"sandbox"'));
    assert.ok((out.chunks[3] ?? '').startsWith(`{"level":30,"time":${T},"sandbox":"later","ocsf":`), out.chunks[3]);
  });
});
