import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAuditSink } from '../../src/telemetry/audit.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { AUDIT_TIME_KEY, createLogger } from '../../src/telemetry/logger.js';
import { cleanText, MAX_REASON_CHARS, stripQuery, toOcsf, toShorthand, UNKNOWN_ACTOR } from '../../src/telemetry/ocsf.js';
import { randomEvent, randomText, seeded, whatwgUrlParts } from '../harness/audit-events.js';

/** toShorthand as it was written before it was tuned (parts array + join): the reference for its output. */
function referenceShorthand(event: AuditEvent): string {
  const hostPort = (host: string, port: number | undefined): string => {
    const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
    return port === undefined ? shown : `${shown}:${port}`;
  };
  const parts = [`${event.class}:${cleanText(event.activity, 32).toUpperCase()}`, `[${event.severity}]`];
  if (event.action !== undefined) parts.push(event.action);
  let target: string | undefined;
  if (event.http !== undefined) {
    target = `${cleanText(event.http.method, 32)} ${cleanText(stripQuery(event.http.url))}`;
  } else {
    const host = event.dst?.host ?? event.dst?.ip;
    if (host !== undefined) target = hostPort(cleanText(host), event.dst?.port);
  }
  if (target !== undefined) parts.push(UNKNOWN_ACTOR, '->', target);
  const ruled = event.policy !== undefined || event.engine !== undefined;
  if (ruled) parts.push(`[policy:${event.policy === undefined ? '-' : cleanText(event.policy, 128)} engine:${event.engine ?? '-'}]`);
  if (event.class === 'CONFIG' && (event.generation !== undefined || event.policyHash !== undefined)) {
    const version = event.generation === undefined ? [] : [`version:${event.generation}`];
    const hash = event.policyHash === undefined ? [] : [`hash:${cleanText(event.policyHash, 128)}`];
    parts.push(`[${[...version, ...hash].join(' ')}]`);
  }
  const detail = event.detail;
  const error = event.unmapped?.error;
  const errorParts: string[] = [];
  if (typeof error === 'string' && error.length > 0) errorParts.push(`[error:${cleanText(error)}]`);
  else if (typeof error === 'object' && error !== null) {
    const { kind, message } = error as { kind?: unknown; message?: unknown };
    const shown = [typeof kind === 'string' ? cleanText(kind, 128) : '', typeof message === 'string' ? cleanText(message) : ''].filter((text) => text.length > 0);
    if (shown.length > 0) errorParts.push(`[error:${shown.join(' ')}]`);
  }
  // A line that is not a decision says what happened, unless a reason or an error part already does.
  const sayMessage = event.action === undefined ? errorParts.length === 0 : target === undefined && !ruled;
  if (detail !== undefined && detail.length > 0) parts.push(`[reason:${cleanText(detail, MAX_REASON_CHARS)}]`);
  else if (sayMessage && event.message.length > 0) parts.push(`[msg:${cleanText(event.message)}]`);
  parts.push(...errorParts);
  return parts.join(' ');
}

/** Every shape an `unmapped.error` comes in, and some it should not. */
const ERROR_SHAPES: readonly unknown[] = [
  { kind: 'connect-refused', message: 'connect ECONNREFUSED 127.0.0.1:5500' },
  { kind: 'policy', code: 'POLICY_INVALID', message: 'line 1\nline 2 http://h.test/p?token=SECRET' },
  { kind: 'tls' },
  { message: 'cause only' },
  { kind: '', message: '' },
  {},
  'a bare cause',
  '',
  null,
  7,
  ['dns'],
  { kind: 'k\u2028'.repeat(100), message: 'x'.repeat(2_000) },
];

/** The pre-tuning cleanText: the two regexes, always. */
function regexClean(text: string, maxChars = 1024): string {
  const cleaned = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ').replace(/((?:[a-z][a-z0-9+.-]*:\/\/|\/)[^\s?#]*)[?#][^\s\]]*/gi, '$1');
  return cleaned.length > maxChars ? cleaned.slice(0, maxChars) : cleaned;
}

describe('toShorthand and cleanText, against their references', () => {
  it('prints every seeded pseudo-random event exactly as the reference does', () => {
    const random = seeded(4_242);
    for (let i = 0; i < 3_000; i++) {
      const event = randomEvent(random);
      assert.equal(toShorthand(event), referenceShorthand(event), `random #${i}`);
    }
  });

  it('prints unmapped.error in every shape exactly as the reference does', () => {
    const random = seeded(31);
    for (let i = 0; i < 600; i++) {
      const event = randomEvent(random);
      const error = ERROR_SHAPES[i % ERROR_SHAPES.length];
      const withError = { ...event, unmapped: { ...event.unmapped, error } };
      assert.equal(toShorthand(withError), referenceShorthand(withError), `random #${i}`);
    }
  });

  it('prints CONFIG version and hash in every combination', () => {
    const base: AuditEvent = { class: 'CONFIG', activity: 'loaded', severity: 'INFO', message: 'policy loaded' };
    for (const generation of [undefined, 0, 7]) {
      for (const policyHash of [undefined, '', 'sha256:abc']) {
        const event = { ...base, ...(generation === undefined ? {} : { generation }), ...(policyHash === undefined ? {} : { policyHash }) };
        assert.equal(toShorthand(event), referenceShorthand(event), JSON.stringify(event));
      }
    }
  });

  it('cleans seeded pseudo-random text exactly as the two regexes do', () => {
    const random = seeded(77);
    for (let i = 0; i < 3_000; i++) {
      const text = randomText(random);
      assert.equal(cleanText(text), regexClean(text), JSON.stringify(text));
      assert.equal(cleanText(text, 16), regexClean(text, 16), JSON.stringify(text));
    }
  });
});

const URL_SAMPLES = 3_000;

describe('HTTP URL parts', () => {
  it('match new URL() for seeded pseudo-random URLs of the common shape and near it', () => {
    const random = seeded(1_234);
    const schemes = ['http://', 'https://', 'HTTP://', 'ftp://', ''];
    const hostParts = ['a', 'z9', 'api', 'example', 'test', 'xn--p1ai', '123', '0x7f', '0x', '0xg', '0x1f2', 'x0', '1', '-', 'A', '', 'é', '_', '%41'];
    const portParts = ['', ':80', ':443', ':8080', ':0', ':00', ':65535', ':65536', ':99999', ':', ':1a', ':080'];
    const pathParts = ['/', '/v1', '/items', '/a:b@c', "/!$&'()*+,;=", '/~x', '/.', '/..', '/%2e', '/a b', '/"q"', '/\\', '/é', '/x.y', '?q=1', '#f', '//'];
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    for (let i = 0; i < URL_SAMPLES; i++) {
      const labels = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(hostParts));
      let path = '';
      for (let j = Math.floor(random() * 4); j >= 0; j--) path += pick(pathParts);
      const url = `${pick(schemes)}${labels.join(random() < 0.9 ? '.' : '..')}${pick(portParts)}${random() < 0.95 ? path : ''}`;
      const event: AuditEvent = { class: 'HTTP', activity: 'GET', severity: 'INFO', message: 'm', http: { method: 'GET', url } };
      const got = toOcsf(event, { time: 0 }).http_request?.url;
      const urlString = cleanText(stripQuery(url));
      const expected = whatwgUrlParts(urlString);
      assert.deepEqual(got, expected, url);
    }
  });
});

describe('shorthand audit lines', () => {
  it('are the lines pino and the shorthand destination wrote for them, for seeded events, times and levels', () => {
    const random = seeded(5_150);
    for (const level of ['info', 'warn', 'silent'] as const) {
      for (const time of [Date.UTC(2026, 0, 1), 0, -0, 1_767_225_600_123.5, -86_400_000]) {
        const got: string[] = [];
        const expected: string[] = [];
        const logger = createLogger({ format: 'shorthand', level, destination: { write: (chunk: string) => got.push(chunk) } });
        const sink = createAuditSink({ logger: logger.child({ sandbox: 'sb-1' }), now: () => time, format: 'shorthand' });
        const reference = createLogger({ format: 'shorthand', level: level === 'silent' ? 'silent' : 'info', destination: { write: (chunk: string) => expected.push(chunk) } });
        for (let i = 0; i < 200; i++) {
          const event = randomEvent(random);
          sink.emit(event);
          reference.child({ sandbox: 'sb-1' }).info({ [AUDIT_TIME_KEY]: time }, toShorthand(event));
        }
        assert.deepEqual(got, expected, `${level} ${time}`);
      }
    }
  });
});
