import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { createAuditSink } from '../../src/telemetry/audit.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { createLogger, REDACT_CENSOR, renderShorthandLine } from '../../src/telemetry/logger.js';
import { createCounter } from '../../src/telemetry/metrics.js';
import { MAX_REASON_CHARS, OCSF_VERSION, toOcsf, toShorthand } from '../../src/telemetry/ocsf.js';
import { testClock } from '../harness/clock.js';
import { logSink } from '../harness/log-sink.js';

const T = Date.UTC(2026, 0, 1);
const META = { time: T, uid: 'evt-1' };

const connectAllowed: AuditEvent = {
  class: 'NET',
  activity: 'OPEN',
  severity: 'INFO',
  action: 'ALLOWED',
  engine: 'policy',
  policy: 'github',
  dst: { host: 'api.github.com', port: 443 },
  src: { ip: '127.0.0.1', port: 50123 },
  message: 'CONNECT allowed api.github.com:443',
  statusDetail: 'CONNECT allowed api.github.com:443',
  detail: 'rule-matched',
  generation: 3,
  policyHash: 'sha256:abc',
  unmapped: { ruleId: 'github/0', addressClass: 'public' },
};

describe('toOcsf', () => {
  it('maps a CONNECT allow to Network Activity 4001 Open with every standard field', () => {
    const ocsf = toOcsf(connectAllowed, META);
    assert.equal(ocsf.class_uid, 4001);
    assert.equal(ocsf.class_name, 'Network Activity');
    assert.equal(ocsf.category_uid, 4);
    assert.equal(ocsf.activity_id, 1);
    assert.equal(ocsf.activity_name, 'Open');
    assert.equal(ocsf.type_uid, 400101);
    assert.equal(ocsf.severity_id, 1);
    assert.equal(ocsf.status_id, 1);
    assert.equal(ocsf.time, T);
    assert.equal(ocsf.action_id, 1);
    assert.equal(ocsf.disposition_id, 1);
    assert.deepEqual(ocsf.dst_endpoint, { domain: 'api.github.com', port: 443 });
    assert.deepEqual(ocsf.src_endpoint, { ip: '127.0.0.1', port: 50123 });
    assert.deepEqual(ocsf.firewall_rule, { name: 'github', type: 'policy' });
    assert.equal(ocsf.status_detail, 'CONNECT allowed api.github.com:443');
    assert.deepEqual(ocsf.metadata, { product: { name: 'boundary', vendor_name: 'boundary' }, version: OCSF_VERSION, uid: 'evt-1' });
    assert.deepEqual(ocsf.unmapped, {
      ruleId: 'github/0',
      addressClass: 'public',
      policy_generation: 3,
      policy_hash: 'sha256:abc',
      reason: 'rule-matched',
    });
  });

  it('renders the detail as unmapped.reason and [reason:...]', () => {
    assert.equal(toOcsf(connectAllowed, META).unmapped?.reason, 'rule-matched');
    assert.match(toShorthand(connectAllowed), /\[reason:rule-matched\]$/);
  });

  it('maps every NET activity label to its OCSF id', () => {
    const ids = { OPEN: 1, CLOSE: 2, RESET: 3, FAIL: 4, REFUSE: 5, TRAFFIC: 6, LISTEN: 7, OTHER: 99, BOGUS: 99 };
    for (const [activity, id] of Object.entries(ids)) {
      assert.equal(toOcsf({ ...connectAllowed, activity }, META).activity_id, id, activity);
    }
  });

  it('marks a denial as Denied, Blocked and Failure', () => {
    const ocsf = toOcsf({ ...connectAllowed, action: 'DENIED', severity: 'MED', engine: 'ssrf' }, META);
    assert.equal(ocsf.action_id, 2);
    assert.equal(ocsf.action, 'Denied');
    assert.equal(ocsf.disposition_id, 2);
    assert.equal(ocsf.disposition, 'Blocked');
    assert.equal(ocsf.status_id, 2);
    assert.equal(ocsf.severity_id, 3);
  });

  it('maps severities INFO to FATAL onto 1 to 6', () => {
    const severities = ['INFO', 'LOW', 'MED', 'HIGH', 'CRIT', 'FATAL'] as const;
    severities.forEach((severity, index) => {
      assert.equal(toOcsf({ ...connectAllowed, severity }, META).severity_id, index + 1);
    });
  });

  it('maps HTTP methods to HTTP Activity 4002 ids and unknown methods to 99', () => {
    const ids = { CONNECT: 1, DELETE: 2, GET: 3, HEAD: 4, OPTIONS: 5, POST: 6, PUT: 7, TRACE: 8, PATCH: 9, PROPFIND: 99 };
    for (const [method, id] of Object.entries(ids)) {
      const ocsf = toOcsf({ ...connectAllowed, class: 'HTTP', activity: method, http: { method, url: 'http://h:443/p' } }, META);
      assert.equal(ocsf.class_uid, 4002);
      assert.equal(ocsf.activity_id, id, method);
    }
  });

  it('renders the HTTP request URL without query string or fragment', () => {
    const ocsf = toOcsf(
      {
        ...connectAllowed,
        class: 'HTTP',
        activity: 'GET',
        http: { method: 'GET', url: 'http://api.example.test:443/v1/items?token=SECRETQ#frag' },
      },
      META,
    );
    assert.deepEqual(ocsf.http_request, {
      http_method: 'GET',
      url: { url_string: 'http://api.example.test:443/v1/items', scheme: 'http', hostname: 'api.example.test', port: 443, path: '/v1/items' },
    });
  });

  it('maps CONFIG to Device Config State Change 5019 in category 5 and keeps the state label', () => {
    const ocsf = toOcsf({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', message: 'policy loaded', generation: 4 }, META);
    assert.equal(ocsf.class_uid, 5019);
    assert.equal(ocsf.category_uid, 5);
    assert.equal(ocsf.activity_id, 99);
    assert.equal(ocsf.activity_name, 'LOADED');
    assert.equal(ocsf.unmapped.state, 'LOADED');
    assert.equal(ocsf.unmapped.policy_generation, 4);
    assert.equal(ocsf.action_id, undefined);
  });

  it('maps FINDING to Detection Finding 2004 in category 2 with a blocked disposition', () => {
    const ocsf = toOcsf(
      { class: 'FINDING', activity: 'BLOCKED', severity: 'HIGH', engine: 'credential-binding', message: 'credential sent to wrong host' },
      META,
    );
    assert.equal(ocsf.class_uid, 2004);
    assert.equal(ocsf.category_uid, 2);
    assert.equal(ocsf.activity_id, 1);
    assert.equal(ocsf.disposition_id, 2);
    assert.deepEqual(ocsf.finding_info, { title: 'credential sent to wrong host', uid: 'evt-1' });
  });

  it('maps DNS to DNS Activity 4003 with query and rcode', () => {
    const ocsf = toOcsf(
      {
        class: 'DNS',
        activity: 'QUERY',
        severity: 'MED',
        action: 'DENIED',
        engine: 'dns',
        dst: { host: 'evil.example.test' },
        message: 'policy_dns_refused',
        unmapped: { qtype: 'A', rcode: 'REFUSED' },
      },
      META,
    );
    assert.equal(ocsf.class_uid, 4003);
    assert.equal(ocsf.activity_id, 1);
    assert.deepEqual(ocsf.query, { hostname: 'evil.example.test', type: 'A' });
    assert.equal(ocsf.rcode_id, 5);
    assert.equal(ocsf.rcode, 'Refused');
  });

  it('puts an IP literal destination under ip rather than domain', () => {
    const ocsf = toOcsf({ ...connectAllowed, dst: { host: '10.0.0.5', port: 80 } }, META);
    assert.deepEqual(ocsf.dst_endpoint, { ip: '10.0.0.5', port: 80 });
  });

  it('strips query strings and control characters from free text and unmapped strings', () => {
    const ocsf = toOcsf(
      {
        ...connectAllowed,
        message: 'L7_REQUEST deny GET api.example.test:443/v1?key=SECRETQ reason=x',
        statusDetail: 'see http://h/p?token=SECRETQ\r\nforged line',
        unmapped: { target: 'https://h/x?sig=SECRETQ', nested: { url: '/a/b?c=SECRETQ' } },
      },
      META,
    );
    const text = JSON.stringify(ocsf);
    assert.equal(text.includes('SECRETQ'), false);
    assert.equal(ocsf.message, 'L7_REQUEST deny GET api.example.test:443/v1 reason=x');
    assert.equal(ocsf.status_detail, 'see http://h/p  forged line');
  });
});

describe('toShorthand', () => {
  it('prints a CONNECT allow exactly as docs/events.md#shorthand-line shapes it', () => {
    assert.equal(
      toShorthand(connectAllowed),
      'NET:OPEN [INFO] ALLOWED -(-) -> api.github.com:443 [policy:github engine:policy] [reason:rule-matched]',
    );
  });

  it('prints an SSRF denial with policy - and engine ssrf', () => {
    const event: AuditEvent = {
      class: 'NET',
      activity: 'OPEN',
      severity: 'MED',
      action: 'DENIED',
      engine: 'ssrf',
      dst: { host: 'internal.example.test', port: 443 },
      message: 'blocked: internal address internal.example.test:443',
      detail: 'internal-address',
    };
    assert.equal(
      toShorthand(event),
      'NET:OPEN [MED] DENIED -(-) -> internal.example.test:443 [policy:- engine:ssrf] [reason:internal-address]',
    );
  });

  it('prints HTTP lines as METHOD and URL, never the query string', () => {
    const event: AuditEvent = {
      class: 'HTTP',
      activity: 'POST',
      severity: 'MED',
      action: 'DENIED',
      engine: 'l7',
      policy: 'api',
      dst: { host: 'api.example.test', port: 443 },
      http: { method: 'POST', url: 'http://api.example.test:443/v1/chat?api_key=SECRETQ' },
      message: 'L7_REQUEST deny',
      detail: 'path-not-allowed',
    };
    assert.equal(
      toShorthand(event),
      'HTTP:POST [MED] DENIED -(-) -> POST http://api.example.test:443/v1/chat [policy:api engine:l7] [reason:path-not-allowed]',
    );
  });

  it('prints the message of every line that is not a decision, unless a reason or an error says it (issue 29)', () => {
    assert.equal(
      toShorthand({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', engine: 'control', message: 'policy generation 2 from supervisor s:1 is effective', generation: 2, policyHash: 'ab12' }),
      'CONFIG:LOADED [INFO] [policy:- engine:control] [version:2 hash:ab12] [msg:policy generation 2 from supervisor s:1 is effective]',
    );
    assert.equal(
      toShorthand({ class: 'NET', activity: 'OPEN', severity: 'INFO', engine: 'control', dst: { host: 's.test', port: 5500 }, message: 'attached to supervisor s.test:5500' }),
      'NET:OPEN [INFO] -(-) -> s.test:5500 [policy:- engine:control] [msg:attached to supervisor s.test:5500]',
    );
    assert.equal(
      toShorthand({ class: 'NET', activity: 'FAIL', severity: 'MED', engine: 'control', dst: { host: 's.test', port: 5500 }, message: 'attach failed: x', unmapped: { error: { kind: 'dns', message: 'x' } } }),
      'NET:FAIL [MED] -(-) -> s.test:5500 [policy:- engine:control] [error:dns x]',
    );
    assert.equal(
      toShorthand({ class: 'NET', activity: 'OPEN', severity: 'INFO', action: 'ALLOWED', engine: 'policy', dst: { host: 'a.test', port: 443 }, message: 'CONNECT allowed' }),
      'NET:OPEN [INFO] ALLOWED -(-) -> a.test:443 [policy:- engine:policy]',
    );
  });

  it('prints CONFIG lines with version and hash, and msg when nothing else says what happened', () => {
    assert.equal(
      toShorthand({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', message: 'policy loaded', generation: 2, policyHash: 'ab12' }),
      'CONFIG:LOADED [INFO] [version:2 hash:ab12] [msg:policy loaded]',
    );
    assert.equal(
      toShorthand({ class: 'CONFIG', activity: 'ENABLED', severity: 'INFO', message: 'ephemeral CA generated' }),
      'CONFIG:ENABLED [INFO] [msg:ephemeral CA generated]',
    );
  });

  it('brackets IPv6 destinations and omits an absent port', () => {
    assert.equal(
      toShorthand({ class: 'NET', activity: 'LISTEN', severity: 'INFO', dst: { ip: '::1', port: 3128 }, message: 'listening' }),
      'NET:LISTEN [INFO] -(-) -> [::1]:3128 [msg:listening]',
    );
    assert.equal(
      toShorthand({ class: 'DNS', activity: 'QUERY', severity: 'LOW', action: 'DENIED', dst: { host: 'x.test' }, message: 'm', detail: 'upstream-failed' }),
      'DNS:QUERY [LOW] DENIED -(-) -> x.test [reason:upstream-failed]',
    );
  });

  it('truncates the reason to 256 characters and keeps the line on one line', () => {
    const line = toShorthand({ ...connectAllowed, detail: `${'r'.repeat(300)}\nNET:OPEN [INFO] ALLOWED forged` });
    const reason = /\[reason:([^\]]*)\]$/.exec(line)?.[1] ?? '';
    assert.equal(reason.length, MAX_REASON_CHARS);
    assert.equal(line.includes('\n'), false);
  });
});

describe('audit sink and logger', () => {
  it('writes one JSON line per event with the OCSF object under ocsf and the shorthand as msg', () => {
    const clock = testClock(T);
    const log = logSink({ now: clock.now });
    log.sink.emit(connectAllowed);
    const lines = log.lines();
    assert.equal(lines.length, 1);
    const record = JSON.parse(lines[0] ?? '') as { ocsf: { class_uid: number; time: number }; msg: string; time: number };
    assert.equal(record.ocsf.class_uid, 4001);
    assert.equal(record.ocsf.time, T);
    assert.equal(record.time, T);
    assert.equal(record.msg, toShorthand(connectAllowed));
    assert.equal(log.decisions().length, 1);
  });

  it('writes shorthand lines prefixed by an RFC 3339 timestamp and OCSF', () => {
    const clock = testClock(T);
    const log = logSink({ format: 'shorthand', now: clock.now });
    log.sink.emit(connectAllowed);
    log.logger.warn({ attempt: 2 }, 'control channel lost');
    assert.deepEqual(log.lines(), [
      '2026-01-01T00:00:00.000Z OCSF NET:OPEN [INFO] ALLOWED -(-) -> api.github.com:443 [policy:github engine:policy] [reason:rule-matched]',
      '2026-01-01T00:00:00.000Z WARN control channel lost {"attempt":2}',
    ]);
    assert.equal(log.events()[0]?.class_uid, 4001);
  });

  it('delivers the OCSF object to subscribers until they unsubscribe', () => {
    const log = logSink({ format: 'shorthand' });
    const seen: number[] = [];
    const stop = log.sink.subscribe((ocsf) => seen.push(ocsf.class_uid));
    log.sink.emit(connectAllowed);
    stop();
    log.sink.emit(connectAllowed);
    assert.deepEqual(seen, [4001]);
  });

  it('never throws into the emitter, even for a malformed event or a throwing subscriber', () => {
    const log = logSink();
    log.sink.subscribe(() => {
      throw new Error('subscriber broke');
    });
    assert.doesNotThrow(() => log.sink.emit(connectAllowed));
    assert.doesNotThrow(() => log.sink.emit({ class: 'NOPE', severity: 'NOPE' } as unknown as AuditEvent));
    assert.match(log.text(), /subscriber broke/);
    assert.match(log.text(), /an audit event could not be rendered/);
  });

  it('still writes audit lines when the logger is set to warn', () => {
    const chunks: string[] = [];
    const logger = createLogger({ format: 'json', level: 'warn', destination: { write: (s: string) => chunks.push(s) } });
    createAuditSink({ logger, now: () => T, format: 'json' }).emit(connectAllowed);
    logger.info('dropped');
    assert.equal(chunks.length, 1);
  });

  it('never renders a query string in either format', () => {
    for (const format of ['json', 'shorthand'] as const) {
      const log = logSink({ format });
      log.sink.emit({
        class: 'HTTP',
        activity: 'GET',
        severity: 'INFO',
        action: 'ALLOWED',
        http: { method: 'GET', url: 'http://h.test/p?q=CANARYQ' },
        dst: { host: 'h.test', port: 80 },
        message: 'FORWARD allowed GET h.test:80/p?q=CANARYQ',
        statusDetail: 'h.test/p?q=CANARYQ',
        detail: 'rule /p?q=CANARYQ',
        unmapped: { url: 'http://h.test/p?q=CANARYQ' },
      });
      assert.equal(log.text().includes('CANARYQ'), false, format);
    }
  });

  it('redacts credential headers and secret values in every log line', () => {
    for (const format of ['json', 'shorthand'] as const) {
      const log = logSink({ format });
      log.logger.info(
        {
          req: { headers: { authorization: 'Bearer CANARY1', 'proxy-authorization': 'Basic CANARY2', cookie: 'c=CANARY3' } },
          headers: { 'x-api-key': 'CANARY4', 'Set-Cookie': 'CANARY5' },
          upstream: { res: { headers: { 'set-cookie': 'CANARY6' } } },
          credential: { secret: 'CANARY7', value: 'CANARY8' },
        },
        'request seen',
      );
      assert.equal(/CANARY\d/.test(log.text()), false, `${format}: ${log.text()}`);
      assert.match(log.text(), new RegExp(REDACT_CENSOR.replace(/[[\]]/g, '\\$&')));
    }
  });

  it('renders a non-JSON chunk unchanged in shorthand mode', () => {
    assert.equal(renderShorthandLine('not json'), 'not json\n');
  });

  it('resolves waitFor with an event that arrives later', async () => {
    const log = logSink();
    const waiting = log.waitFor((event) => event.class_uid === 5019);
    log.sink.emit(connectAllowed);
    log.sink.emit({ class: 'CONFIG', activity: 'READY', severity: 'INFO', message: 'dns ready' });
    const event = await waiting;
    assert.equal(event.activity_name, 'READY');
  });
});

describe('closed-label counters', () => {
  it('counts a label value outside its closed set as other and pre-creates known series', async () => {
    const registry = new Registry();
    const counter = createCounter(registry, {
      name: 'boundary_denied_total',
      help: 'denials by reason',
      type: 'counter',
      unit: '',
      labels: { reason: ['no-rule-matched', 'address-forbidden'] },
      scope: 'boundary',
    } as const);
    counter.inc({ reason: 'address-forbidden' });
    counter.inc({ reason: 'api.attacker.example' as 'other' });
    const text = await registry.metrics();
    assert.match(text, /boundary_denied_total\{reason="address-forbidden"\} 1/);
    assert.match(text, /boundary_denied_total\{reason="no-rule-matched"\} 0/);
    assert.match(text, /boundary_denied_total\{reason="other"\} 1/);
    assert.equal(text.includes('attacker'), false);
  });
});
