import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { BoundaryError, ERROR_CODES } from '../../src/shared/errors.js';

async function documentedCodes(): Promise<string[]> {
  const doc = await readFile(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const section = doc.split(/^## Error codes$/m)[1]?.split(/^## /m)[0] ?? '';
  return [...section.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1] ?? '');
}

describe('error catalogue', () => {
  it('lists in docs/errors.md exactly the codes of the catalogue, in the same order', async () => {
    assert.deepEqual(await documentedCodes(), Object.keys(ERROR_CODES));
  });

  it('gives every code one line of meaning', () => {
    for (const [code, meaning] of Object.entries(ERROR_CODES)) {
      assert.match(code, /^[A-Z][A-Z0-9_]+$/);
      assert.ok(meaning.length > 10 && !meaning.includes('\n'), code);
    }
  });

  it('carries its code, issues and cause', () => {
    const cause = new Error('inner');
    const err = new BoundaryError('POLICY_INVALID', 'bad', {
      cause,
      issues: [{ code: 'POLICY_VERSION', path: 'version', message: 'must be 1' }],
    });
    assert.equal(err.code, 'POLICY_INVALID');
    assert.equal(err.issues[0]?.code, 'POLICY_VERSION');
    assert.equal(err.cause, cause);
    assert.equal(err.name, 'BoundaryError');
  });
});
