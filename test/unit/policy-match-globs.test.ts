// Pinned matcher tables (docs/policy.md: Path globs through Query matching): rule path globs, the endpoint path
// selector and its specificity, methods, query matchers and value globs, and binary globs.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileBinaryGlob, compileGlob, compilePathSelector, compileValueGlob, globError, pathSelectorsOverlap } from '../../src/policy/glob.js';
import { compileMethod } from '../../src/policy/match.js';
import { compileQueryMatcher, parseQuery, percentDecode } from '../../src/policy/query.js';

describe('rule path globs (docs/policy.md#path-globs, pinned)', () => {
  const table: [string, string, boolean][] = [
    ['/repos/*', '/repos/a', true],
    ['/repos/*', '/repos/a/b', false],
    ['/repos/**', '/repos/a/b/c', true],
    ['/repos/**', '/repos', false],
    ['/repos/**', '/repos/', true],
    ['**', '/', true],
    ['**', '/a/b/c', true],
    ['/**', '/', true],
    ['/**', '/x/y', true],
    ['/v1/*.json', '/v1/x.json', true],
    ['/v1/*.json', '/v1/a/x.json', false],
    ['/file?.txt', '/file1.txt', true],
    ['/file?.txt', '/file/.txt', false],
    ['/**/info/refs*', '/org/app.git/info/refs', true],
    ['/a/**secret**', '/a/x/secret', false],
    ['/a/**secret**', '/a/topsecrets', true],
    ['/v[0-9]/x', '/v2/x', true],
    ['/v[!0]/x', '/v0/x', false],
    ['/v[!0]/x', '/v1/x', true],
    ['/Repos/*', '/repos/a', false],
    ['/api/v1.0/x', '/api/v1x0/x', false],
    ['/a+b/(c)', '/a+b/(c)', true],
  ];
  for (const [pattern, path, expected] of table) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${path}`, () => {
      assert.equal(compileGlob(pattern).matches(path), expected);
    });
  }

  it('reports unusable globs', () => {
    assert.notEqual(globError('/v[0-9/x'), undefined);
    assert.notEqual(globError('/v[z-a]/x'), undefined);
    assert.equal(globError('/v[]]/x'), undefined);
    assert.equal(globError('/**/ok'), undefined);
  });

  it('explains a miss and says nothing on a match', () => {
    const glob = compileGlob('/repos/*');
    assert.equal(glob.explain('/repos/a'), undefined);
    assert.match(glob.explain('/other') ?? '', /does not match/);
  });
});

describe('endpoint path selector (docs/policy.md#endpoint-path-selector)', () => {
  const table: [string | undefined, string, boolean][] = [
    [undefined, '/anything', true],
    ['', '/anything', true],
    ['**', '/a/b', true],
    ['/**', '/', true],
    ['/v1/**', '/v1', true],
    ['/v1/**', '/v1/a/b', true],
    ['/v1/**', '/v10', false],
    ['/api/*', '/api/a/b', true],
    ['/graphql', '/graphql', true],
    ['/graphql', '/graphql/x', false],
  ];
  for (const [pattern, path, expected] of table) {
    it(`${pattern ?? '(none)'} ${expected ? 'selects' : 'does not select'} ${path}`, () => {
      assert.equal(compilePathSelector(pattern).matches(path), expected);
    });
  }

  it('counts specificity as the characters other than *', () => {
    assert.equal(compilePathSelector(undefined).specificity, 0);
    assert.equal(compilePathSelector('/**').specificity, 0);
    assert.equal(compilePathSelector('/v1/**').specificity, 4);
    assert.equal(compilePathSelector('/v1/admin/**').specificity, 10);
    assert.equal(compilePathSelector('/graphql').specificity, 8);
  });

  it('says whether two selectors share a path (the ambiguity check), and each answer agrees with matches()', () => {
    const table: [string | undefined, string | undefined, boolean, string | undefined][] = [
      // a, b, overlap, a path both select (checked with matches()) when they do
      ['/api/*/read', '/api/*/list', false, undefined],
      ['/api/*/x', '/api/v/*', true, '/api/v/x'],
      ['/a*b', '/*c', false, undefined],
      ['/a*', '/*b', true, '/ab'],
      ['/v1/**', '/v1', true, '/v1'],
      ['/v1/**', '/v1/x/*', true, '/v1/x/'],
      ['/v1/**', '/v2/**', false, undefined],
      ['/a?c', '/abc', true, '/abc'],
      ['/a?c', '/ab', false, undefined],
      ['/[ab]x', '/cx', false, undefined],
      ['/[ab]x', '/bx', true, '/bx'],
      ['/[ab]x', '/[cd]x', true, undefined],
      [undefined, '/x', true, '/x'],
      ['/**', '/x', true, '/x'],
    ];
    for (const [a, b, overlap, shared] of table) {
      assert.equal(pathSelectorsOverlap(a, b), overlap, `${a} / ${b}`);
      assert.equal(pathSelectorsOverlap(b, a), overlap, `${b} / ${a}`);
      if (shared !== undefined) assert.ok(compilePathSelector(a).matches(shared) && compilePathSelector(b).matches(shared), `${shared} is selected by both`);
    }
  });
});

describe('methods (docs/policy.md#method-matching, pinned)', () => {
  const table: [string, string, boolean][] = [
    ['GET', 'GET', true],
    ['GET', 'HEAD', true],
    ['GET', 'OPTIONS', false],
    ['get', 'GET', true],
    ['GET', 'get', true],
    ['*', 'DELETE', true],
    ['*', 'WEBSOCKET_TEXT', true],
    ['HEAD', 'GET', false],
    ['WEBSOCKET_TEXT', 'WEBSOCKET_TEXT', true],
    ['POST', 'PUT', false],
  ];
  for (const [rule, request, expected] of table) {
    it(`rule ${rule} ${expected ? 'matches' : 'does not match'} ${request}`, () => {
      assert.equal(compileMethod(rule).matches(request), expected);
      assert.equal(compileMethod(rule).explain(request) === undefined, expected);
    });
  }
});

describe('query matchers (docs/policy.md#query-matching, pinned)', () => {
  it('parses repeated keys in order and decodes %XX only', () => {
    const params = parseQuery('tag=a&tag=b%2Bc&q=x+y&flag&=v&&k%20ey=%E2%9C%93');
    assert.deepEqual(params.get('tag'), ['a', 'b+c']);
    assert.deepEqual(params.get('q'), ['x+y']);
    assert.deepEqual(params.get('flag'), ['']);
    assert.deepEqual(params.get('k ey'), ['✓']);
    assert.equal(percentDecode('%zz%4'), '%zz%4');
  });

  it('uses . as the value-glob separator and lets ** match anything', () => {
    assert.equal(compileValueGlob('v1.*').matches('v1.2'), true);
    assert.equal(compileValueGlob('v1.*').matches('v1.2.3'), false);
    assert.equal(compileValueGlob('**').matches('a.b/c'), true);
    assert.equal(compileValueGlob('git-*').matches('git-upload-pack'), true);
  });

  const spec = new Map([['tag', ['v1.*', 'stable']]]);
  const allow = compileQueryMatcher(spec, 'allow');
  const deny = compileQueryMatcher(spec, 'deny');
  const table: [string, boolean, boolean][] = [
    ['tag=v1.2', true, true],
    ['other=1', false, false],
    ['', false, false],
    ['tag=v1.2&tag=stable', true, true],
    ['tag=v1.2&tag=bad', false, true],
    ['tag=bad', false, false],
    ['tag=v1%2E2', true, true],
    ['tag=v1.2.3', false, false],
  ];
  for (const [query, allowed, denied] of table) {
    it(`query ${JSON.stringify(query)}: allow ${allowed ? 'matches' : 'misses'}, deny ${denied ? 'fires' : 'does not fire'}`, () => {
      const params = parseQuery(query);
      assert.equal(allow.matches(params), allowed);
      assert.equal(deny.matches(params), denied);
    });
  }

  it('needs every named key to pass', () => {
    const two = compileQueryMatcher(new Map([['a', ['1']], ['b', ['2']]]), 'allow');
    assert.equal(two.matches(parseQuery('a=1&b=2&c=3')), true);
    assert.equal(two.matches(parseQuery('a=1')), false);
    assert.match(two.explain(parseQuery('a=1')) ?? '', /b is absent/);
    const twoDeny = compileQueryMatcher(new Map([['a', ['1']], ['b', ['2']]]), 'deny');
    assert.equal(twoDeny.matches(parseQuery('a=1')), false);
    assert.equal(twoDeny.matches(parseQuery('a=1&b=2')), true);
  });

  it('matches every query when the rule names no keys', () => {
    assert.equal(compileQueryMatcher(new Map(), 'allow').matches(parseQuery('x=1')), true);
    assert.equal(compileQueryMatcher(new Map(), 'deny').matches(parseQuery('')), true);
  });
});

describe('binary globs', () => {
  const table: [string, string, boolean][] = [
    ['/usr/bin/node', '/usr/bin/node', true],
    ['/usr/bin/node', '/usr/bin/nodejs', false],
    ['/usr/bin/*', '/usr/bin/curl', true],
    ['/usr/bin/*', '/usr/bin/x/curl', false],
    ['/**', '/usr/local/bin/anything', true],
    ['/sandbox/.vscode-server/**', '/sandbox/.vscode-server/bin/abc/node', true],
    ['/usr/lib/jvm/*/bin/java', '/usr/lib/jvm/java-21/bin/java', true],
    ['/sandbox/.uv/python/*/bin/python3*', '/sandbox/.uv/python/3.12/bin/python3.12', true],
    // Identity sources report canonical paths; a dot segment would otherwise climb out of the glob's directory.
    ['/usr/bin/**', '/usr/bin/../../tmp/evil', false],
    ['/usr/bin/*', '/usr/bin/./curl', false],
    ['/**', '/tmp/../usr/bin/node', false],
    ['/usr/bin/**', 'usr/bin/node', false],
  ];
  for (const [pattern, path, expected] of table) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${path}`, () => {
      assert.equal(compileBinaryGlob(pattern).matches(path), expected);
    });
  }
});
