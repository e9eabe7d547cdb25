// h2RequestFields told which fields the client's head already passed (request-head.ts) against the function as it was,
// checking every field: the same list out, or the same refusal (code and message), on random heads rewritten on their
// way up (fields dropped, values swapped for ones with forbidden characters, names re-cased, fields added).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { h2RequestFields } from '../../src/http2/headers.js';
import { BAD_TARGET } from '../../src/http1/grammar.js';
import { checkField, checkMethodAndTarget, invalid } from '../../src/http1/h1-request.js';
import { CONNECTION_SPECIFIC_HEADERS } from '../../src/http2/request-head.js';
import { readRequestHead } from '../../src/http2/request-head.js';
import { BoundaryError } from '../../src/shared/errors.js';

let seed = 20261205;
function random(n: number): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return Math.floor((seed / 2147483648) * n);
}
const pick = <T>(list: readonly T[]): T => list[random(list.length)] as T;

const NAMES = ['accept', 'user-agent', 'cookie', 'authorization', 'x-a', 'x-b', 'host', 'te', 'via', 'content-type', 'connection', 'x y', 'X-Up', 'x\u0101'];
const VALUES = ['a', '', 'gzip, deflate', 'Bearer token', 'trailers', ' lead', 'trail ', 'a\r\nb', 'nul\0', 'wide\u010a', 'tab\tin', '\u00e9t\u00e9', 'x'.repeat(40)];

const DROP: readonly string[] = [...CONNECTION_SPECIFIC_HEADERS, 'te', 'trailer'];

/** h2RequestFields as it was: every field checked, the list built by pushing. */
function reference(flat: readonly string[], pseudo: { readonly method: string; readonly path: string; readonly scheme: string; readonly teTrailers: boolean }): string[] {
  checkMethodAndTarget(pseudo.method, pseudo.path);
  const out: string[] = [':method', pseudo.method, ':scheme', pseudo.scheme, ':authority', '', ':path', pseudo.path];
  let authority = false;
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] ?? '').toLowerCase();
    const value = flat[i + 1] ?? '';
    checkField('request header', i / 2, name, value);
    if (name === 'host') {
      if (BAD_TARGET.test(value)) throw invalid('request authority has a space or control character');
      if (!authority) out[5] = value;
      authority = true;
    } else if (!DROP.includes(name)) out.push(name, value);
  }
  if (!authority) out.splice(4, 2);
  if (pseudo.teTrailers) out.push('te', 'trailers');
  return out;
}

/** The outcome as comparable data: the list, or the refusal's code and message. */
function outcome(run: () => string[]): unknown {
  try {
    return { list: run() };
  } catch (err) {
    assert.ok(err instanceof BoundaryError);
    return { code: err.code, message: err.message };
  }
}

/** A client's head (pseudo-headers then regular fields), as sent. */
function clientHead(): string[] {
  const raw = [':method', 'GET', ':scheme', 'https', ':path', '/p', ':authority', 'api.example.test'];
  for (let i = random(8); i > 0; i--) raw.push(pick(NAMES), pick(VALUES));
  return raw;
}

/** The head's fields on their way up: some dropped, some values or names changed, a host first, some added. */
function rewritten(fields: readonly string[]): string[] {
  const out = ['host', random(4) === 0 ? 'a b' : 'api.example.test'];
  for (let i = 0; i < fields.length; i += 2) {
    const r = random(10);
    if (r === 0) continue;
    if (r === 1) out.push(fields[i] as string, pick(VALUES));
    else if (r === 2) out.push((fields[i] as string).toUpperCase(), fields[i + 1] as string);
    else if (r === 3) out.push(fields[i] as string, `${fields[i + 1] as string}`.slice(0));
    else out.push(fields[i] as string, fields[i + 1] as string);
    if (random(8) === 0) out.push(pick(NAMES), pick(VALUES));
  }
  if (random(2) === 0) out.push('via', '2 boundary');
  return out;
}

describe('h2RequestFields with the fields the client head passed', () => {
  it('gives the same list or the same refusal as checking every field, on 100,000 random heads', () => {
    let compared = 0;
    let skipped = 0;
    for (let n = 0; n < 100_000; n++) {
      const read = readRequestHead(clientHead(), 'https');
      if (!read.ok) continue;
      const checked = read.head.rawHeaders;
      const up = rewritten(checked);
      const pseudo = { method: random(20) === 0 ? 'GE T' : 'GET', path: '/p', scheme: 'https', teTrailers: random(2) === 0 };
      assert.deepEqual(
        outcome(() => h2RequestFields(up, pseudo, checked)),
        outcome(() => reference(up, pseudo)),
        JSON.stringify({ up, checked }),
      );
      compared++;
      if (checked.length > 2) skipped++;
      // Without the checked fields, too.
      assert.deepEqual(outcome(() => h2RequestFields(up, pseudo)), outcome(() => reference(up, pseudo)));
    }
    // Enough heads passed the client's checks, most with fields beside host, for the comparison to mean something.
    assert.ok(compared > 15_000 && skipped > 6_000, `${compared} compared, ${skipped} with regular fields`);
  });

  it('still refuses a changed value with a forbidden character, and a field nobody checked', () => {
    const checked = ['host', 'api.example.test', 'authorization', 'Bearer placeholder'];
    const pseudo = { method: 'GET', path: '/', scheme: 'https', teTrailers: false };
    const refused = (up: string[]): void => assert.throws(() => h2RequestFields(up, pseudo, checked), (err: BoundaryError) => err.code === 'UPSTREAM_REQUEST_INVALID');
    refused(['host', 'api.example.test', 'authorization', 'Bearer secret\r\nx: 1']);
    refused(['host', 'api.example.test', 'authorization', 'Bearer placeholder', 'x-new', 'a\0']);
    refused(['host', 'a b', 'authorization', 'Bearer placeholder']);
    assert.deepEqual(h2RequestFields(['host', 'api.example.test', 'authorization', 'Bearer placeholder'], pseudo, checked), [
      ':method', 'GET', ':scheme', 'https', ':authority', 'api.example.test', ':path', '/', 'authorization', 'Bearer placeholder',
    ]);
  });
});
