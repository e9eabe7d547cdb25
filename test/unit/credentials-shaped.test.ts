// Shaped placeholders (docs/credentials.md#shaped-placeholders): the catalogue's shapes and lengths, custom formats and
// their refusals, derivation (stable, distinct per provider and key), and the parse errors of `format`.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCredentials } from '../../src/credentials/parse.js';
import { containsMarker, SHORTEST_MARKER_CHARS } from '../../src/credentials/placeholder.js';
import { bufferHasMarker, createMarkerScanner } from '../../src/credentials/scan.js';
import { compileFormat, FORMAT_CATALOGUE, formatLength, indexShaped, MIN_SHAPED_ENTROPY_BITS, shapedPlaceholder } from '../../src/credentials/shaped.js';
import { credentialIssues } from '../harness/credential-parts.js';

function format(input: Parameters<typeof compileFormat>[0]) {
  const compiled = compileFormat(input, SHORTEST_MARKER_CHARS);
  assert.ok(compiled.ok, compiled.ok ? '' : compiled.message);
  return compiled.format;
}


describe('shaped placeholder formats', () => {
  it('every catalogue entry has the published length and at least the minimum entropy', () => {
    const lengths: Record<string, number> = {
      'github-classic': 40,
      'github-fine-grained': 93,
      anthropic: 108,
      'aws-access-key-id': 20,
      'aws-secret-access-key': 40,
    };
    for (const name of Object.keys(FORMAT_CATALOGUE)) {
      const f = format(name);
      if (lengths[name] !== undefined) assert.equal(formatLength(f), lengths[name], name);
      assert.equal(shapedPlaceholder('p', 'K', f).length, formatLength(f));
    }
  });

  it('is derived: the same for the same provider, key and format; different otherwise', () => {
    const f = format('github-classic');
    assert.equal(shapedPlaceholder('p', 'K', f), shapedPlaceholder('p', 'K', f));
    const all = new Set([shapedPlaceholder('p', 'K', f), shapedPlaceholder('q', 'K', f), shapedPlaceholder('p', 'L', f), shapedPlaceholder('p', 'K', format({ prefix: 'ghp_', length: 40, alphabet: 'alphanumeric' }))]);
    assert.equal(all.size, 4);
  });

  it('custom formats: prefix + length (whole token) + alphabet; refused when unknown, too short, too long or too weak', () => {
    assert.match(shapedPlaceholder('p', 'K', format({ prefix: 'AB-', length: 30, alphabet: 'hex' })), /^AB-[0-9a-f]{27}$/);
    for (const bad of [
      'github',
      { prefix: 'x', length: 10, alphabet: 'alphanumeric' },
      { prefix: 'x', length: 300, alphabet: 'alphanumeric' },
      { prefix: 'x', length: 20, alphabet: 'emoji' },
      { prefix: 'x y', length: 40, alphabet: 'hex' },
      // 15 digits: about 50 bits, under the minimum.
      { prefix: 'tok-', length: 19, alphabet: 'digits' },
    ]) {
      assert.equal(compileFormat(bad, SHORTEST_MARKER_CHARS).ok, false, JSON.stringify(bad));
    }
    assert.equal(MIN_SHAPED_ENTROPY_BITS, 64);
  });

  it('the streaming scanner holds back enough to catch the longest shaped placeholder split across reads', () => {
    const value = shapedPlaceholder('p', 'LONG', format('github-fine-grained'));
    assert.ok(indexShaped(value, { key: 'LONG', handle: 'h' }));
    const scanner = createMarkerScanner();
    const body = `{"pad":"${'x'.repeat(500)}","t":"${value}"}`;
    // More of it than the marker tail (69 bytes) in the first read.
    const cut = body.indexOf(value) + 80;
    assert.equal(scanner.feed(Buffer.from(body.slice(0, cut))), 'clean');
    const released = scanner.release().toString();
    assert.ok(!released.includes(value.slice(0, 8)), 'the start of the placeholder is held back');
    assert.equal(scanner.feed(Buffer.from(body.slice(cut))), 'marker');
    assert.equal(bufferHasMarker(Buffer.from(value.toLowerCase())), true, 'in any case');
    assert.equal(containsMarker(encodeURIComponent(value).replace(/_/g, '%5F')), true, 'percent-encoded');
  });

  it('the credentials file: format beside value_from; a bad one is CREDENTIALS_FORMAT_INVALID', () => {
    const entry = (fmt: string) => `providers:\n  p:\n    env:\n      K: { value_from: { env: X }, format: ${fmt} }\n`;
    assert.deepEqual(credentialIssues(entry('github-classic')), []);
    assert.deepEqual(credentialIssues(entry('{ prefix: tok_, length: 40, alphabet: alphanumeric }')), []);
    assert.deepEqual(credentialIssues(entry('nope')), ['CREDENTIALS_FORMAT_INVALID providers.p.env.K.format']);
    assert.deepEqual(credentialIssues(entry('{ prefix: tok_, length: 8, alphabet: alphanumeric }')), ['CREDENTIALS_FORMAT_INVALID providers.p.env.K.format']);
    assert.deepEqual(credentialIssues(entry('{ prefix: tok_, length: 40, alphabet: alphanumeric, extra: 1 }')), ['CREDENTIALS_UNKNOWN_KEY providers.p.env.K.format.extra']);
    assert.deepEqual(credentialIssues('providers:\n  p:\n    env:\n      K: { format: github-classic }\n'), ['CREDENTIALS_TYPE providers.p.env.K']);
    const doc = parseCredentials(entry('aws-access-key-id'));
    assert.equal(doc.providers[0]?.env[0]?.format?.id, 'aws-access-key-id');
  });
});
