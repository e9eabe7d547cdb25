// The lookup gate (src/net/lookup-gate.ts) without sockets, on a test clock: what is a new name, what is charged and
// screened, what is refused, and what is reported when (docs/dns.md#the-lookup-gate).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLookupGate, KNOWN_NAME_MS, type LookupAsk, type LookupEndpoint, type LookupReport, wildcardBase } from '../../src/net/lookup-gate.js';
import { LIMIT_REPORT_INTERVAL_MS } from '../../src/net/lookup-tally.js';
import { createCachingResolver } from '../../src/net/resolver-cache.js';
import type { Resolver } from '../../src/net/resolver.js';
import type { TunnelDetectionMode } from '../../src/net/tunnel-detect.js';
import { compileHostPattern } from '../../src/policy/match.js';
import { testClock } from '../harness/clock.js';
import { fakeResolver } from '../harness/fake-resolver.js';

const WILD: LookupEndpoint = { host: '*.t.example.test', hostKind: 'wildcard' };
const EXACT: LookupEndpoint = { host: 'api.t.example.test', hostKind: 'exact' };
const HEX = 'a3f9c0e17b5d2f80a4c6e91b37d5f02a3f9c0e17b5d2f80a';

function gateWith(options: { resolver?: Resolver; mode?: TunnelDetectionMode; burst?: number } = {}) {
  const clock = testClock();
  const resolver = options.resolver ?? fakeResolver();
  const reports: LookupReport[] = [];
  const gate = createLookupGate({
    resolver,
    now: clock.now,
    report: (r) => reports.push(r),
    tunnelDetection: options.mode ?? 'audit',
    newNames: { perSecond: 2, burst: options.burst ?? 3 },
  });
  /** 'resolved' when the name went to the resolver, else the refusal kind. */
  const ask = (name: string, ask: Partial<LookupAsk> = {}): string => {
    const out = gate.lookup(name, { endpoints: [WILD], via: 'dns', ...ask });
    return 'refused' in out ? out.refused : 'resolved';
  };
  return { clock, gate, reports, ask };
}

describe('createLookupGate', () => {
  it('charges new names under a wildcard to one budget and refuses the rest, with the wait until the next token', () => {
    const { gate, ask, clock } = gateWith();
    assert.deepEqual(['a', 'b', 'c', 'd'].map((n) => ask(`${n}.t.example.test`)), ['resolved', 'resolved', 'resolved', 'rate-limited']);
    const refusal = gate.lookup('e.t.example.test', { endpoints: [WILD], via: 'proxy' });
    assert.ok('refused' in refusal);
    assert.equal(refusal.retryAfterMs, 500);
    assert.equal(refusal.base, 't.example.test');
    clock.advance(500);
    assert.equal(ask('e.t.example.test', { via: 'proxy' }), 'resolved');
    assert.equal(gate.stats().rateLimited, 2);
  });

  it('never screens or charges a name an endpoint lists exactly, nor one let through lately, whichever adapter asks', () => {
    const { gate, ask, clock } = gateWith({ burst: 1 });
    assert.equal(ask('a.t.example.test', { via: 'dns' }), 'resolved');
    assert.equal(ask('a.t.example.test', { via: 'proxy' }), 'resolved', 'known: not new to the proxy');
    assert.equal(ask('b.t.example.test'), 'rate-limited');
    assert.equal(ask(`${HEX}.t.example.test`, { endpoints: [WILD, EXACT] }), 'resolved', 'an exact endpoint among them');
    assert.equal(gate.stats().tunnelFlagged, 0, 'and it was not screened');
    clock.advance(KNOWN_NAME_MS);
    // After KNOWN_NAME_MS the bucket is full again (its burst of 1), and `a` is new again.
    assert.equal(ask('a.t.example.test'), 'resolved');
    assert.equal(ask('c.t.example.test'), 'rate-limited');
  });

  it('takes a fresh answer the resolver holds as known', async () => {
    const clock = testClock();
    const cache = createCachingResolver(fakeResolver({ 'a.t.example.test': ['192.0.2.1'] }), { now: clock.now });
    await cache.resolve('a.t.example.test', 4);
    const gate = createLookupGate({ resolver: cache, now: clock.now, report: () => {}, newNames: { perSecond: 1, burst: 1 } });
    assert.deepEqual(gate.cached('a.t.example.test'), { ok: true, addresses: ['192.0.2.1'], ttlSeconds: 30 });
    assert.ok(!('refused' in gate.lookup('a.t.example.test', { endpoints: [WILD], via: 'proxy' })));
    assert.ok(!('refused' in gate.lookup('b.t.example.test', { endpoints: [WILD], via: 'proxy' })), 'the one token is still there');
  });

  it('charges a name no endpoint names, like a hostless one', () => {
    const { ask } = gateWith({ burst: 1 });
    assert.equal(ask('a.example.test', { endpoints: [] }), 'resolved');
    assert.equal(ask('b.example.test', { endpoints: [] }), 'rate-limited');
  });

  it('reports over-limit names at once, then once per interval with the count by adapter; flush writes the rest', () => {
    const { gate, ask, clock, reports } = gateWith({ burst: 0, mode: 'off' });
    ask('a.t.example.test', { via: 'proxy' });
    assert.deepEqual(reports, [{ kind: 'rate-limited', names: 1, byVia: { dns: 0, proxy: 1 }, name: 'a.t.example.test', limits: { perSecond: 2, burst: 0 } }]);
    ask('b.t.example.test', { via: 'dns' });
    ask('c.t.example.test', { via: 'proxy' });
    gate.tick();
    assert.equal(reports.length, 1, 'not due yet');
    clock.advance(LIMIT_REPORT_INTERVAL_MS);
    // The clock moved: the bucket refilled, so nothing more is refused; the tick writes what was held back.
    gate.tick();
    assert.deepEqual(reports[1], { kind: 'rate-limited', names: 2, byVia: { dns: 1, proxy: 1 }, name: undefined, limits: { perSecond: 2, burst: 0 } });
    gate.flush();
    assert.equal(reports.length, 2, 'nothing pending');
  });

  it('audit: flags a tunnelling-shaped name, reports it, and still resolves it', () => {
    const { gate, ask, reports } = gateWith();
    assert.equal(ask(`${HEX}.t.example.test`, { via: 'proxy' }), 'resolved');
    assert.equal(ask(`${HEX}1.t.example.test`), 'resolved');
    assert.deepEqual(reports, [
      { kind: 'tunnel-suspected', names: 1, byVia: { dns: 0, proxy: 1 }, name: `${HEX}.t.example.test`, base: 't.example.test', signals: ['hex-encoded'], mode: 'audit' },
    ]);
    gate.flush();
    assert.equal(reports.length, 2);
    assert.equal(gate.stats().tunnelFlagged, 2);
  });

  it('enforce: refuses a tunnelling-shaped name with its signals and does not charge it; off: no screen at all', () => {
    const enforce = gateWith({ mode: 'enforce', burst: 1 });
    const out = enforce.gate.lookup(`${HEX}.t.example.test`, { endpoints: [WILD], via: 'proxy' });
    assert.ok('refused' in out);
    assert.equal(out.refused, 'tunnel-suspected');
    assert.deepEqual(out.signals, ['hex-encoded']);
    assert.equal(enforce.ask('plain.t.example.test'), 'resolved', 'the refused name took no token');
    assert.equal(enforce.gate.stats().tunnelRefused, 1);
    const off = gateWith({ mode: 'off' });
    assert.equal(off.ask(`${HEX}.t.example.test`), 'resolved');
    assert.deepEqual(off.reports, []);
  });
});

describe('wildcardBase', () => {
  it('is the fixed suffix policy compiles for the pattern', () => {
    for (const pattern of ['*.example.com', '**.example.com', '*.t.example.com', 'api-*.example.com', 'a.*.example.com', '*', 'svc.*']) {
      assert.equal(wildcardBase(pattern), compileHostPattern(pattern, 'wildcard').suffix, pattern);
    }
  });
});
