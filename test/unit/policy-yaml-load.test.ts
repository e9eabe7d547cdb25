// The policy's YAML reader (src/policy/yaml-load.ts over js-yaml's events): what a document means, where each
// node is, and the shapes a hostile file uses — aliases that expand, keys that collide once read as names,
// several documents in one file, tags outside the core schema.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse as parseWithYamlLibrary } from 'yaml';
import { BoundaryError, type Issue } from '../../src/shared/errors.js';
import { MAX_POLICY_ALIAS_COUNT } from '../../src/policy/limits.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { loadYaml, MAX_YAML_COLLECTION_ENTRIES, MAX_YAML_EVENTS, YamlSyntaxError } from '../../src/policy/yaml-load.js';
import { isMap, isScalar, isSeq, mapGet, type Node, toPlain } from '../../src/policy/yaml-source.js';

function issuesOf(text: string): readonly Issue[] {
  try {
    parsePolicy(text);
  } catch (err) {
    assert.ok(err instanceof BoundaryError, String(err));
    return err.issues ?? [];
  }
  assert.fail('expected POLICY_INVALID');
}

function child(node: Node | null, key: string): Node | null | undefined {
  assert.ok(isMap(node));
  return mapGet(node, key);
}

describe('policy YAML reader', () => {
  it('reads scalars under the YAML 1.2 core schema exactly as the yaml library does', () => {
    const text = [
      'a: 80', 'b: "80"', 'c: 0x1F', 'd: 0o17', 'e: yes', 'f: true', 'g: ~', 'h: 1.5', 'i: 2001-01-01', 'j: .inf',
      'k: 1_000', 'l: 0755', 'm: +12', 'n: .NaN', 'o: 1e3', 'p: -0', 'q: TRUE', 'r: Null', 's: 0b11', "t: 'it''s'",
      'u: |\n  two\n  lines', 'v: >-\n  folded\n  text', 'w: "\\u00e9\\t"', 'x: on', 'y: [1, "1", ~, null, NULL]',
    ].join('\n');
    assert.deepEqual(toPlain(loadYaml(`${text}\n`).contents), parseWithYamlLibrary(`${text}\n`));
  });

  it('places every node at its 1-based line and column (the opening quote for quoted scalars)', () => {
    const text = 'version: 1\nnetwork_policies:\n  x:\n    endpoints:\n      - { host: "a.test", port: 99999 }\n';
    const port = issuesOf(text).find((i) => i.code === 'POLICY_PORT_INVALID');
    assert.deepEqual([port?.line, port?.column], [5, text.indexOf('99999') - text.lastIndexOf('\n', text.indexOf('99999'))]);
    const { contents } = loadYaml(text);
    const endpoints = child(child(child(contents, 'network_policies') ?? null, 'x') ?? null, 'endpoints');
    assert.ok(isSeq(endpoints));
    const host = child(endpoints.items[0] ?? null, 'host');
    assert.ok(isScalar(host));
    assert.equal(text.slice(host.offset, host.offset + 8), '"a.test"');
  });

  it('treats a key with nothing after it as absent, and ~ as a written null', () => {
    const { contents } = loadYaml('a:\nb: ~\n');
    assert.equal(child(contents, 'a'), null);
    const b = child(contents, 'b');
    assert.ok(isScalar(b) && b.value === null);
  });

  it('resolves an alias to the anchored node itself, shared, and counts its expansions', () => {
    const { contents, aliasExpansions } = loadYaml('rules: &r [ { allow: { method: GET } } ]\nagain: *r\nthird: *r\n');
    assert.equal(child(contents, 'again'), child(contents, 'rules'));
    assert.ok(isSeq(child(contents, 'third')));
    assert.equal(aliasExpansions, 2);
  });

  it('weights an alias by the aliases inside its anchor, so nested aliases cannot expand past the limit', () => {
    // Ten levels of ten aliases each: 10^10 nodes if expanded; refused before any reader walks it.
    const lines = ['a0: &a0 [x]'];
    for (let level = 1; level <= 10; level++) lines.push(`a${level}: &a${level} [${Array(10).fill(`*a${level - 1}`).join(', ')}]`);
    const { aliasExpansions } = loadYaml(`${lines.join('\n')}\n`);
    assert.ok(aliasExpansions > MAX_POLICY_ALIAS_COUNT);
    const started = performance.now();
    assert.equal(issuesOf(`version: 1\n${lines.join('\n')}\n`)[0]?.code, 'POLICY_LIMIT_ALIASES');
    assert.ok(performance.now() - started < 1_000);
  });

  it('refuses duplicate keys, including 80 and "80", which read as one name', () => {
    assert.throws(() => loadYaml('a: 1\na: 2\n'), YamlSyntaxError);
    const issues = issuesOf('version: 1\nnetwork_policies:\n  80: { endpoints: [ { host: a.test, port: 443 } ] }\n  "80": { endpoints: [ { host: b.test, port: 443 } ] }\n');
    assert.ok(issues.some((i) => i.code === 'POLICY_YAML_SYNTAX' && i.line === 4), JSON.stringify(issues));
  });

  it('refuses several documents and tags outside the core schema', () => {
    assert.equal(issuesOf('version: 1\n---\nversion: 1\n')[0]?.code, 'POLICY_YAML_SYNTAX');
    assert.equal(issuesOf('version: !!binary aGVsbG8=\n')[0]?.code, 'POLICY_YAML_SYNTAX');
    assert.equal(issuesOf('version: !custom 1\n')[0]?.code, 'POLICY_YAML_SYNTAX');
  });

  it('refuses a merge key in every map, open ones and quoted spellings included, at the key', () => {
    const cases: [string, number, number][] = [
      ['version: 1\nbase: &b { version: 1 }\n<<: *b\n', 3, 1],
      ['version: 1\nnetwork_policies:\n  a: &a { endpoints: [ { host: a.test, port: 443 } ] }\n  "<<": *a\n', 4, 3],
      ['version: 1\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: a.test, port: 443, protocol: rest, rules: [ { allow: { method: GET, path: /, query: { <<: { x: y } } } } ] }\n', 5, 103],
    ];
    for (const [text, line, column] of cases) {
      const issues = issuesOf(text);
      assert.deepEqual(issues.map((i) => [i.code, i.line, i.column]), [['POLICY_YAML_SYNTAX', line, column]], text);
    }
  });

  it('refuses a list or map of more than MAX_YAML_COLLECTION_ENTRIES entries with POLICY_LIMIT_YAML, at the collection', () => {
    const list = (n: number): string => `[${Array(n).fill('1').join(',')}]`;
    assert.doesNotThrow(() => loadYaml(`a: ${list(MAX_YAML_COLLECTION_ENTRIES)}\n`));
    assert.throws(() => loadYaml(`a: ${list(MAX_YAML_COLLECTION_ENTRIES + 1)}\n`), (err: unknown) => err instanceof YamlSyntaxError && err.problem.code === 'POLICY_LIMIT_YAML');
    const map = `{${Array.from({ length: MAX_YAML_COLLECTION_ENTRIES + 1 }, (_, i) => `k${i}: 1`).join(',')}}`;
    const issues = issuesOf(`version: 1\nx: ${map}\n`);
    assert.deepEqual(issues.map((i) => [i.code, i.line, i.column]), [['POLICY_LIMIT_YAML', 2, 4]]);
  });

  it('refuses a document of more than MAX_YAML_EVENTS parser events with POLICY_LIMIT_YAML', () => {
    // Lists under the entry cap, so only the event budget can refuse: each item is one event.
    const per = MAX_YAML_COLLECTION_ENTRIES;
    const lists = Math.ceil(MAX_YAML_EVENTS / per) + 1;
    const text = `version: 1\n${Array.from({ length: lists }, (_, i) => `x${i}: [${Array(per).fill('1').join(',')}]`).join('\n')}\n`;
    assert.deepEqual(issuesOf(text).map((i) => i.code), ['POLICY_LIMIT_YAML']);
  });

  it('keeps a key named __proto__ a key', () => {
    const plain = toPlain(loadYaml('__proto__: { polluted: true }\n').contents) as Record<string, unknown>;
    assert.deepEqual(Object.keys(plain), ['__proto__']);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });
});
