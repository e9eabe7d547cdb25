// readRequestHead's one-pass field-name check against the two checks it replaced (an upper-case letter anywhere first,
// then a lower-case token), on random names, and the regular fields it keeps, host first, for heads of every length.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isLowerToken, readRequestHead } from '../../src/http2/request-head.js';

let seed = 33;
function random(n: number): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return Math.floor((seed / 2147483648) * n);
}
const CHARS = ['a', 'z', 'A', 'Z', '-', '0', '!', '~', ' ', ':', '\u0000', '\u007f', '\u00e9', '\u0101', '"', '{', 'x', 'x', 'x'];
const BASE = [':method', 'GET', ':scheme', 'https', ':path', '/', ':authority', 'a.test'];

describe('readRequestHead field names in one pass', () => {
  it('refuses each random name as the two checks did, upper case first', () => {
    for (let n = 0; n < 20_000; n++) {
      let name = 'x';
      for (let k = random(6); k > 0; k--) name += CHARS[random(CHARS.length)];
      if (random(10) === 0) name = name.slice(1);
      // A leading colon makes it a pseudo-header, checked apart.
      if (name.startsWith(':')) continue;
      const read = readRequestHead([...BASE, name, 'v'], 'https');
      const expected = /[A-Z]/.test(name) ? 'uppercase-header-name' : !isLowerToken(name) ? 'bad-field-name' : undefined;
      if (expected !== undefined) assert.deepEqual(read, { ok: false, problem: expected }, JSON.stringify(name));
      else assert.ok(read.ok || (read.problem !== 'uppercase-header-name' && read.problem !== 'bad-field-name'), JSON.stringify(name));
    }
  });

  it('keeps the regular fields in order after host, for any number of pseudo-headers and fields', () => {
    for (let fields = 0; fields < 12; fields++) {
      for (const pseudo of [BASE, BASE.slice(0, 6)]) {
        const regular: string[] = [];
        for (let i = 0; i < fields; i++) regular.push(`x-${i}`, `v${i}`);
        const read = readRequestHead([...pseudo, ...regular], 'https');
        assert.ok(read.ok);
        assert.deepEqual(read.head.rawHeaders, pseudo.length === 8 ? ['host', 'a.test', ...regular] : regular);
      }
    }
  });
});
