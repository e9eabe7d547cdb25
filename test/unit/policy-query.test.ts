// Query readings (docs/policy.md#query-matching, issue 15): `;` as a separator, bracketed keys, key case and `+` as a
// space. A deny fires on any reading a common origin makes of the bytes; an allow needs every reading to pass.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileQueryMatcher, parseQuery } from '../../src/policy/query.js';

const denyDebug = compileQueryMatcher(new Map([['debug', ['1', 'true']]]), 'deny');
const allowFormat = compileQueryMatcher(new Map([['format', ['csv', 'json']]]), 'allow');
const denyQ = compileQueryMatcher(new Map([['q', ['drop table*']]]), 'deny');

describe('parseQuery readings (issue 15)', () => {
  it('keeps the strict reading as before: & only, %XX only, keys exact', () => {
    const params = parseQuery('a=1;b=2&K=x+y&ids[]=3');
    assert.deepEqual(params.get('a'), ['1;b=2']);
    assert.equal(params.get('b'), undefined);
    assert.deepEqual(params.get('K'), ['x+y']);
    assert.equal(params.get('k'), undefined);
    assert.deepEqual(params.get('ids[]'), ['3']);
  });
  it('lists a bracketed key under its base name, as PHP, Rails and qs do', () => {
    const params = parseQuery('ids[]=1&ids[]=2&user[name]=x&[odd]=y');
    assert.deepEqual(params.get('ids'), ['1', '2']);
    assert.deepEqual(params.get('user'), ['x']);
    assert.equal(params.get(''), undefined);
  });
  it('reads ; as a separator, + as a space and keys in any case', () => {
    const readings = parseQuery('a=1;B=2&c=x+y&c=%2B').readings();
    assert.deepEqual(readings.get('a'), ['1;B=2', '1']);
    assert.deepEqual(readings.get('b'), ['2']);
    assert.deepEqual(readings.get('c'), ['x+y', 'x y', '+']);
  });
});

describe('query matchers against origins that read the query differently (issue 15)', () => {
  // [query, deny on debug fires]
  const denies: readonly (readonly [string, boolean])[] = [
    ['debug=1', true],
    ['DEBUG=1', true],
    ['Debug=true', true],
    ['debug[]=1', true],
    ['debug[x]=1', true],
    ['x=0;debug=1', true],
    ['x=0;DEBUG[]=1', true],
    ['%2564ebug=1', true],
    ['debug=%2531', true],
    ['debug=0', false],
    ['debugger=1', false],
    ['x=debug=1', false],
  ];
  for (const [query, fires] of denies) {
    it(`a deny on debug ${fires ? 'fires on' : 'does not fire on'} ${query}`, () => {
      assert.equal(denyDebug.matches(parseQuery(query)), fires);
    });
  }
  it('a deny on a value with a space fires when the space is sent as +', () => {
    assert.equal(denyQ.matches(parseQuery('q=drop+table+users')), true);
    assert.equal(denyQ.matches(parseQuery('q=drop%20table')), true);
    assert.equal(denyQ.matches(parseQuery('q=drop%2Btable')), false);
  });
  // [query, allow on format matches]
  const allows: readonly (readonly [string, boolean])[] = [
    ['format=csv', true],
    ['format=csv&format=json', true],
    ['format=csv&other=1;x=2', true],
    ['format=csv&FORMAT=exe', false],
    ['format=csv;format=exe', false],
    ['format=csv&format[]=exe', false],
    ['FORMAT=csv', false],
    ['format[]=csv', true],
    ['other=1;format=csv', false],
  ];
  for (const [query, matches] of allows) {
    it(`an allow on format ${matches ? 'matches' : 'misses'} ${query}`, () => {
      assert.equal(allowFormat.matches(parseQuery(query)), matches);
    });
  }
  it('explains a deny miss and an allow miss by key', () => {
    assert.match(denyDebug.explain(parseQuery('other=1')) ?? '', /debug is absent/);
    assert.match(allowFormat.explain(parseQuery('format=csv&Format=exe')) ?? '', /a value of query key format does not match/);
  });
  it('computes the readings once per parsed query', () => {
    const params = parseQuery('a=1');
    assert.equal(params.readings(), params.readings());
  });
});
