// src/json/strict-json.ts: JSON.parse's value, or a refusal when an object repeats a key (issue 28, finding 7).
// The key comparison is JSON.parse's own (escapes decoded), the nesting depth is bounded by the text only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readJson } from '../../src/json/strict-json.js';

const refusal = (text: string): string => {
  const read = readJson(text);
  assert.equal(read.kind, 'duplicate-key', text);
  return read.kind === 'duplicate-key' ? read.refusal.problem : '';
};

describe('readJson', () => {
  const valid: [string, string][] = [
    ['an empty object', '{}'],
    ['a scalar and a string with a colon', '"a:b"'],
    ['keys equal in another case', '{"name":1,"Name":2}'],
    ['the same key in sibling objects', '{"a":{"k":1},"b":{"k":2}}'],
    ['the same key at another depth', '{"k":{"k":{"k":1}}}'],
    ['colons, quotes and backslashes inside strings', '{"a":"x:\\"y\\":z\\\\","b:c":"\\\\"}'],
    ['a string ending in an escaped backslash before a colon key', '{"a":"\\\\","b":1}'],
    ['arrays of objects with the same keys', '[{"id":1},{"id":2},[{"id":3}]]'],
    ['__proto__ once, as JSON.parse keeps it', '{"__proto__":{"a":1},"b":2}'],
    ['whitespace around every token', ' { "a" :\t1 ,\n"b"\r: [ 1 , { "c" : 2 } ] } '],
    ['integer-like keys (reordered by JSON.parse)', '{"b":{"x":1},"2":{"x":2},"1":[{"x":3}]}'],
  ];
  for (const [name, text] of valid) {
    it(`reads ${name} as JSON.parse does`, () => {
      assert.deepEqual(readJson(text), { kind: 'value', value: JSON.parse(text) });
    });
  }

  const duplicates: [string, string, RegExp][] = [
    ['at the top level', '{"a":1,"a":2}', /key "a" .* at \$$/],
    ['with the same value', '{"a":1,"a":1}', /key "a"/],
    ['written with a \\u escape', '{"name":"x","\\u006eame":"y"}', /key "name"/],
    ['written with a surrogate pair and its character', '{"\\ud83d\\ude00":1,"\u{1F600}":2}', /key "\?\?"|key "\?"/],
    ['nested in arrays and objects', '{"x":[{"b":{}},{"c":1,"c":{"d":1}}]}', /key "c" .* at \$\.x\[1\]$/],
    ['in a batch item', '[{"id":1},{"id":2,"id":3}]', /key "id" .* at \$\[1\]$/],
    ['whose first value held a whole object', '{"p":{"q":{"r":1}},"p":2}', /key "p"/],
    ['__proto__ twice', '{"__proto__":1,"__proto__":2}', /key "__proto__"/],
    ['under a key that is not an identifier', '{"a b":{"k":1,"k":2}}', /at \$\["a b"\]$/],
  ];
  for (const [name, text, problem] of duplicates) {
    it(`refuses a repeated key ${name}`, () => {
      assert.match(refusal(text), problem);
    });
  }

  it('shows a key a client chose bounded and printable', () => {
    const long = 'k'.repeat(500);
    const problem = refusal(`{"${long}\\n":1,"${long}\\n":2}`);
    assert.ok(problem.length < 300, problem);
    assert.doesNotMatch(problem, /[\n\r]/);
  });

  it('says not-json for what JSON.parse refuses, and never throws', () => {
    for (const text of ['', '{', '{"a":1,}', "{'a':1}", '{"a":1}x', 'NaN', '{"a":"\u0001"}']) assert.deepEqual(readJson(text), { kind: 'not-json' }, text);
  });

  it('has no nesting limit of its own: 100 000 levels read, and a repeated key at the bottom is found', () => {
    const depth = 100_000;
    const deep = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    assert.equal(readJson(deep).kind, 'value');
    const arrays = `${'['.repeat(depth)}{"k":1,"k":2}${']'.repeat(depth)}`;
    assert.equal(readJson(arrays).kind, 'duplicate-key');
  });

  it('reads a body of several MiB, and finds one repeated key among its objects', () => {
    const items = Array.from({ length: 40_000 }, (_, i) => ({ id: i, path: `src/file-${i}.ts`, text: `line "${i}" \\ é`, tags: ['a', 'b'] }));
    const text = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'write', arguments: { items } } });
    assert.ok(text.length > 3_000_000);
    assert.equal(readJson(text).kind, 'value');
    const repeated = text.replace('"id":39999,', '"id":39999,"id":0,');
    assert.match(refusal(repeated), /key "id" .* at \$\.params\.arguments\.items\[39999\]$/);
  });
});
