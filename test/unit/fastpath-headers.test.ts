// The header filters look names up without lower-casing them (perf round 3): they must drop, keep and rewrite
// exactly what the Set-based filters did, for any spelling of any name and any Connection list.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BOUNDARY_HEADER_PREFIX, clientResponseHeaders, upstreamRequestHeaders, VIA_VALUE } from '../../src/http1/headers.js';
import { seeded } from '../harness/seeded.js';

// The filters as they were before the fast path, kept verbatim as the reference.
const REQUEST_DROP: ReadonlySet<string> = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'expect', 'x-forwarded-for', 'forwarded', 'via',
]);
const RESPONSE_DROP: ReadonlySet<string> = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade',
]);

function nominated(value: string | undefined, into: Set<string>): void {
  if (value === undefined) return;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '') into.add(name);
  }
}

function isBoundaryHeader(lower: string): boolean {
  return lower.length > BOUNDARY_HEADER_PREFIX.length && lower.startsWith(BOUNDARY_HEADER_PREFIX);
}

function referenceRequest(rawHeaders: readonly string[], options: { readonly host: string; readonly upgrade?: string }): string[] {
  let drop: Set<string> | undefined;
  let via: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (name.length === 10 && name.toLowerCase() === 'connection') {
      drop ??= new Set();
      nominated(rawHeaders[i + 1], drop);
    } else if (name.length === 3 && name.toLowerCase() === 'via') {
      via = via === undefined ? rawHeaders[i + 1] : `${via}, ${rawHeaders[i + 1]}`;
    }
  }
  const out: string[] = ['host', options.host];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    const lower = name.toLowerCase();
    if (REQUEST_DROP.has(lower) || drop?.has(lower) || isBoundaryHeader(lower)) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  out.push('via', via === undefined ? VIA_VALUE : `${via}, ${VIA_VALUE}`);
  if (options.upgrade !== undefined) out.push('connection', 'upgrade', 'upgrade', options.upgrade);
  return out;
}

function referenceResponse(raw: readonly string[]): string[] {
  let drop: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    if (name.length === 10 && name.toLowerCase() === 'connection') {
      drop ??= new Set();
      nominated(raw[i + 1], drop);
    }
  }
  const out: string[] = [];
  let length = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const lower = name.toLowerCase();
    if (RESPONSE_DROP.has(lower) || drop?.has(lower) || isBoundaryHeader(lower)) continue;
    if (lower === 'content-length') {
      if (length) continue;
      length = true;
      const value = raw[i + 1] ?? '';
      const comma = value.indexOf(',');
      out.push(name, comma < 0 ? value : value.slice(0, comma).trim());
      continue;
    }
    out.push(name, raw[i + 1] ?? '');
  }
  return out;
}

const CORPUS_SIZE = 6_000;

// Every name either filter knows, names one character off, boundary-prefixed names, and names with the
// characters whose lower case is not ASCII-folding: `İ` (lower-cases to two characters) and the Kelvin sign
// (lower-cases to ASCII `k`). Parsers never hand those over, but the filters must still agree on them.
const NAMES = [
  ...REQUEST_DROP, ...RESPONSE_DROP, 'content-length', 'content-type', 'date', 'set-cookie', 'close', 'x-custom', 'host1', 'vias', 'te-',
  'connectio', 'connectionx', 'x-boundary-', 'x-boundary-policy', 'x-boundary-x', 'x-boundar-y', 'x-boundary', 'upgradE',
  '\u212aeep-alive', 'x-\u212aey', 'x-key', 'x-\u0130d', 'x-i\u0307d', 'x-id', '\u0130', 'i\u0307', 'x-boundary-\u0130', 'x-boundary\u0130',
  'c\u00f6nnection', '', 'x-\u00e9',
];
const TOKENS = ['', ' ', 'keep-alive', 'close', 'upgrade', 'x-custom', 'X-Custom', 'x-key', 'X-\u212aEY', 'x-i\u0307d', 'x-\u0130d', 'date', 'content-length',
  'x-boundary-policy', '\u0130', ' te ', 'Set-Cookie', 'x-\u00c9'];

function spell(next: () => number, name: string): string {
  let out = '';
  for (const ch of name) out += next() < 0.5 ? ch.toUpperCase() : ch;
  return out;
}

function pick<T>(next: () => number, list: readonly T[]): T {
  return list[Math.floor(next() * list.length)] as T;
}

function connectionValue(next: () => number): string {
  const count = Math.floor(next() * 4);
  const parts: string[] = [];
  for (let i = 0; i < count; i++) parts.push(spell(next, pick(next, [...TOKENS, ...NAMES])));
  // Tabs and the white space beyond ASCII that String.prototype.trim() removes too (the filter trims only when a
  // token's ends are not visible ASCII).
  return parts.join(pick(next, [',', ', ', ' ,', ',,', '\t,', ',\u00a0', '\u3000,\u2028']));
}

function headerList(next: () => number): string[] {
  const out: string[] = [];
  const count = Math.floor(next() * 9);
  for (let i = 0; i < count; i++) {
    const name = spell(next, pick(next, NAMES));
    const lower = name.toLowerCase();
    let value = 'v';
    if (lower === 'connection' || next() < 0.1) value = connectionValue(next);
    else if (lower === 'content-length') value = pick(next, ['5', '5, 5', '5 ,5', '', ',']);
    else if (lower === 'via') value = pick(next, ['1.0 a', '1.1 b, 1.1 c']);
    out.push(name, value);
  }
  return out;
}

describe('header filters without per-name lower-casing', () => {
  it('build exactly the upstream request headers the Set-based filter built', () => {
    const next = seeded(31);
    for (let i = 0; i < CORPUS_SIZE; i++) {
      const raw = headerList(next);
      const options = next() < 0.2 ? { host: 'h.example.test', upgrade: 'websocket' } : { host: 'h.example.test:8080' };
      assert.deepEqual(upstreamRequestHeaders(raw, options), referenceRequest(raw, options), JSON.stringify(raw));
    }
  });

  it('build exactly the client response headers the Set-based filter built', () => {
    const next = seeded(37);
    for (let i = 0; i < CORPUS_SIZE; i++) {
      const raw = headerList(next);
      assert.deepEqual(clientResponseHeaders(raw), referenceResponse(raw), JSON.stringify(raw));
    }
  });

  it('drop every always-dropped name in any spelling, in both directions', () => {
    for (const name of REQUEST_DROP) {
      for (const spelling of [name, name.toUpperCase(), `${name[0]?.toUpperCase()}${name.slice(1)}`]) {
        assert.deepEqual(upstreamRequestHeaders([spelling, 'x'], { host: 'h' }).slice(0, 2), ['host', 'h'], spelling);
        assert.equal(upstreamRequestHeaders([spelling, 'x'], { host: 'h' }).length, 4, spelling);
      }
    }
    for (const name of RESPONSE_DROP) assert.deepEqual(clientResponseHeaders([name.toUpperCase(), 'x', 'Date', 'd']), ['Date', 'd'], name);
    assert.deepEqual(clientResponseHeaders(['X-Boundary-Policy', 'p', 'Connection', 'Close, X-Key', 'x-KEY', '1', 'close', '2']), []);
  });
});
