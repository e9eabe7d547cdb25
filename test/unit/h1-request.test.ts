import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isDigits, isToken, TCHAR, tokenEqualsLower } from '../../src/http1/grammar.js';
import { serialise } from '../../src/http1/h1-request.js';

// The RegExps the table and char loops replaced: the reference the validators are compared with.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const BAD_TARGET = /[^\x21-\x7e\x80-\xff]/;

/** Every byte value, then chars a latin1 head can never hold but a caller's string can. */
const CODES = [...Array.from({ length: 256 }, (_, c) => c), 0x100, 0x17f, 0x2028, 0xfeff, 0xd800, 0xffff];

function serialiseError(req: Partial<Parameters<typeof serialise>[0]>): string | undefined {
  try {
    serialise({ method: 'GET', target: '/', headers: ['host', 'o'], body: null, ...req });
    return undefined;
  } catch (err) {
    return (err as Error & { code: string }).code;
  }
}

describe('h1-request validators against the RegExps they replaced', () => {
  it('isToken and TCHAR agree with the token RegExp on every byte, alone and inside a name', () => {
    for (const c of CODES) {
      const ch = String.fromCharCode(c);
      assert.equal(isToken(ch), TOKEN.test(ch), `char 0x${c.toString(16)}`);
      assert.equal(isToken(`X-${ch}-y`), TOKEN.test(`X-${ch}-y`), `char 0x${c.toString(16)} inside`);
      if (c < 256) assert.equal(TCHAR[c] === 1, TOKEN.test(ch), `TCHAR[0x${c.toString(16)}]`);
    }
    assert.equal(isToken(''), false);
  });

  it('tokenEqualsLower agrees with toLowerCase() === on every byte at every position of the framing names', () => {
    for (const lower of ['content-length', 'transfer-encoding', 'connection', 'chunked', 'close']) {
      for (let at = 0; at < lower.length; at++) {
        for (const c of CODES) {
          const s = lower.slice(0, at) + String.fromCharCode(c) + lower.slice(at + 1);
          // The contract: tokens and valid field values only (the callers check those first).
          if (BAD_VALUE.test(s)) continue;
          assert.equal(tokenEqualsLower(s, lower), s.toLowerCase() === lower, JSON.stringify(s));
          assert.equal(tokenEqualsLower(s.toUpperCase(), lower), s.toUpperCase().toLowerCase() === lower, JSON.stringify(s));
        }
      }
      assert.equal(tokenEqualsLower(`${lower}x`, lower), false);
      assert.equal(tokenEqualsLower(lower.slice(1), lower), false);
    }
  });

  it('isDigits agrees with the bounded digits RegExp', () => {
    const digits = /^[0-9]{1,15}$/;
    for (const c of CODES) {
      const ch = String.fromCharCode(c);
      for (const s of [ch, `1${ch}`, `${ch}9`]) assert.equal(isDigits(s, 15), digits.test(s), JSON.stringify(s));
    }
    for (const s of ['', '0', '123456789012345', '1234567890123456', '+1', '1 ', ' 1']) assert.equal(isDigits(s, 15), digits.test(s), s);
  });

  it('serialise accepts and refuses methods, targets, names and values exactly as the RegExps did', () => {
    for (const c of CODES) {
      const ch = String.fromCharCode(c);
      const hex = `0x${c.toString(16)}`;
      const expect = (ok: boolean): string | undefined => (ok ? undefined : 'UPSTREAM_REQUEST_INVALID');
      assert.equal(serialiseError({ method: `GE${ch}T` }), expect(TOKEN.test(`GE${ch}T`)), `method ${hex}`);
      assert.equal(serialiseError({ target: `/a${ch}b` }), expect(!BAD_TARGET.test(`/a${ch}b`)), `target ${hex}`);
      assert.equal(serialiseError({ headers: ['host', 'o', `x-${ch}`, 'v'] }), expect(TOKEN.test(`x-${ch}`)), `name ${hex}`);
      assert.equal(serialiseError({ headers: ['host', 'o', 'x', `v${ch}w`] }), expect(!BAD_VALUE.test(`v${ch}w`)), `value ${hex}`);
    }
    assert.equal(serialiseError({ target: '' }), 'UPSTREAM_REQUEST_INVALID');
  });

  it('finds Content-Length and Transfer-Encoding in any case', () => {
    assert.equal(serialiseError({ headers: ['host', 'o', 'TRANSFER-encoding', 'chunked'] }), 'UPSTREAM_REQUEST_INVALID');
    assert.equal(serialiseError({ headers: ['host', 'o', 'Content-Length', '1', 'CONTENT-LENGTH', '1'] }), 'UPSTREAM_REQUEST_INVALID');
    assert.equal(serialiseError({ headers: ['host', 'o', 'Content-Lengthy', '1'] }), undefined);
    assert.deepEqual(serialise({ method: 'PUT', target: '/', headers: ['Content-LENGTH', '2'], body: Buffer.from('ok') }), {
      head: 'PUT / HTTP/1.1\r\nContent-LENGTH: 2\r\n\r\n',
      length: 2,
    });
    assert.deepEqual(serialise({ method: 'GET', target: '/x', headers: ['host', 'o', 'via', '1.1 boundary'], body: null }), {
      head: 'GET /x HTTP/1.1\r\nhost: o\r\nvia: 1.1 boundary\r\n\r\n',
      length: 0,
    });
  });
});
