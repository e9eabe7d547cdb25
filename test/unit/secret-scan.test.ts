// Issue 31: boundary/secret-scan's pattern set catches each kind of secret (made-up values of the right shape) and
// leaves lookalikes alone; block and redact; user patterns; and the config load rules (docs/policy.md#secret-scanner).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSecretScan } from '../../src/middleware/secret-scan.js';
import { builtinConfigProblem } from '../../src/policy/middleware-builtins.js';
import type { MiddlewareEntry } from '../../src/policy/types.js';
import { SECRET_SAMPLES } from '../harness/secret-samples.js';

const entry = (config: Record<string, unknown>): MiddlewareEntry => ({ key: 'scan', middleware: 'boundary/secret-scan', builtin: 'secret-scan', config }) as unknown as MiddlewareEntry;

describe('boundary/secret-scan', () => {
  const block = createSecretScan(entry({}));
  const redact = createSecretScan(entry({ mode: 'redact' }));

  for (const { kind, value } of SECRET_SAMPLES) {
    it(`blocks ${kind} (${value.slice(0, 4)}...) by default, naming the kind, never the value`, () => {
      const result = block.evaluateBody(Buffer.from(JSON.stringify({ note: 'see', value })));
      assert.equal(result.verdict, 'deny');
      assert.ok(result.verdict === 'deny');
      assert.equal(result.reasonCode, 'secret_detected');
      assert.deepEqual(result.findings, [{ type: `secret.${kind}`, count: 1 }]);
      assert.ok(!JSON.stringify(result).includes(value));
    });
  }

  it('redacts every match in place and counts each kind', () => {
    const aws = SECRET_SAMPLES[0]!.value;
    const gh = SECRET_SAMPLES[5]!.value;
    const result = redact.evaluateBody(Buffer.from(`a=${aws}&b=${gh}&c=${aws}`));
    assert.ok(result.verdict === 'allow');
    assert.equal(result.body?.toString('latin1'), 'a=[REDACTED]&b=[REDACTED]&c=[REDACTED]');
    assert.deepEqual(result.findings, [
      { type: 'secret.aws_access_key_id', count: 2 },
      { type: 'secret.github_token', count: 1 },
    ]);
  });

  it('keeps a body that is not UTF-8 byte for byte around a redaction', () => {
    const aws = SECRET_SAMPLES[0]!.value;
    const body = Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(` ${aws} `), Buffer.from([0x80])]);
    const result = redact.evaluateBody(body);
    assert.ok(result.verdict === 'allow');
    assert.deepEqual(result.body, Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(' [REDACTED] '), Buffer.from([0x80])]));
  });

  it('leaves lookalikes alone: short keys, a key inside a longer token, a JWT-shaped run whose header is not JSON', () => {
    for (const text of ['sk-short', 'sk-learn-compatible-estimator-name', 'xAKIAQWERTYUIOPASDFGH', 'ghp_tooShort', 'eyJub3Rqc29u.eyJzdWIiOiIxIn0.sig', 'AccountKey=short==', '-----BEGIN PUBLIC KEY-----']) {
      const result = block.evaluateBody(Buffer.from(text));
      assert.equal(result.verdict, 'allow', text);
    }
  });

  it('scans a WebSocket text message the same way', () => {
    const jwt = SECRET_SAMPLES.at(-1)!.value;
    assert.equal(block.evaluateText(`token ${jwt}`).verdict, 'deny');
    const redacted = redact.evaluateText(`token ${jwt}`);
    assert.ok(redacted.verdict === 'allow');
    assert.equal(redacted.text, 'token [REDACTED]');
  });

  it('runs the entry\'s own patterns, reported as secret.custom.<name>', () => {
    const scan = createSecretScan(entry({ mode: 'redact', patterns: [{ name: 'acme', regex: 'ACME_[A-Z0-9]{12}' }] }));
    const result = scan.evaluateBody(Buffer.from('k=ACME_0123456789AB'));
    assert.ok(result.verdict === 'allow');
    assert.equal(result.body?.toString(), 'k=[REDACTED]');
    assert.deepEqual(result.findings, [{ type: 'secret.custom.acme', count: 1 }]);
  });

  it('fails a body over the payload limit (on_error decides)', () => {
    const result = block.evaluateBody(Buffer.alloc(256 * 1024 + 1, 0x61));
    assert.deepEqual(result, { verdict: 'failed', failure: 'payload-too-large' });
  });
});

describe('boundary/secret-scan config at load', () => {
  const problem = (config: Record<string, unknown>) => builtinConfigProblem('secret-scan', config);
  it('accepts no config, either mode, and safe patterns', () => {
    assert.equal(problem({}), undefined);
    assert.equal(problem({ mode: 'block' }), undefined);
    assert.equal(problem({ mode: 'redact', patterns: [{ name: 'acme', regex: 'ACME_[A-Z0-9]{32}' }] }), undefined);
  });
  for (const [what, config] of [
    ['an unknown mode', { mode: 'allow' }],
    ['an unknown key', { pattern: [] }],
    ['patterns that are not a list', { patterns: 'x' }],
    ['a pattern that does not compile', { patterns: [{ name: 'bad', regex: 'a(b' }] }],
    ['nested repetition (exponential backtracking)', { patterns: [{ name: 'nested', regex: '(a+)+$' }] }],
    ['overlapping repetitions (polynomial backtracking)', { patterns: [{ name: 'poly', regex: '\\w+\\d+x' }] }],
    ['a pattern that matches empty text', { patterns: [{ name: 'empty', regex: 'x*' }] }],
    ['a non-ASCII pattern', { patterns: [{ name: 'utf', regex: 'clé_[0-9]{8}' }] }],
    ['a bad name', { patterns: [{ name: 'Bad Name', regex: 'ACME_[0-9]{8}' }] }],
    ['a name used twice', { patterns: [{ name: 'a', regex: 'A_[0-9]{8}' }, { name: 'a', regex: 'B_[0-9]{8}' }] }],
    ['a pattern longer than MAX_USER_PATTERN_CHARS', { patterns: [{ name: 'long', regex: 'A'.repeat(257) }] }],
    ['more than MAX_USER_PATTERNS', { patterns: Array.from({ length: 17 }, (_, i) => ({ name: `p${i}`, regex: `P${i}_[0-9]{8}` })) }],
  ] as const) {
    it(`refuses ${what}`, () => assert.equal(typeof problem(config as Record<string, unknown>), 'string'));
  }
  it('the reverse canary takes no config', () => {
    assert.equal(builtinConfigProblem('reverse-canary', {}), undefined);
    assert.equal(typeof builtinConfigProblem('reverse-canary', { mode: 'block' }), 'string');
  });
});
