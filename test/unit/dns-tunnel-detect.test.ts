// The pieces behind issue 16's DNS limits, without sockets: the tunnelling classifier's signals, the token bucket on a
// test clock, the REFUSED built from a query, the lookup gate's per-parent window and its bounds, and the config option.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode } from 'dns-packet';
import { parseRunFlags } from '../../src/app/cli/run-flags.js';
import { DEFAULTS, parseConfig } from '../../src/app/config.js';
import { parseQuery } from '../../src/dns/answer.js';
import { refusedFromQuery } from '../../src/dns/rate-limit.js';
import { createLookupGate, MAX_NEW_NAMES_PER_PARENT, MAX_TRACKED_PARENTS, NEW_NAMES_WINDOW_MS } from '../../src/net/lookup-gate.js';
import { createTokenBucket } from '../../src/net/token-bucket.js';
import { classifySubdomain, subdomainUnder } from '../../src/net/tunnel-detect.js';
import { decide } from '../../src/policy/decide.js';
import type { Policy } from '../../src/policy/types.js';
import { testClock } from '../harness/clock.js';
import { buildQuery, rcodeOf } from '../harness/dns-client.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { fakeResolver } from '../harness/fake-resolver.js';

function queryOf(name: string, options: { edns?: number; rd?: boolean } = {}) {
  const parsed = parseQuery(buildQuery(name, 'A', options));
  assert.equal(parsed.kind, 'query');
  return parsed.query;
}

describe('classifySubdomain', () => {
  it('names the alphabet of encoded labels and flags long names and label chains', () => {
    assert.deepEqual(classifySubdomain('3f9a0c7e51b2d84f6a09e3c17b5d2f80a4c6e91b37d5f02a'), ['hex-encoded']);
    assert.deepEqual(classifySubdomain('mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpi2dqnrtgq3tkmzx'), ['base32-encoded']);
    assert.deepEqual(classifySubdomain('k9x_2mq8zr-4tn7v0p3w5y6s1uqlbd8c2h9_f4g6j7e3a0x5r8t2'), ['base64-encoded']);
    assert.deepEqual(classifySubdomain('a.b.c.d.e.f.g'), ['label-chain']);
    assert.deepEqual(classifySubdomain(`${'very-long-words-'.repeat(7)}end`), ['long-name']);
  });

  it('passes cloud ids up to 32 random characters, words, numbers and UUIDs', () => {
    for (const sub of ['d1a2b3c4d5e6f7', '0123456789abcdef0123456789abcdef.gr7.us-east-1', 'api', 'my-bucket-name.s3.us-east-1', '123456789012.dkr.ecr.us-east-1', '123e4567-e89b-42d3-a456-426614174000']) {
      assert.deepEqual(classifySubdomain(sub), [], sub);
    }
  });

  it('takes the labels under the wildcard base only', () => {
    assert.equal(subdomainUnder('a.b.example.com', 'example.com'), 'a.b');
    assert.equal(subdomainUnder('a.badexample.com', 'example.com'), '');
    assert.equal(subdomainUnder('example.com', 'example.com'), '');
    assert.equal(subdomainUnder('a.b', ''), 'a.b');
  });
});

describe('createTokenBucket', () => {
  it('starts full, refills on the clock up to the burst, and refills nothing when the clock steps back', () => {
    const clock = testClock();
    const bucket = createTokenBucket({ perSecond: 2, burst: 3, now: clock.now });
    assert.deepEqual([bucket.take(), bucket.take(), bucket.take(), bucket.take()], [true, true, true, false]);
    assert.equal(bucket.waitMs(), 500);
    clock.advance(500);
    assert.deepEqual([bucket.take(), bucket.take()], [true, false]);
    clock.advance(60_000);
    assert.deepEqual([bucket.take(), bucket.take(), bucket.take(), bucket.take()], [true, true, true, false]);
    clock.advance(-10_000);
    assert.equal(bucket.take(), false);
  });
});

describe('refusedFromQuery', () => {
  it('is the query header and question with QR, RA, RD as asked and REFUSED, no records', () => {
    for (const options of [{}, { edns: 1232 }, { rd: false }]) {
      const packet = decode(refusedFromQuery(queryOf('x.t.example.test', options)));
      assert.equal(packet.type, 'response');
      assert.equal(packet.id, 0x1234);
      assert.equal(rcodeOf(packet), 'REFUSED');
      assert.equal(packet.flag_rd, options.rd !== false);
      assert.equal(packet.flag_ra, true);
      assert.deepEqual(packet.questions, [{ name: 'x.t.example.test', type: 'A', class: 'IN' }]);
      assert.equal((packet.answers ?? []).length + (packet.authorities ?? []).length + (packet.additionals ?? []).length, 0);
    }
  });
});

describe('the lookup gate\'s per-parent window', () => {
  /** An enforcing gate over a resolver that knows no name: the refusal, or undefined when the name went upstream. */
  function enforcing(policy: Policy, now: () => number) {
    const gate = createLookupGate({ resolver: fakeResolver(), now, report: () => {}, tunnelDetection: 'enforce', newNames: { perSecond: 1_000, burst: 1_000 } });
    const screen = (name: string) => {
      const out = gate.lookup(name, { endpoints: decide(policy, { adapter: 'dns', host: name, form: 'name', qtype: 'A' }).endpoints, via: 'dns' });
      return 'refused' in out ? out : undefined;
    };
    return { gate, screen };
  }

  it('restarts a parent window after NEW_NAMES_WINDOW_MS', () => {
    const clock = testClock();
    const policy = stubPolicy([{ host: '*.w.example.test', ports: [443] }]);
    const { gate, screen } = enforcing(policy, clock.now);
    for (let i = 0; i < MAX_NEW_NAMES_PER_PARENT; i++) assert.equal(screen(`h${i}.w.example.test`), undefined);
    assert.ok(screen('one-more.w.example.test') !== undefined);
    clock.advance(NEW_NAMES_WINDOW_MS);
    assert.equal(screen('fresh.w.example.test'), undefined);
    assert.equal(gate.stats().tunnelRefused, 1);
  });

  it('tracks at most MAX_TRACKED_PARENTS windows: the oldest is dropped', () => {
    const clock = testClock();
    const specs = Array.from({ length: MAX_TRACKED_PARENTS + 1 }, (_, i) => ({ host: `*.p${i}.example.test`, ports: [443] }));
    const policy = stubPolicy(specs);
    const { screen } = enforcing(policy, clock.now);
    for (let n = 0; n < MAX_NEW_NAMES_PER_PARENT; n++) screen(`h${n}.p0.example.test`);
    for (let i = 1; i <= MAX_TRACKED_PARENTS; i++) screen(`h.p${i}.example.test`);
    // p0's window was dropped for the newest parent, so its count starts again.
    assert.equal(screen('another.p0.example.test'), undefined);
  });
});

describe('the dnsTunnelDetection option', () => {
  it('defaults to audit and takes off, audit or enforce from --dns-tunnel-detection', () => {
    assert.equal(DEFAULTS.dnsTunnelDetection, 'audit');
    assert.equal(parseConfig({}).dnsTunnelDetection, 'audit');
    for (const mode of ['off', 'audit', 'enforce']) assert.equal(parseConfig(parseRunFlags(['--dns-tunnel-detection', mode], '/')).dnsTunnelDetection, mode);
    assert.throws(() => parseConfig({ dnsTunnelDetection: 'block' }), (err: { code?: string; issues?: { path: string }[] }) => {
      assert.equal(err.code, 'CONFIG_INVALID');
      assert.deepEqual(err.issues?.map((i) => i.path), ['dnsTunnelDetection']);
      return true;
    });
  });
});
