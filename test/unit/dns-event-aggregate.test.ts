import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createDnsEventAggregator, DNS_EVENT_INTERVAL_MS } from '../../src/dns/event-aggregate.js';
import { prepareQueryEvents, stamp } from '../../src/dns/events.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { testClock, testTimers } from '../harness/clock.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';

const policy = stubPolicy([{ host: 'api.example.test', ports: [443] }]);
const query = (name: string) => ({ id: 1, name, type: 1, qclass: 1, rd: true, edns: undefined }) as Parameters<typeof prepareQueryEvents>[0];

/** The events policy DNS writes for one refused query of `name`, prepared once as the handler's cache does. */
function refusedEvents(name: string) {
  const outcome = {
    rcode: 'NXDOMAIN',
    answers: [],
    ttlSeconds: undefined,
    denied: true,
    cacheUntil: Number.POSITIVE_INFINITY,
    statusDetail: 'policy_dns_ineligible',
    reason: 'no-endpoint-matched',
    refusal: { severity: 'MED', message: `Policy DNS refused: ${name}`, unmapped: { reason_code: 'no-endpoint-matched' } },
  } as const;
  const prepared = prepareQueryEvents(query(name), policy, outcome);
  return (port: number): AuditEvent[] => [stamp(prepared.refuse!, { ip: '127.0.0.1', port }), stamp(prepared.dns.udp, { ip: '127.0.0.1', port })];
}

function setup(maxKeys?: number) {
  const clock = testClock();
  const timers = testTimers(clock);
  const sink = collectingSink();
  const aggregator = createDnsEventAggregator({ sink, now: clock.now, timers, ...(maxKeys === undefined ? {} : { maxKeys }) });
  return { clock, timers, sink, aggregator };
}

const dnsEvents = (events: readonly AuditEvent[]) => events.filter((e) => e.class === 'DNS');

describe('DNS event aggregation', () => {
  it('writes 10,000 identical refused queries as one event at once and one aggregate of 9,999 after the interval', () => {
    const { clock, timers, sink, aggregator } = setup();
    const events = refusedEvents('blocked.example.test');
    const started = clock.now();
    for (let i = 0; i < 10_000; i++) for (const event of events(40_000 + (i % 1_000))) aggregator.sink.emit(event);
    assert.equal(dnsEvents(sink.events).length, 1, 'the first occurrence at once');
    assert.equal(sink.events.length, 2, 'and its NET:REFUSE, nothing more yet');
    assert.equal(sink.events[0]?.action, 'DENIED');
    timers.advance(DNS_EVENT_INTERVAL_MS - 1);
    assert.equal(sink.events.length, 2, 'nothing before the interval ends');
    timers.advance(1);
    const dns = dnsEvents(sink.events);
    assert.equal(dns.length, 2);
    assert.equal(dns[1]?.unmapped?.count, 9_999);
    assert.equal(dns[1]?.action, 'DENIED', 'the aggregate is a denial too');
    assert.equal(dns[1]?.unmapped?.reason_code, 'no-endpoint-matched');
    assert.equal(dns[1]?.src, undefined, 'repeats come from many source ports');
    assert.deepEqual([dns[1]?.unmapped?.start_time, dns[1]?.unmapped?.end_time], [started, started + DNS_EVENT_INTERVAL_MS]);
    assert.equal(dns[1]?.unmapped?.interval_ms, DNS_EVENT_INTERVAL_MS);
    const refuse = sink.events.filter((e) => e.class === 'NET');
    assert.deepEqual(refuse.map((e) => e.unmapped?.count), [undefined, 9_999]);
  });

  it('keeps a busy question to one event per interval and makes its next occurrence after a quiet interval a first again', () => {
    const { timers, sink, aggregator } = setup();
    const events = refusedEvents('loop.example.test');
    const ask = (n: number) => {
      for (let i = 0; i < n; i++) aggregator.sink.emit(events(50_000)[1]!);
    };
    ask(5);
    timers.advance(DNS_EVENT_INTERVAL_MS);
    ask(3);
    timers.advance(DNS_EVENT_INTERVAL_MS);
    assert.deepEqual(sink.events.map((e) => e.unmapped?.count), [undefined, 4, 3]);
    timers.advance(DNS_EVENT_INTERVAL_MS); // quiet: forgotten
    assert.equal(timers.pending, 0, 'no timer runs while nothing is counted');
    ask(1);
    assert.deepEqual(sink.events.map((e) => e.unmapped?.count), [undefined, 4, 3, undefined]);
  });

  it('keeps questions apart by name, rcode and decision, and passes other events straight through', () => {
    const { sink, aggregator } = setup();
    const a = refusedEvents('a.example.test')(1)[1]!;
    const b = refusedEvents('b.example.test')(1)[1]!;
    const published: AuditEvent = { class: 'CONFIG', activity: 'PUBLISHED', severity: 'INFO', engine: 'dns', message: 'mapped' };
    for (const event of [a, b, a, b, published, published]) aggregator.sink.emit(event);
    assert.deepEqual(
      sink.events.map((e) => `${e.class}:${e.dst?.host ?? '-'}`),
      ['DNS:a.example.test', 'DNS:b.example.test', 'CONFIG:-', 'CONFIG:-'],
    );
  });

  it('passes through a per-query class of event that names no asker: a report that already carries its own count', () => {
    const { sink, aggregator } = setup();
    const report: AuditEvent = {
      class: 'NET',
      activity: 'REFUSE',
      severity: 'MED',
      action: 'DENIED',
      engine: 'dns',
      statusDetail: 'policy_dns_rate_limited',
      message: 'Policy DNS rate limit on refused names: 40 queries answered REFUSED',
      unmapped: { limit: 'refused', queries: 40, rcode: 'REFUSED' },
    };
    aggregator.sink.emit(report);
    aggregator.sink.emit({ ...report, unmapped: { ...report.unmapped, queries: 7 } });
    aggregator.close();
    assert.deepEqual(sink.events.map((e) => [e.unmapped?.queries, e.unmapped?.count]), [[40, undefined], [7, undefined]]);
  });

  it('writes pending counts on close, and passes events straight through after it', () => {
    const { timers, sink, aggregator } = setup();
    const event = refusedEvents('c.example.test')(1)[1]!;
    for (let i = 0; i < 3; i++) aggregator.sink.emit(event);
    aggregator.close();
    aggregator.close();
    assert.deepEqual(sink.events.map((e) => e.unmapped?.count), [undefined, 2]);
    assert.equal(timers.pending, 0);
    aggregator.sink.emit(event);
    assert.equal(sink.events.length, 3);
  });

  it('flushes early instead of holding more than maxKeys questions, losing no occurrence', () => {
    const { sink, aggregator } = setup(4);
    let total = 0;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 10; i++) {
        aggregator.sink.emit(refusedEvents(`n${i}.example.test`)(1)[1]!);
        total++;
      }
    }
    aggregator.close();
    const written = sink.events.reduce((n, e) => n + (typeof e.unmapped?.count === 'number' ? e.unmapped.count : 1), 0);
    assert.equal(written, total);
  });
});
