// Issue 31: the reverse canary's matcher (credentials/canary.ts) finds a real value in every form the echo redaction
// knows and behind any percent-encoding up to three rounds, names keys and never a value, and skips short values.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCanaryMatcher, createCanaryStream } from '../../src/credentials/canary.js';
import { createCredentialSet } from '../../src/credentials/set.js';

const VALUE = 'Rv+9f8e7d6c5b4a/k~é';
const matcher = (env: Record<string, string>, more: Record<string, string> = {}) =>
  createCanaryMatcher(
    createCredentialSet({
      providers: [
        { name: 'a', env, endpoints: [{ host: 'a.example.test', port: 443 }] },
        { name: 'b', env: more, endpoints: [{ host: 'b.example.test', port: 443 }] },
      ],
      revision: 3,
    }),
  );
const keysIn = (m: ReturnType<typeof matcher>, text: string): string[] => m.find(Buffer.from(text, 'utf8')).map((h) => h.keys.join(','));
const everyChar = (text: string): string => [...Buffer.from(text, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

describe('reverse canary matcher', () => {
  const m = matcher({ TOKEN: VALUE });

  for (const [form, text] of [
    ['raw', `x ${VALUE} y`],
    ['encodeURIComponent', `q=${encodeURIComponent(VALUE)}&r=1`],
    ['lower-case percent hex', `q=${encodeURIComponent(VALUE).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase())}`],
    ['every byte percent-encoded', `q=${everyChar(VALUE)}`],
    ['percent-encoded twice', `q=${encodeURIComponent(encodeURIComponent(VALUE))}`],
    ['percent-encoded three times', `q=${encodeURIComponent(encodeURIComponent(encodeURIComponent(VALUE)))}`],
    ['JSON-escaped', JSON.stringify({ v: VALUE.replace('/', '\\/') }).replace('\\\\/', '\\/')],
    ['JSON ASCII-only', `{"v":"${VALUE.replace('é', '\\u00e9')}"}`],
    ['base64', Buffer.from(VALUE).toString('base64')],
    ['base64url', Buffer.from(VALUE).toString('base64url')],
    ['base64 one byte in', Buffer.from(`a${VALUE}`).toString('base64')],
    ['base64 two bytes in', Buffer.from(`ab${VALUE}b`).toString('base64')],
    ['Basic user:value', `authorization: Basic ${Buffer.from(`agent:${VALUE}`).toString('base64')}`],
  ] as const) {
    it(`finds the value ${form}`, () => assert.deepEqual(keysIn(m, text), ['TOKEN']));
  }

  it('finds nothing in ordinary text, or in a value cut short', () => {
    assert.deepEqual(keysIn(m, 'lorem ipsum %41%42 dolor'), []);
    assert.deepEqual(keysIn(m, VALUE.slice(0, -1)), []);
  });

  it('names every key that holds the value, once per value', () => {
    const shared = matcher({ TOKEN: VALUE, OTHER: 'another-value-12345' }, { ALIAS: VALUE });
    assert.deepEqual(keysIn(shared, `${VALUE} ${VALUE} another-value-12345`), ['ALIAS,TOKEN', 'OTHER']);
  });

  it('finds the same forms through the first-bytes index, which many values switch to', () => {
    const env = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`KEY_${i}`, `${String.fromCharCode(65 + i)}${i}-secret-${'x'.repeat(i)}+${i * 7919}/z`]));
    const many = matcher({ ...env, TOKEN: VALUE });
    for (const text of [VALUE, encodeURIComponent(VALUE), everyChar(VALUE), Buffer.from(`ab${VALUE}`).toString('base64')]) {
      assert.deepEqual(keysIn(many, `pre ${text} post`), ['TOKEN'], text);
    }
    assert.deepEqual(keysIn(many, `${env.KEY_3} and ${Buffer.from(env.KEY_11 ?? '').toString('base64url')}`), ['KEY_3', 'KEY_11']);
    assert.deepEqual(keysIn(many, 'lorem ipsum B1-secret-x'), []);
  });

  it('a stream finds a value split across reads and releases none of its bytes before it is found', () => {
    const m = matcher({ TOKEN: VALUE });
    const stream = createCanaryStream(m);
    const text = Buffer.from(`${'x'.repeat(300)}${encodeURIComponent(VALUE)}${'y'.repeat(300)}`);
    const cut = 300 + 9;
    const released: Buffer[] = [];
    assert.deepEqual(stream.feed(text.subarray(0, cut)), []);
    released.push(stream.release());
    const hits = stream.feed(text.subarray(cut));
    assert.deepEqual(hits.map((h) => h.keys.join(',')), ['TOKEN']);
    assert.ok(!Buffer.concat(released).toString().includes(encodeURIComponent(VALUE).slice(0, 9)));
  });

  it('a stream releases a clean body whole, in order', () => {
    const stream = createCanaryStream(matcher({ TOKEN: VALUE }));
    const body = Buffer.from('abcdefghij'.repeat(500));
    const out: Buffer[] = [];
    for (let at = 0; at < body.length; at += 333) {
      assert.deepEqual(stream.feed(body.subarray(at, at + 333)), []);
      out.push(stream.release());
    }
    out.push(stream.flush());
    assert.deepEqual(Buffer.concat(out), body);
  });

  it('does not watch values shorter than MIN_CANARY_VALUE_CHARS', () => {
    const short = matcher({ PIN: '1234567' });
    assert.equal(short.empty, true);
    assert.deepEqual(keysIn(short, 'pin 1234567'), []);
  });

  it('carries its revision and never renders a value', () => {
    assert.equal(m.revision, 3);
    assert.ok(!JSON.stringify(m.find(Buffer.from(VALUE))).includes(VALUE));
  });
});
