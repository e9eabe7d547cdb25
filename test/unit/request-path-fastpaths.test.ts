// The per-request fast paths (perf round for issue 3) give exactly what the full paths give: cached DNS
// answers without a promise, prepared self addresses, the plain-name normaliseHost path, the port check
// without a regex, and credentialHead's no-marker shortcut. Each test compares against the full path.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rewriteRequestHead } from '../../src/credentials/rewrite-head.js';
import { scopeFor } from '../../src/credentials/scope.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';
import { checkDestination, type DestinationRequest } from '../../src/net/destination.js';
import { normaliseHost, parseAuthority, parseIpv4Number } from '../../src/net/host.js';
import { createCachingResolver } from '../../src/net/resolver-cache.js';
import { NO_SELF_ADDRESSES, prepareSelfAddresses, type SelfAddress, validateDestination } from '../../src/net/ssrf.js';
import type { Endpoint } from '../../src/policy/types.js';
import { credentialHead } from '../../src/chain/credential-injection.js';
import { testClock } from '../harness/clock.js';
import { makeEndpoint } from '../harness/endpoint.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { testLookupGate } from '../harness/lookup-gate.js';
import { seeded } from '../harness/seeded.js';

function randomString(next: () => number, alphabet: string, maxLength: number): string {
  const length = 1 + Math.floor(next() * maxLength);
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(next() * alphabet.length)];
  return out;
}

const CORPUS_SIZE = 4_000;

/** checkDestination's verdict when it came in this turn (no query), else undefined. */
function checkDestinationCached(request: DestinationRequest): ReturnType<typeof checkDestination> | undefined {
  const out = checkDestination(request);
  if (out instanceof Promise) {
    out.catch(() => undefined);
    return undefined;
  }
  return out;
}

describe('checkDestination on a cached answer', () => {
  const RECORDS = {
    'api.example.test': ['127.0.0.1', '10.0.0.5', '169.254.169.254'],
    'public.example.test': ['8.8.8.8'],
    'inner.example.test': ['10.1.2.3'],
    'self.example.test': ['127.0.0.1'],
    'v6.example.test': ['::ffff:127.0.0.1'],
    'down.example.test': 'timeout',
  } as const;
  const self = prepareSelfAddresses([{ ip: '127.0.0.1', port: 3128 }]);
  const endpoints: (Endpoint | undefined)[] = [
    undefined,
    makeEndpoint({ host: 'api.example.test' }),
    makeEndpoint({ host: '*.example.test' }),
    makeEndpoint({ host: 'api.example.test', allowedIps: ['10.0.0.0/8'] }),
  ];

  it('settles synchronously with exactly what a fresh resolution gives, for every name, plan and setting', async () => {
    const clock = testClock();
    const cache = testLookupGate(createCachingResolver(fakeResolver(RECORDS), { now: clock.now }), { now: clock.now });
    const plain = testLookupGate(fakeResolver(RECORDS), { now: clock.now });
    let cases = 0;
    for (const host of [...Object.keys(RECORDS), 'missing.example.test']) {
      for (const endpoint of endpoints) {
        for (const port of [80, 443, 3128, 6443]) {
          for (const allowLoopback of [undefined, false, true]) {
            const base = { host, kind: 'name' as const, port, endpoint, endpoints: endpoint === undefined ? [] : [endpoint], allowLoopback, selfAddresses: self };
            const expected = await checkDestination({ ...base, lookups: plain });
            await checkDestination({ ...base, lookups: cache });
            const held = checkDestinationCached({ ...base, lookups: cache });
            // A transient failure is never cached: that question goes to the resolver again (unless the port
            // alone refuses it, before any query).
            const portRefused = !expected.ok && 'check' in expected && expected.check === 'control-plane-port';
            if (host === 'down.example.test' && !portRefused) {
              assert.equal(held, undefined, host);
              assert.deepEqual(await checkDestination({ ...base, lookups: cache }), expected, host);
            } else {
              assert.notEqual(held, undefined, `${host}:${port} should settle from the cache`);
              assert.deepEqual(held, expected, `${host}:${port} ${endpoint?.host} loopback=${allowLoopback}`);
            }
            cases++;
          }
        }
      }
    }
    assert.ok(cases > 100);
  });

  it('asks the resolver again once the cached answer expired, and never before', async () => {
    const clock = testClock();
    const inner = fakeResolver({ 'api.example.test': { addresses: ['127.0.0.1'], ttlSeconds: 10 } });
    const cache = createCachingResolver(inner, { now: clock.now });
    const request: DestinationRequest = { host: 'api.example.test', kind: 'name', port: 80, endpoint: undefined, endpoints: [], lookups: testLookupGate(cache, { now: clock.now }), allowLoopback: true };
    const first = checkDestination(request);
    assert.ok(first instanceof Promise, 'a name not held is resolved');
    await first;
    assert.equal(inner.calls.length, 1);
    clock.advance(9_999);
    assert.notEqual(checkDestinationCached(request), undefined);
    assert.equal(inner.calls.length, 1, 'a fresh answer is served without a query');
    clock.advance(1);
    const again = checkDestination(request);
    assert.ok(again instanceof Promise, 'an expired answer is resolved again, not served');
    await again;
    assert.equal(inner.calls.length, 2);
  });

  it('cached() never starts a query and answers only what resolve() would answer without one', async () => {
    const clock = testClock();
    const inner = fakeResolver({ 'a.example.test': { addresses: ['127.0.0.2'], ttlSeconds: 5 }, 'z.example.test': { addresses: ['127.0.0.3'], ttlSeconds: 0 } });
    const cache = createCachingResolver(inner, { now: clock.now });
    assert.equal(cache.cached?.('a.example.test', 4), undefined);
    const pending = cache.resolve('a.example.test', 4);
    assert.equal(cache.cached?.('a.example.test', 4), undefined, 'an in-flight question is not an answer');
    const answer = await pending;
    assert.equal(cache.cached?.('a.example.test', 4), answer);
    assert.equal(cache.cached?.('a.example.test', 6), undefined);
    await cache.resolve('z.example.test', 4);
    assert.equal(cache.cached?.('z.example.test', 4), undefined, 'TTL 0 is never cached');
    clock.advance(5_000);
    assert.equal(cache.cached?.('a.example.test', 4), undefined);
    assert.equal(inner.calls.length, 2);
  });
});

describe('validateDestination with prepared self addresses', () => {
  // Only classified by validateDestination (a pure function); nothing here opens a socket.
  const CLASSIFIED_ADDRESSES = ['127.0.0.1', '127.0.0.2', '10.0.0.5', '::1', '::ffff:127.0.0.1', '::ffff:10.0.0.5', '8.8.8.8', '0.0.0.0'];
  const LISTS: SelfAddress[][] = [
    [{ ip: '127.0.0.1', port: 3128 }],
    [{ ip: '0.0.0.0', port: 3128 }, { ip: '10.0.0.5', port: 9090 }],
    [{ ip: '::', port: 3128 }],
    [{ ip: 'not-an-ip', port: 3128 }, { ip: '10.0.0.5', port: 3128 }],
    [],
  ];

  it('one prepared list answers every check as preparing it afresh does, on every plan', () => {
    const endpoints = [undefined, makeEndpoint({ host: 'api.example.test' }), makeEndpoint({ host: 'api.example.test', allowedIps: ['10.0.0.0/8'] })];
    for (const list of LISTS) {
      const shared = prepareSelfAddresses(list);
      for (const address of CLASSIFIED_ADDRESSES) {
        for (const port of [3128, 9090]) {
          for (const endpoint of endpoints) {
            for (const allowLoopback of [false, true]) {
              const input = { endpoint, host: 'api.example.test', port, addresses: [address], allowLoopback };
              validateDestination({ ...input, selfAddresses: shared });
              const reused = validateDestination({ ...input, selfAddresses: shared });
              const fresh = validateDestination({ ...input, selfAddresses: prepareSelfAddresses(list.map((e) => ({ ...e }))) });
              assert.deepEqual(reused, fresh, `${address}:${port} self=${JSON.stringify(list)}`);
            }
          }
        }
      }
    }
  });

  it('is a frozen snapshot: changing the source list later changes nothing', () => {
    const input = { endpoint: undefined, host: 'api.example.test', port: 3128, addresses: ['127.0.0.1'], allowLoopback: true };
    const entry = { ip: '127.0.0.1', port: 9999 };
    const source = [entry];
    const prepared = prepareSelfAddresses(source);
    assert.ok(Object.isFrozen(prepared) && Object.isFrozen(prepared.list) && Object.isFrozen(prepared.parsed));
    assert.equal(validateDestination({ ...input, selfAddresses: prepared }).ok, true);
    entry.port = 3128;
    source.push({ ip: '127.0.0.1', port: 3128 });
    assert.equal(validateDestination({ ...input, selfAddresses: prepared }).ok, true);
    assert.equal(validateDestination({ ...input, selfAddresses: prepareSelfAddresses(source) }).ok, false);
    assert.equal(prepareSelfAddresses([]), NO_SELF_ADDRESSES);
    assert.equal(validateDestination({ ...input, selfAddresses: NO_SELF_ADDRESSES }).ok, true);
  });
});

describe('normaliseHost plain-name fast path', () => {
  it('gives the same answer for a lower-case host as its upper-case spelling takes through the full path', () => {
    const next = seeded(3);
    const fixed = ['a', 'a.', 'a..b', '.a', 'xn--', 'xn--abc.test', 'xn--nxasmq6b.test', '0x7f.1', '127.1', '1.2.3.4.5', 'a.0x', 'a.1', 'a.09',
      `${'a'.repeat(63)}.test`, `${'a'.repeat(64)}.test`, `${'a.'.repeat(127)}b`, 'api.example.test', '-a-.test', '_srv._tcp.test', 'a.b-', 'x.0xffffffff', 'x.0x100000000'];
    const corpus = [...fixed];
    for (let i = 0; i < CORPUS_SIZE; i++) corpus.push(randomString(next, 'abcxnx-0189._', 80));
    let compared = 0;
    for (const host of corpus) {
      const upper = host.toUpperCase();
      if (upper === host) continue;
      assert.deepEqual(normaliseHost(host), normaliseHost(upper), host);
      compared++;
    }
    assert.ok(compared > CORPUS_SIZE / 2);
  });

  it('still refuses URL delimiters, controls and brackets, and still reads a colon as IPv6', () => {
    const next = seeded(7);
    const forbidden = normaliseHost('a b');
    assert.ok(!forbidden.ok);
    for (let i = 0; i < 200; i++) {
      const left = randomString(next, 'ab.1-', 10);
      const right = randomString(next, 'ab.1-', 10);
      for (const odd of [' ', '%', '@', '/', '?', '#', '\\', '\u0000', '\u007f']) assert.deepEqual(normaliseHost(`${left}${odd}${right}`), forbidden);
      assert.deepEqual(normaliseHost(`${left}]${right}`), { ok: false, message: 'unexpected ] in host' });
      const colon = normaliseHost(`${left}:${right}`);
      assert.ok(colon.ok ? colon.kind === 'ipv6' : colon.message === 'not a valid IPv6 literal', `${left}:${right}`);
    }
  });

  it('leaves every other character to the full path', () => {
    const next = seeded(5);
    // Each of these characters must be refused or rewritten by the full path: the fast path must not take them.
    for (const odd of ['A', ' ', '%', '@', '/', '?', '#', '\\', '[', ']', ':', '\u0000', '\u007f', 'é', '\uff10', '\u3002', '+', '*']) {
      for (let i = 0; i < 50; i++) {
        const left = randomString(next, 'ab.1-', 10);
        const host = `${left}${odd}${randomString(next, 'ab.1-', 10)}`;
        const full = normaliseHost(host);
        if (full.ok) assert.notEqual(full.host, host, `${JSON.stringify(host)} is not canonical, so it cannot come back unchanged`);
      }
    }
  });
});

describe('WHATWG IPv4 numbers without parseInt', () => {
  // The parser as it was, with Number.parseInt per character: the reference the digit table must match.
  function referenceNumber(part: string): number | undefined {
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
      const digit = Number.parseInt(digits.charAt(i), radix);
      if (Number.isNaN(digit)) return undefined;
      value = value * radix + digit;
      if (value > 0xffff_ffff) return Number.POSITIVE_INFINITY;
    }
    return value;
  }
  it('reads every spelling exactly as the parseInt-based parser did', () => {
    const next = seeded(13);
    const corpus = ['0x7f.1', '0X7F.0.0.1', '017700000001', '08', '09.1', '0x', '0x.1', '4294967295', '4294967296', '0xffffffff', '0x100000000', '1.2.3.4.', '1..2', '.', ''];
    for (let i = 0; i < CORPUS_SIZE * 2; i++) corpus.push(randomString(next, '0123456789abcdefgxXAFZ.  +-١', 14));
    // parseWhatwgIpv4 around the part parser is unchanged: every part (and every whole text) must read the same.
    for (const text of corpus) {
      for (const part of [text, ...text.split('.')]) assert.equal(parseIpv4Number(part), referenceNumber(part), JSON.stringify(part));
    }
  });

  it('tells hosts that end in a number from names as before', () => {
    const next = seeded(17);
    for (let i = 0; i < CORPUS_SIZE; i++) {
      const host = `${randomString(next, 'abc', 4)}.${randomString(next, '0123456789abcdefgxX', 6)}`;
      const result = normaliseHost(host);
      const last = host.slice(host.lastIndexOf('.') + 1);
      const number = /^[0-9]+$/.test(last) || referenceNumber(last.toLowerCase()) !== undefined;
      // A name ending in a number must parse as IPv4 (here: never, the first label is letters) or be refused.
      assert.equal(result.ok && result.kind === 'name', !number, host);
    }
  });
});

describe('parseAuthority port check', () => {
  it('accepts exactly the ports /^[1-9][0-9]{0,4}$/ with a value up to 65535 accepts', () => {
    const oracle = (text: string) => /^[1-9][0-9]{0,4}$/.test(text) && Number(text) <= 65_535;
    const candidates = ['', '0', '00', '01', '1', '9', '10', '80', '443', '65535', '65536', '99999', '100000', '123456', '1a', 'a1', ' 1', '1 ', '+1', '-1',
      '1.0', '1e3', '0x10', '\u0661', '\uff18\uff10', '８０', '1\u0000'];
    for (let p = 0; p <= 70_000; p += 7) candidates.push(String(p), `0${p}`);
    for (const port of candidates) {
      const result = parseAuthority(`api.example.test:${port}`);
      assert.equal(result.ok, oracle(port), JSON.stringify(port));
      if (result.ok) assert.equal(result.port, Number(port));
    }
  });
});

describe('credentialHead without placeholders', () => {
  const source = createStaticCredentialSource({
    providers: [{ name: 'acme', env: { API_TOKEN: 'tok-123' }, endpoints: [{ host: 'api.example.test', port: 80 }] }],
  });

  // The full path as credentialHead ran it before the shortcut: scope, rewriteRequestHead, flat headers.
  function fullPath(input: Parameters<typeof credentialHead>[0]) {
    const q = input.target.indexOf('?');
    const path = q < 0 ? input.target : input.target.slice(0, q);
    const query = q < 0 ? undefined : input.target.slice(q + 1);
    const scope = scopeFor({ source: input.source, host: input.host, port: input.port, path, endpoint: input.endpoint });
    const pairs: [string, string][] = [];
    for (let i = 0; i < input.headers.length; i += 2) pairs.push([input.headers[i] ?? '', input.headers[i + 1] ?? '']);
    const rewritten = rewriteRequestHead({ method: input.method, path, query, headers: pairs, scope });
    if (!rewritten.ok) return rewritten;
    const target = rewritten.query === undefined ? rewritten.path : `${rewritten.path}?${rewritten.query}`;
    return { ok: true, target, headers: rewritten.headers.flat(), boundKeys: scope.boundKeys, usedKeys: rewritten.usedKeys.length };
  }

  function shortcut(input: Parameters<typeof credentialHead>[0]) {
    const result = credentialHead(input);
    if (!result.ok) return result;
    const { head } = result;
    return { ok: true, target: head.target, headers: head.headers, boundKeys: head.scope.boundKeys, usedKeys: head.usedKeys };
  }

  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  const HEADER_SETS: string[][] = [
    [],
    ['host', 'api.example.test'],
    ['Host', 'api.example.test', 'Authorization', `Basic ${b64('user:pass')}`, 'Authorization', 'Bearer abc'],
    ['authorization', `Basic ${b64('openshell:resolve:env:API_TOKEN')}`],
    ['x-token', 'openshell:resolve:env:API_TOKEN'],
    ['x-token', 'OpenShell%3Aresolve%3Aenv%3AAPI_TOKEN'],
    ['x-token', 'Bearer x-OPENSHELL-RESOLVE-ENV-API_TOKEN'],
    ['x-odd'],
    ['Cookie', 'a=b; c=%41', 'x-basic', 'Basic !!!'],
  ];
  const TARGETS = ['/', '/a/b', '/a?', '/a?b=c&d', '/openshell:resolve:env:API_TOKEN', '/x?k=openshell%253Aresolve%253Aenv%253AAPI_TOKEN', '/?'];

  it('returns the same head, scope keys and refusals as the full rewrite, marker or not', () => {
    for (const host of ['api.example.test', 'other.example.test', '']) {
      for (const target of TARGETS) {
        for (const headers of HEADER_SETS) {
          for (const method of ['GET', 'openshell:resolve:env:API_TOKEN']) {
            // Each call is handed a list of its own, as the credentials stage hands it one.
            const input = { source, host, port: 80, method, target, headers: [...headers], endpoint: undefined };
            assert.deepEqual(shortcut(input), fullPath({ ...input, headers: [...headers] }), `${host} ${method} ${target} ${JSON.stringify(headers)}`);
          }
        }
      }
    }
  });

  it('keeps the list it was handed when nothing is placed or replaced (no provider binds this host), a name without a value given an empty one', () => {
    const headers = ['host', 'api.example.test'];
    const result = credentialHead({ source, host: 'other.example.test', port: 80, method: 'GET', target: '/', headers, endpoint: undefined });
    assert.ok(result.ok);
    assert.equal(result.head.headers, headers);
    assert.deepEqual(result.head.headers, ['host', 'api.example.test']);
    const odd = ['host', 'api.example.test', 'x-odd'];
    const padded = credentialHead({ source, host: 'other.example.test', port: 80, method: 'GET', target: '/', headers: odd, endpoint: undefined });
    assert.ok(padded.ok);
    assert.deepEqual(padded.head.headers, ['host', 'api.example.test', 'x-odd', '']);
  });
});

describe('credential fast checks', () => {
  it('decodeBasic answers exactly as the full scheme match does, spaces or not', async () => {
    const { decodeBasic } = await import('../../src/credentials/rewrite-head.js');
    const scheme = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(\S+)$/;
    const base64 = /^[A-Za-z0-9+/]+={0,2}$/;
    const oracle = (value: string): string | undefined => {
      const match = scheme.exec(value.trim());
      if (match === null || match[1]?.toLowerCase() !== 'basic' || !base64.test(match[2] ?? '')) return undefined;
      return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.from(match[2] ?? '', 'base64'));
    };
    const next = seeded(11);
    const values = ['Basic dXNlcjpwYXNz', 'basic  dXNlcjpwYXNz ', 'Basic\tdXNlcjpwYXNz', 'Basic\u00a0dXNlcjpwYXNz', ' Basic dXNlcjpwYXNz', 'Basic', 'Basic ', 'dXNlcjpwYXNz', ''];
    for (let i = 0; i < CORPUS_SIZE; i++) values.push(randomString(next, 'Basic dXNl=+/\t:-', 24));
    for (const value of values) assert.equal(decodeBasic(value), oracle(value), JSON.stringify(value));
  });

  it('binds a provider for an upper-case host with one trailing dot, and only one dot is dropped', () => {
    const source = createStaticCredentialSource({
      providers: [{ name: 'acme', env: { API_TOKEN: 'tok-123' }, endpoints: [{ host: 'api.example.test', port: 80 }] }],
    });
    const keys = (host: string) => scopeFor({ source, host, port: 80, path: '/' }).boundKeys;
    assert.deepEqual(keys('API.Example.TEST.'), ['API_TOKEN']);
    assert.deepEqual(keys('api.example.test'), ['API_TOKEN']);
    assert.deepEqual(keys('api.example.test..'), []);
    assert.deepEqual(keys('other.example.test'), []);
  });
});
