// The streaming body redactor (src/credentials/body-redact.ts): every form of a secret masked length for length,
// wherever the chunks split it; only a tail that could begin a form is held back; base64 at any alignment.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { base64Cores, createBodyRedactor, MIN_BASE64_CORE_CHARS } from '../../src/credentials/body-redact.js';
import { secretForms } from '../../src/credentials/redact.js';

const SECRET = 'sk-live/Ünïcode+4242"quote';

/** Feeds `text` in the given pieces; returns what was released after each push, and the whole output. */
function run(pieces: readonly string[], values: readonly string[] = [SECRET]): { out: string; released: string[]; redactions: number } {
  const redactor = createBodyRedactor(values);
  const released = pieces.map((piece) => redactor.push(Buffer.from(piece, 'utf8')));
  const out = Buffer.concat([...released, redactor.end()]);
  return { out: out.toString('utf8'), released: released.map((b) => b.toString('utf8')), redactions: redactor.redactions };
}

function echoes(): string[] {
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  return [
    `raw ${SECRET} end`,
    `query ?t=${encodeURIComponent(SECRET)}&x=1`,
    `json {"t":${JSON.stringify(SECRET)}}`,
    `python json {"t": "${JSON.stringify(SECRET).slice(1, -1).replace(/[^\u0020-\u007e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"}`,
    `basic Authorization: Basic ${b64(`alice:${SECRET}`)}`,
    `basic2 ${b64(`bo:${SECRET}`)}`,
    `basic3 ${b64(`b:${SECRET}x`)}`,
    `base64url ${Buffer.from(SECRET).toString('base64url')}`,
  ];
}

describe('createBodyRedactor', () => {
  for (const text of echoes()) {
    it(`masks ${text.split(' ')[0]} forms, keeping the byte length, at every split point`, () => {
      const whole = Buffer.byteLength(text);
      const results = new Set<string>();
      for (let at = 0; at <= text.length; at++) {
        const { out, redactions } = run([text.slice(0, at), text.slice(at)]);
        assert.equal(Buffer.byteLength(out), whole, `split at ${at}`);
        assert.ok(redactions > 0, `split at ${at}: ${out}`);
        assert.ok(!out.includes(SECRET), out);
        results.add(out);
      }
      assert.equal(results.size, 1, 'the same output however the body is split');
    });
  }

  it('masks with [redacted] padded by * to the form length, or * alone for a shorter form', () => {
    assert.equal(run([`a ${SECRET} b`]).out, `a [redacted]${'*'.repeat(Buffer.byteLength(SECRET) - 10)} b`);
    assert.equal(run(['x-abc-y'], ['abc']).out, 'x-***-y');
  });

  it('holds back only a tail that could begin a form, so an event stream is released event by event', () => {
    const { released } = run(['data: one\n\n', `data: ${SECRET.slice(0, 5)}`, `${SECRET.slice(5)}\n\n`]);
    assert.equal(released[0], 'data: one\n\n');
    assert.equal(released[1], 'data: ');
    assert.ok(released[2]?.startsWith('[redacted]'));
  });

  it('passes a body without secrets through as the same bytes, and every byte when given no value', () => {
    const chunk = Buffer.from('nothing to see here\n');
    const redactor = createBodyRedactor([SECRET]);
    assert.equal(redactor.push(chunk), chunk, 'no copy when nothing matched');
    assert.equal(run(['abc'], []).out, 'abc');
  });

  it('never writes into the buffer it was given', () => {
    const chunk = Buffer.from(`x ${SECRET} y`);
    const copy = Buffer.from(chunk);
    createBodyRedactor([SECRET]).push(chunk);
    assert.deepEqual(chunk, copy);
  });
});

describe('secretForms and base64Cores', () => {
  it('lists percent forms in both hex cases, JSON forms and whole base64 forms', () => {
    const forms = secretForms('a/b é');
    for (const form of ['a/b é', 'a%2Fb%20%C3%A9', 'a%2fb%20%c3%a9', 'a%2Fb+%C3%A9', 'a\\/b é', 'a/b \\u00e9', 'a/b \\u00E9', Buffer.from('a/b é').toString('base64')]) {
      assert.ok(forms.includes(form), form);
    }
  });

  it('finds the value inside base64 whatever precedes it, and skips runs too short to mean anything', () => {
    const cores = base64Cores(SECRET);
    for (const prefix of ['', 'u:', 'us:', 'user:']) {
      const text = Buffer.from(`${prefix}${SECRET}tail`).toString('base64');
      assert.ok(cores.some((core) => text.includes(core)), prefix);
    }
    assert.ok(cores.every((core) => core.length >= MIN_BASE64_CORE_CHARS));
    assert.deepEqual(base64Cores('abc'), []);
  });
});
