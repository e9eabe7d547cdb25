// The parse memos of the request path (perf round 3) answer exactly what parsing again answers: normaliseHost
// and the per-default-port authority parser, on repeats, past their bound and for oversized input; and the
// resolver cache's per-family maps keep families apart under one global bound.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  createHostCache,
  MAX_MEMO_ENTRIES,
  MAX_MEMO_TEXT_CHARS,
  memoisedAuthorityParser,
  normaliseHost,
  normaliseHostUncached,
  parseAuthority,
} from '../../src/net/host.js';
import { createCachingResolver } from '../../src/net/resolver-cache.js';
import { testClock } from '../harness/clock.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { seeded } from '../harness/seeded.js';

function randomString(next: () => number, alphabet: string, maxLength: number): string {
  const length = Math.floor(next() * (maxLength + 1));
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(next() * alphabet.length)];
  return out;
}

const FIXED_HOSTS = ['api.example.test', 'API.Example.TEST.', '127.1', '0x7f.1', '2852039166', '[::1]', '::ffff:10.0.0.5', '[fe80::1%eth0]', 'ẞ.example.com',
  'xn--nxasmq6b.test', 'a..b', '', 'localhost', 'metadata.google.internal', 'a b', '1.2.3.4.5', `${'a'.repeat(64)}.test`, '[1.2.3.4]', 'ex%41mple.test'];
const FIXED_AUTHORITIES = ['api.example.test', 'api.example.test:80', 'api.example.test:443', 'API.example.test.:8080', '[::1]:443', '[::1]', '::1',
  '127.1:80', ':80', 'h:', 'h:0', 'h:65535', 'h:65536', 'h:080', 'u@h:80', 'h:80/x', '[::1]x', 'ẞ.example.com:81', ''];

/** Corpus with repeats: every text comes round several times, so later rounds are served from the memo. */
function corpus(seed: number, fixed: readonly string[], alphabet: string): string[] {
  const next = seeded(seed);
  const texts = [...fixed];
  for (let i = 0; i < 1_500; i++) texts.push(randomString(next, alphabet, 24));
  return [...texts, ...texts, ...texts.slice().reverse()];
}

describe('normaliseHost with a HostCache', () => {
  it('answers every host, again and again, exactly as the uncached path does', () => {
    const cache = createHostCache();
    for (const raw of corpus(41, FIXED_HOSTS, 'aB.-_:[]%01x7fé')) assert.deepEqual(normaliseHost(raw, cache), normaliseHostUncached(raw), JSON.stringify(raw));
  });

  it('stays exact past its bound and for input too long to keep', () => {
    const cache = createHostCache();
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i <= MAX_MEMO_ENTRIES + 10; i++) {
        const raw = `h${i}.Example.test`;
        assert.deepEqual(normaliseHost(raw, cache), normaliseHostUncached(raw));
        assert.ok(cache.size <= MAX_MEMO_ENTRIES);
      }
    }
    const long = `${'a.'.repeat(MAX_MEMO_TEXT_CHARS)}test`;
    assert.deepEqual(normaliseHost(long, cache), normaliseHostUncached(long));
    assert.equal(cache.get(long), undefined);
  });

  it('hands out frozen results, so no caller can change what the next one gets', () => {
    const cache = createHostCache();
    const first = normaliseHost('frozen.example.test', cache);
    assert.ok(Object.isFrozen(normaliseHost('frozen.example.test', cache)));
    assert.equal(normaliseHost('frozen.example.test', cache), first);
  });

  it('keeps only successes, and each cache is its own: without one nothing is kept', () => {
    const a = createHostCache();
    const b = createHostCache();
    normaliseHost('a b', a);
    normaliseHost('kept.example.test', a);
    assert.equal(a.size, 1);
    assert.equal(b.size, 0);
    assert.notEqual(normaliseHost('fresh.example.test'), normaliseHost('fresh.example.test'));
    assert.equal(parseAuthority('via.example.test:443', { hosts: b }).ok, true);
    assert.equal(b.get('via.example.test')?.ok, true);
  });
});

describe('memoised authority parser', () => {
  for (const defaultPort of [80, 443]) {
    it(`answers every authority exactly as parseAuthority with default port ${defaultPort} does`, () => {
      const parse = memoisedAuthorityParser(defaultPort);
      for (const text of corpus(43 + defaultPort, FIXED_AUTHORITIES, 'aB.:[]1089@%/')) {
        assert.deepEqual(parse(text), parseAuthority(text, { defaultPort }), JSON.stringify(text));
      }
    });
  }

  it('keeps one memo per default port: a port-less authority never takes another memo\'s default', () => {
    const http = memoisedAuthorityParser(80);
    const https = memoisedAuthorityParser(443);
    for (let round = 0; round < 2; round++) {
      assert.equal((http('api.example.test') as { port: number }).port, 80);
      assert.equal((https('api.example.test') as { port: number }).port, 443);
    }
  });

  it('stays exact past its bound and for input too long to keep', () => {
    const parse = memoisedAuthorityParser(80);
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i <= MAX_MEMO_ENTRIES + 10; i++) {
        const text = `H${i}.example.test:${1 + (i % 3)}`;
        assert.deepEqual(parse(text), parseAuthority(text, { defaultPort: 80 }));
      }
    }
    const long = `${'a.'.repeat(MAX_MEMO_TEXT_CHARS)}test:81`;
    assert.deepEqual(parse(long), parseAuthority(long, { defaultPort: 80 }));
  });
});

describe('resolver cache families', () => {
  it('keeps A and AAAA answers for one name apart, whichever is asked first', async () => {
    const inner = fakeResolver({ 'dual.example.test': ['127.0.0.1', '::1'] });
    const cache = createCachingResolver(inner, { now: testClock().now });
    const v6 = await cache.resolve('dual.example.test', 6);
    const v4 = await cache.resolve('dual.example.test', 4);
    assert.deepEqual(cache.cached?.('dual.example.test', 6), v6);
    assert.deepEqual(cache.cached?.('dual.example.test', 4), v4);
    assert.notDeepEqual(v4, v6);
  });

  it('holds at most its bound over both families together, dropping the oldest of the family that grows', async () => {
    const inner = fakeResolver({ 'a.example.test': ['127.0.0.1', '::1'], 'b.example.test': ['127.0.0.2', '::2'] });
    const cache = createCachingResolver(inner, { now: testClock().now, maxEntries: 2 });
    const held = () =>
      ['a.example.test', 'b.example.test'].flatMap((name) => ([4, 6] as const).filter((family) => cache.cached?.(name, family) !== undefined).map((f) => `${name}/${f}`));
    await cache.resolve('a.example.test', 4);
    await cache.resolve('b.example.test', 4);
    // No AAAA answer yet: room is made in the other family.
    await cache.resolve('a.example.test', 6);
    assert.deepEqual(held(), ['a.example.test/6', 'b.example.test/4']);
    await cache.resolve('b.example.test', 6);
    assert.deepEqual(held(), ['b.example.test/4', 'b.example.test/6']);
  });
});
