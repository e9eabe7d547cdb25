import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createDenialRing, DENIAL_RING_SIZE, denialFromEvent, MAX_DENIALS_PER_ANSWER, recordingDenials } from '../../src/telemetry/denials.js';
import { MAX_REPLAY_QUERY_KEYS, replayFromUnmapped, replayQueryKeys, replayTarget } from '../../src/telemetry/replay.js';
import type { AuditEvent } from '../../src/telemetry/event.js';

const DENY: AuditEvent = {
  class: 'HTTP',
  activity: 'GET',
  severity: 'MED',
  action: 'DENIED',
  message: 'x',
  unmapped: { adapter: 'forward', verdict: 'deny', reason_code: 'no-rule-matched', replay: { scheme: 'http', method: 'GET', host: 'a.test', port: 80, path: '/p', query_keys: ['k'] } },
};

describe('denial ring and replay fields', () => {
  it('keeps the newest DENIAL_RING_SIZE denials and caps an answer at MAX_DENIALS_PER_ANSWER', () => {
    const ring = createDenialRing();
    for (let i = 0; i < DENIAL_RING_SIZE + 10; i++) ring.record({ ...(denialFromEvent(DENY, i) as NonNullable<ReturnType<typeof denialFromEvent>>) });
    assert.equal(ring.total(), DENIAL_RING_SIZE + 10);
    const recent = ring.recent(1_000);
    assert.equal(recent.length, MAX_DENIALS_PER_ANSWER);
    assert.equal(recent[0]?.time, new Date(DENIAL_RING_SIZE + 9).toISOString());
  });

  it('records only denying decision events', () => {
    assert.equal(denialFromEvent({ ...DENY, unmapped: { ...DENY.unmapped, verdict: 'allow' } }, 0), undefined);
    assert.equal(denialFromEvent({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', message: 'm' }, 0), undefined);
    assert.equal(denialFromEvent({ class: 'DNS', activity: 'QUERY', severity: 'INFO', action: 'DENIED', message: 'm', dst: { host: 'n.test' }, unmapped: { reason_code: 'no-endpoint-matched', qtype: 'A' } }, 0)?.adapter, 'dns');
  });

  it('passes every event on, records denials with the time they were seen, and reads the clock for denials only', () => {
    const passed: AuditEvent[] = [];
    const ring = createDenialRing();
    let reads = 0;
    const sink = recordingDenials({ emit: (event) => passed.push(event) }, ring, () => {
      reads += 1;
      return 1_000 * reads;
    });
    const allow: AuditEvent = { ...DENY, action: 'ALLOWED', unmapped: { ...DENY.unmapped, verdict: 'allow' } };
    sink.emit(allow);
    sink.emit({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', message: 'm' });
    assert.equal(reads, 0);
    sink.emit(DENY);
    assert.equal(reads, 1);
    assert.equal(passed.length, 3);
    assert.equal(ring.total(), 1);
    assert.equal(ring.recent(1)[0]?.time, new Date(1_000).toISOString());
  });

  it('keeps query keys once each, bounded, and replays them with empty values', () => {
    const many = Array.from({ length: MAX_REPLAY_QUERY_KEYS + 5 }, (_, i) => `k${i}=v`).join('&');
    const keys = replayQueryKeys(`a=1&a=2&${many}`, decodeURIComponent, (s) => s);
    assert.equal(keys.keys.length, MAX_REPLAY_QUERY_KEYS);
    assert.equal(keys.truncated, true);
    const fields = replayFromUnmapped(DENY.unmapped);
    assert.deepEqual(fields && replayTarget(fields), { target: 'http://a.test:80/p?k=', method: 'GET' });
    assert.deepEqual(replayTarget({ host: '::1', port: 443 }), { target: '[::1]:443' });
    assert.equal(replayFromUnmapped({ replay: { host: 'a.test', port: 0 } }), undefined);
  });
});
