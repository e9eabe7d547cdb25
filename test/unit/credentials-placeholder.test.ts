import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  aliasPlaceholder,
  canonicalPlaceholder,
  containsMarker,
  findPlaceholders,
  keyNameProblem,
  LONGEST_MARKER_CHARS,
  percentDecodeLoose,
  SHORTEST_MARKER_CHARS,
  redactPlaceholders,
  revisionPlaceholder,
  stablePlaceholder,
} from '../../src/credentials/placeholder.js';

const HEX = 'ab'.repeat(32);
const known = (key: string) => key === 'API_KEY' || key === 'OPENAI_API_KEY';

function refs(text: string) {
  return findPlaceholders(text, known).map((m) => ({ text: text.slice(m.start, m.end), ...m.ref }));
}

function percentEncodeAll(text: string): string {
  return [...text].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

describe('placeholder forms', () => {
  it('formats the canonical, revision, stable and alias forms', () => {
    assert.equal(canonicalPlaceholder('API_KEY'), 'openshell:resolve:env:API_KEY');
    assert.equal(revisionPlaceholder('API_KEY', 7), 'openshell:resolve:env:v7_API_KEY');
    assert.equal(stablePlaceholder('API_KEY', HEX), `openshell:resolve:env:s${HEX}_API_KEY`);
    assert.equal(aliasPlaceholder('sk', 'API_KEY'), 'sk-OPENSHELL-RESOLVE-ENV-API_KEY');
    assert.equal(LONGEST_MARKER_CHARS, 23);
  });

  it('finds each form with its span and parsed fields', () => {
    assert.deepEqual(refs('Bearer openshell:resolve:env:API_KEY'), [
      { text: 'openshell:resolve:env:API_KEY', form: 'canonical', key: 'API_KEY', family: 'openshell' },
    ]);
    assert.deepEqual(refs('/x/openshell:resolve:env:v12_API_KEY/y'), [
      { text: 'openshell:resolve:env:v12_API_KEY', form: 'revision', key: 'API_KEY', revision: 12, family: 'openshell' },
    ]);
    assert.deepEqual(refs(`a=openshell:resolve:env:s${HEX.toUpperCase()}_API_KEY&b`), [
      { text: `openshell:resolve:env:s${HEX.toUpperCase()}_API_KEY`, form: 'stable', key: 'API_KEY', handle: HEX, family: 'openshell' },
    ]);
    assert.deepEqual(refs('"sk-proj-OPENSHELL-RESOLVE-ENV-OPENAI_API_KEY"'), [
      { text: 'sk-proj-OPENSHELL-RESOLVE-ENV-OPENAI_API_KEY', form: 'alias', key: 'OPENAI_API_KEY', family: 'openshell' },
    ]);
  });

  it('finds the ryno family the same way, each token in its own family', () => {
    assert.equal(canonicalPlaceholder('API_KEY', 'ryno'), 'ryno:resolve:env:API_KEY');
    assert.equal(aliasPlaceholder('sk', 'API_KEY', 'ryno'), 'sk-RYNO-RESOLVE-ENV-API_KEY');
    assert.deepEqual(refs('Bearer ryno:resolve:env:API_KEY and openshell:resolve:env:v3_API_KEY'), [
      { text: 'ryno:resolve:env:API_KEY', form: 'canonical', key: 'API_KEY', family: 'ryno' },
      { text: 'openshell:resolve:env:v3_API_KEY', form: 'revision', key: 'API_KEY', revision: 3, family: 'openshell' },
    ]);
    assert.deepEqual(refs('"sk-proj-RYNO-RESOLVE-ENV-OPENAI_API_KEY"'), [
      { text: 'sk-proj-RYNO-RESOLVE-ENV-OPENAI_API_KEY', form: 'alias', key: 'OPENAI_API_KEY', family: 'ryno' },
    ]);
    assert.equal(redactPlaceholders('a=ryno:resolve:env:K&b=x-RYNO-RESOLVE-ENV-K'), 'a=[CREDENTIAL]&b=[CREDENTIAL]');
  });

  it('recognises an alias only when its key exists', () => {
    assert.deepEqual(refs('sk-OPENSHELL-RESOLVE-ENV-NOPE'), []);
  });

  it('reads the key greedily and ignores markers without a valid key', () => {
    assert.deepEqual(refs('openshell:resolve:env:API_KEYX/'), [
      { text: 'openshell:resolve:env:API_KEYX', form: 'canonical', key: 'API_KEYX', family: 'openshell' },
    ]);
    assert.deepEqual(refs('openshell:resolve:env:'), []);
    assert.deepEqual(refs('openshell:resolve:env:9KEY'), []);
  });

  it('leaves other spellings to the leftover scan: only exact-case literal markers are placeholders', () => {
    assert.deepEqual(refs('OPENSHELL:RESOLVE:ENV:API_KEY'), []);
    assert.deepEqual(refs('openshell%3Aresolve%3Aenv%3AAPI_KEY'), []);
  });

  it('finds several placeholders in order', () => {
    const found = refs('openshell:resolve:env:API_KEY+openshell:resolve:env:OTHER');
    assert.deepEqual(
      found.map((f) => f.key),
      ['API_KEY', 'OTHER'],
    );
  });
});

describe('reserved key names', () => {
  for (const [key, ok] of [
    ['API_KEY', true],
    ['_private', true],
    ['v1', true],
    ['v1_KEY', false],
    ['v123_', false],
    [`s${HEX}_KEY`, false],
    [`s${HEX.slice(2)}_KEY`, true],
    ['1KEY', false],
    ['API-KEY', false],
    ['', false],
    ['K'.repeat(257), false],
  ] as const) {
    it(`${ok ? 'accepts' : 'refuses'} the key ${JSON.stringify(key.slice(0, 24))}`, () => {
      assert.equal(keyNameProblem(key) === undefined, ok);
    });
  }
});

describe('marker detection', () => {
  const marker = 'openshell:resolve:env:KEY';
  const cases: [string, string, boolean][] = [
    ['literal canonical', `x ${marker} y`, true],
    ['upper-case canonical', marker.toUpperCase(), true],
    ['mixed-case alias', 'sk-OpenShell-Resolve-Env-KEY', true],
    ['colons percent-encoded', 'openshell%3Aresolve%3aenv%3AKEY', true],
    ['every character percent-encoded', percentEncodeAll(marker), true],
    ['double percent-encoded', 'openshell%253Aresolve%253Aenv%253AKEY', true],
    ['alias percent-encoded', percentEncodeAll('-OPENSHELL-RESOLVE-ENV-'), true],
    ['ryno canonical', 'Bearer ryno:resolve:env:KEY', true],
    ['ryno upper-case', 'RYNO:RESOLVE:ENV:KEY', true],
    ['ryno with its first letter percent-encoded', '%72yno:resolve:env:KEY', true],
    ['ryno alias', 'xoxb-Ryno-Resolve-Env-KEY', true],
    ['ryno every character percent-encoded', percentEncodeAll('ryno:resolve:env:'), true],
    ['no marker', 'openshell resolve env', false],
    ['near miss', 'openshell:resolve:en:KEY', false],
    ['malformed escapes', '%ZZ%4%', false],
  ];
  for (const [name, text, expected] of cases) {
    it(`${expected ? 'detects' : 'does not report'} ${name}`, () => {
      assert.equal(containsMarker(text), expected);
    });
  }

  it('finds a bare marker of exactly the shortest length, and nothing shorter', () => {
    assert.equal(SHORTEST_MARKER_CHARS, 'ryno:resolve:env:'.length);
    assert.equal(containsMarker('Ryno:Resolve:Env:'), true);
    assert.equal(containsMarker('OpenShell:Resolve:Env:'), true);
    assert.equal(containsMarker('-openshell-resolve-env-'), true);
    assert.equal(containsMarker('yno:resolve:env:'), false);
  });

  it('skips short text only where the full scan finds nothing either', () => {
    // Every text below the length bound, including ones that lengthen when lower-cased (U+0130) or hold
    // escapes: the scan itself (lower-case, look, decode, repeat) must agree that none holds a marker.
    const pieces = ['openshell', 'ryno', ':resolve', ':env:', '-OPENSHELL', '-RYNO', '-resolve-env-', '%3A', '%2D', '\u0130', 'K', '%', 'A'];
    let seed = 7;
    const next = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed;
    };
    for (let i = 0; i < 5_000; i++) {
      let text = '';
      while (text.length < SHORTEST_MARKER_CHARS + 4) text += pieces[next() % pieces.length];
      text = text.slice(0, next() % SHORTEST_MARKER_CHARS);
      let current = text;
      let found = false;
      for (let round = 0; round <= 3 && !found; round++) {
        const lower = current.toLowerCase();
        found = lower.includes('openshell:resolve:env:') || lower.includes('-openshell-resolve-env-');
        current = percentDecodeLoose(current);
      }
      assert.equal(found, false, text);
      assert.equal(containsMarker(text), false, text);
    }
  });

  it('decodes percent escapes leniently, one round at a time', () => {
    assert.equal(percentDecodeLoose('a%3Ab%253A%ZZ%'), 'a:b%3A%ZZ%');
  });
});

describe('redactPlaceholders', () => {
  it('replaces literal placeholders and aliases with [CREDENTIAL] for routing and logs', () => {
    assert.equal(redactPlaceholders('/bot openshell:resolve:env:TOKEN/send'), '/bot [CREDENTIAL]/send');
    assert.equal(redactPlaceholders('/botopenshell:resolve:env:TOKEN/send'), '/bot[CREDENTIAL]/send');
    assert.equal(redactPlaceholders('/v1/sk-OPENSHELL-RESOLVE-ENV-ANY/x'), '/v1/[CREDENTIAL]/x');
  });

  it('replaces a whole piece when only an encoded marker is left, so no key name survives', () => {
    const out = redactPlaceholders('/a/openshell%3Aresolve%3Aenv%3ASECRET_NAME/b');
    assert.equal(out, '/a/[CREDENTIAL]/b');
    assert.ok(!out.includes('SECRET_NAME'));
  });

  it('leaves text without markers untouched', () => {
    assert.equal(redactPlaceholders('/repos/a/b?x=1'), '/repos/a/b?x=1');
  });
});
