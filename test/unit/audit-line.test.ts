import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { createAuditSink } from '../../src/telemetry/audit.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { joinParts } from '../../src/telemetry/log-destination.js';
import { createLogger, createRawLineWriter, type LinePart } from '../../src/telemetry/logger.js';
import { CENSORED_UNMAPPED_KEYS, cleanText, MAX_UNMAPPED_KEYS, toOcsf, toShorthand, UNMAPPED_CENSOR } from '../../src/telemetry/ocsf.js';
import { FORWARD_ALLOWED_EVENT, whatwgUrlParts } from '../harness/audit-events.js';
import { logSink } from '../harness/log-sink.js';

const T = Date.UTC(2026, 0, 1);

const forwardAllowed: AuditEvent = FORWARD_ALLOWED_EVENT;

function memory(): { chunks: string[]; write(chunk: string): boolean } {
  const chunks: string[] = [];
  return { chunks, write: (chunk: string) => chunks.push(chunk) > 0 };
}

/** The pre-writer rendering: cleanText as two regexes, always. */
function regexClean(text: string, maxChars = 1024): string {
  const cleaned = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ').replace(/((?:[a-z][a-z0-9+.-]*:\/\/|\/)[^\s?#]*)[?#][^\s\]]*/gi, '$1');
  return cleaned.length > maxChars ? cleaned.slice(0, maxChars) : cleaned;
}

describe('audit lines', () => {
  it('writes exactly the line pino itself writes for the same OCSF object and message', () => {
    for (const bindings of [undefined, { sandbox: 'sb-1' }]) {
      const viaWriter = memory();
      const viaPino = memory();
      const base = createLogger({ format: 'json', destination: viaWriter, now: () => T });
      const logger = bindings === undefined ? base : base.child(bindings);
      const plain = pino({ base: null, timestamp: () => `,"time":${T}` }, viaPino);
      const reference = bindings === undefined ? plain : plain.child(bindings);
      const ocsf = toOcsf(forwardAllowed, { time: T, uid: 'evt-1' });
      const msg = toShorthand(forwardAllowed);
      const writer = createRawLineWriter(logger, 'ocsf');
      assert.ok(writer !== undefined);
      writer.write(`${writer.fieldPrefix}${JSON.stringify(ocsf)},"msg":${JSON.stringify(msg)}${writer.end}`);
      reference.info({ ocsf }, msg);
      assert.deepEqual(viaWriter.chunks, viaPino.chunks);
    }
  });

  it("reads a shared clock once per event: the line's time is the event's", () => {
    // A destination that takes parts (the templated line's path) and one that takes strings only.
    for (const takesParts of [true, false]) {
      const lines: string[] = [];
      const destination = takesParts
        ? { write: (chunk: string) => lines.push(chunk) > 0, writeParts: (parts: readonly LinePart[]) => lines.push(joinParts(parts)) > 0 }
        : { write: (chunk: string) => lines.push(chunk) > 0 };
      let reads = 0;
      const clock = (): number => T + 7 * ++reads;
      const sink = createAuditSink({ logger: createLogger({ format: 'json', destination, now: clock }), now: clock, format: 'json' });
      // pino reads the clock once when it is made.
      reads = 0;
      // Rendered, then seen again (memoised), then from its template.
      for (let i = 0; i < 4; i++) sink.emit({ ...forwardAllowed, src: { ip: '10.0.0.1', port: 40000 + i } });
      assert.equal(reads, 4);
      const parsed = lines.map((line) => JSON.parse(line) as { time: number; ocsf: { time: number } });
      assert.deepEqual(
        parsed.map((line) => [line.time, line.ocsf.time]),
        [1, 2, 3, 4].map((n) => [T + 7 * n, T + 7 * n]),
      );
    }
  });

  it('reads its own clock for the line when the sink reads another', () => {
    const lines: string[] = [];
    let lineReads = 0;
    const logger = createLogger({ format: 'json', destination: { write: (chunk: string) => lines.push(chunk) > 0 }, now: () => T + ++lineReads });
    const sink = createAuditSink({ logger, now: () => T - 1, format: 'json' });
    lineReads = 0;
    for (let i = 0; i < 3; i++) sink.emit(forwardAllowed);
    assert.equal(lineReads, 3);
    assert.deepEqual(
      lines.map((line) => JSON.parse(line) as { time: number; ocsf: { time: number } }).map((line) => [line.time, line.ocsf.time]),
      [1, 2, 3].map((n) => [T + n, T - 1]),
    );
  });

  it('falls back to pino when a mixin or write hook would change the line', () => {
    const withMixin = pino({ mixin: () => ({ extra: 1 }) }, memory());
    const withHook = pino({ hooks: { streamWrite: (s: string) => s } }, memory());
    assert.equal(createRawLineWriter(withMixin, 'ocsf'), undefined);
    assert.equal(createRawLineWriter(withHook, 'ocsf'), undefined);
  });

  it('never carries header maps or secret-shaped keys from unmapped into a line, at any depth', () => {
    for (const format of ['json', 'shorthand'] as const) {
      const log = logSink({ format, now: () => T });
      log.sink.emit({
        ...forwardAllowed,
        unmapped: {
          headers: { authorization: 'Bearer CANARY1' },
          request: { headers: { cookie: 'CANARY2' }, Authorization: 'CANARY3' },
          deep: { deeper: { secret: 'CANARY4', value: 'CANARY5', password: 'CANARY6', 'x-api-key': 'CANARY7' } },
          'set-cookie': ['CANARY8'],
          'proxy-authorization': 'CANARY9',
        },
      });
      assert.equal(/CANARY\d/.test(log.text()), false, `${format}: ${log.text()}`);
      assert.equal(log.events().length, 1);
      if (format === 'json') {
        const [event] = log.events();
        assert.equal(event?.unmapped.headers, UNMAPPED_CENSOR);
        assert.equal(event?.unmapped['proxy-authorization'], UNMAPPED_CENSOR);
      }
    }
    for (const key of ['authorization', 'cookie', 'secret', 'value', 'headers']) assert.ok(CENSORED_UNMAPPED_KEYS.has(key));
  });

  it('renders unmapped values only as cleaned primitives or bounded objects', () => {
    const wide = Object.fromEntries(Array.from({ length: MAX_UNMAPPED_KEYS + 10 }, (_, i) => [`k${i}`, i]));
    const ocsf = toOcsf(
      {
        ...forwardAllowed,
        unmapped: { fn: () => 'CANARY', big: 12n, text: 'see /p?token=CANARY#x', nested: { a: { b: { c: { d: 1 } } } }, wide, list: Array.from({ length: 100 }, () => 1) },
      },
      { time: T },
    );
    const line = JSON.stringify(ocsf);
    assert.equal(line.includes('CANARY'), false, line);
    assert.equal('fn' in ocsf.unmapped && ocsf.unmapped.fn !== undefined, false);
    assert.equal(ocsf.unmapped.big, '12');
    assert.equal(ocsf.unmapped.text, 'see /p');
    assert.deepEqual(ocsf.unmapped.nested, { a: { b: '[nested]' } });
    assert.equal(Object.keys(ocsf.unmapped.wide as object).length, MAX_UNMAPPED_KEYS);
    assert.equal((ocsf.unmapped.list as unknown[]).length, MAX_UNMAPPED_KEYS);
  });

  it('keeps writing one line per event through the sink, and none when the logger is silent', () => {
    const out = memory();
    const logger = createLogger({ format: 'json', destination: out, now: () => T });
    const sink = createAuditSink({ logger, now: () => T, format: 'json' });
    sink.emit(forwardAllowed);
    sink.emit(forwardAllowed);
    assert.equal(out.chunks.length, 2);
    const parsed = JSON.parse(out.chunks[0] ?? '') as { level: number; time: number; ocsf: { class_uid: number }; msg: string };
    assert.equal(parsed.level, 30);
    assert.equal(parsed.time, T);
    assert.equal(parsed.ocsf.class_uid, 4002);
    assert.equal(parsed.msg, toShorthand(forwardAllowed));
    const silentOut = memory();
    const silent = createLogger({ format: 'json', destination: silentOut, level: 'silent' });
    createAuditSink({ logger: silent, now: () => T, format: 'json' }).emit(forwardAllowed);
    assert.equal(silentOut.chunks.length, 0);
  });

  it('cleans text exactly as the two regexes do, with or without the fast path', () => {
    const samples = [
      'plain host name',
      'origin.example.test:8080/v1/items',
      'GET http://h/p?q=1#f tail',
      '/path#frag',
      'line\nbreak\u2028sep\u0085c1\u007f',
      'unicode é ü 日本',
      'a?b',
      'x'.repeat(2000),
      `${'y'.repeat(1020)}?query`,
      '',
    ];
    for (const text of samples) {
      assert.equal(cleanText(text), regexClean(text), JSON.stringify(text));
      assert.equal(cleanText(text, 16), regexClean(text, 16), JSON.stringify(text));
    }
  });

  it('fills the HTTP URL parts exactly as new URL() parses them', () => {
    const urls = [
      'http://origin.example.test:8080/v1/items',
      'http://origin.example.test/',
      'http://origin.example.test:80/a',
      'https://api.example.test:443/b',
      'http://127.1:8080/x',
      'http://[::1]:8080/x',
      'http://EXAMPLE.test/x',
      'http://xn--nxasmq6b.test/x',
      'http://h.test:0080/x',
      'http://h.test:/x',
      'http://h.test/a/../b',
      'http://h.test/%2e%2e/b',
      'http://h.test/a b',
      'http://h.test/.well-known/x',
      'http://h.test/a:b@c;d=e,f',
      'http://h.123/x',
      'http://h.test:99999/x',
      '/origin-form',
    ];
    for (const url of urls) {
      const got = toOcsf({ ...forwardAllowed, http: { method: 'GET', url } }, { time: T }).http_request?.url;
      const expected = whatwgUrlParts(url);
      assert.deepEqual(got, expected, url);
    }
  });
});
