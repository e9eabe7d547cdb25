// Issue 31: boundary/secret-scan's built-in patterns stay linear on bodies crafted against them (long runs of a key's
// prefix, JWT-shaped segments, PEM headers): each takes at most a bounded multiple of an ordinary body of the same size,
// measured in the same run. And a rejected lookalike does not hide a real token right after it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSecretScan, MAX_SECRET_SCAN_PAYLOAD_BYTES } from '../../src/middleware/secret-scan.js';
import type { MiddlewareEntry } from '../../src/policy/types.js';
import { SECRET_SAMPLES } from '../harness/secret-samples.js';

const scan = createSecretScan({ key: 'scan', config: {} } as unknown as MiddlewareEntry);
const SIZE = MAX_SECRET_SCAN_PAYLOAD_BYTES - 64;
const fill = (unit: string): Buffer => Buffer.from(unit.repeat(Math.ceil(SIZE / unit.length)).slice(0, SIZE), 'latin1');
/** How many times slower than an ordinary body a crafted one may be: linear scans stay well inside it. */
const MAX_RATIO = 100;

function fastest(body: Buffer): number {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    scan.evaluateBody(body);
    best = Math.min(best, performance.now() - started);
  }
  return best;
}

describe('boundary/secret-scan on crafted bodies', () => {
  it('stays within a bounded multiple of an ordinary body of the same size', () => {
    const baseline = Math.max(fastest(fill('lorem ipsum dolor sit amet, ')), 0.5);
    for (const unit of ['a', 'eyJ', 'eyJxxxxxxxxx.', 'eyJhbGciOiJIUzI1NiJ9.eyJ.', 'ghp_', 'sk-aaaaaaaaaaaaaaaaaaaaaaa ', '-----BEGIN RSA PRIVATE KEY-----', 'aws_secret_access_key=', 'xoxb-', 'AccountKey=', '"private_key_id": "']) {
      const took = fastest(fill(unit));
      assert.ok(took / baseline < MAX_RATIO, `${JSON.stringify(unit)}: ${took.toFixed(1)} ms against ${baseline.toFixed(1)} ms`);
    }
  });

  it('finds a JWT right after a JWT-shaped segment whose header is not JSON', () => {
    const jwt = SECRET_SAMPLES.at(-1)?.value ?? '';
    const result = scan.evaluateBody(Buffer.from(`x eyJxxxxxxxxxxx.${jwt} y`));
    assert.equal(result.verdict, 'deny');
  });
});
