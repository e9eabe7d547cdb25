import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { createControlApplier } from '../../src/control/apply.js';
import { ControlFailure } from '../../src/control/dial.js';
import { attachFailedEvent, sessionEndedEvent } from '../../src/control/failure-events.js';
import { CONTROL_ERROR_KINDS, type ControlErrorKind } from '../../src/control/messages.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, emptyPolicy } from '../../src/policy/store.js';
import { auditLevel, createAuditSink } from '../../src/telemetry/audit.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { createLogger, type LinePart, type LogFormat } from '../../src/telemetry/logger.js';
import { joinParts } from '../../src/telemetry/log-destination.js';
import { cleanText, toOcsf, toShorthand } from '../../src/telemetry/ocsf.js';
import { logSink } from '../harness/log-sink.js';

const T = Date.UTC(2026, 0, 1);
const ADDRESS = { host: '127.0.0.1', port: 25_500 };
const SUPERVISOR = '127.0.0.1:25500';
const WARN = 40;
const ERROR = 50;

/** A cause of the shape client.ts and dial.ts write for each kind. */
const CAUSES: Readonly<Record<ControlErrorKind, string>> = {
  dns: 'cannot resolve supervisor.invalid: ENOTFOUND (asked 10.96.0.10:53)',
  'connect-refused': 'connect ECONNREFUSED 127.0.0.1:25500',
  'connect-timeout': 'no TCP answer from 127.0.0.1:25500 within 10000 ms',
  tls: 'supervisor certificate did not verify against the control CA: UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'tls-auth': 'supervisor rejected our client certificate: ERR_SSL_TLSV13_ALERT_CERTIFICATE_EXPIRED',
  http2: 'supervisor sent GOAWAY (code 2)',
  'refused-by-supervisor': 'unknown-sandbox: no policy for sandbox sb-1',
  protocol: 'attach answered HTTP 200 with an invalid body: CONTROL_MESSAGE_INVALID',
  superseded: 'another boundary process (boot b-2) attached as sandbox sb-1 instance pod-1',
};

interface Rendered {
  readonly json: { level: number; msg: string; ocsf: { severity: string; unmapped: { error?: unknown } } };
  readonly shorthand: string;
}

/** The event through the real sink and logger, once per format. */
function render(event: AuditEvent): Rendered {
  const lines: Partial<Record<LogFormat, string>> = {};
  for (const format of ['json', 'shorthand'] as const) {
    // A logger at warn: a warn-and-above filter must keep these lines.
    const log = logSink({ format, now: () => T, level: 'warn' });
    log.sink.emit(event);
    assert.equal(log.lines().length, 1, `${format}: ${log.text()}`);
    lines[format] = log.lines()[0] ?? '';
  }
  return { json: JSON.parse(lines.json ?? '') as Rendered['json'], shorthand: lines.shorthand ?? '' };
}

function assertFailureLine(rendered: Rendered, expected: { kind: string; cause: string; level: number; severity: 'MED' | 'HIGH' }): void {
  const part = `[error:${expected.kind} ${expected.cause}]`;
  assert.ok(rendered.json.msg.includes(part), `JSON msg: ${rendered.json.msg}`);
  assert.equal(rendered.json.level, expected.level);
  assert.equal(rendered.json.ocsf.severity, expected.severity === 'MED' ? 'Medium' : 'High');
  assert.ok(rendered.shorthand.includes(part), `shorthand: ${rendered.shorthand}`);
  assert.ok(rendered.shorthand.includes(` OCSF `) && rendered.shorthand.includes(`[${expected.severity}]`), rendered.shorthand);
}

describe('control failures on the log line', () => {
  for (const kind of CONTROL_ERROR_KINDS) {
    it(`NET:FAIL and NET:CLOSE of kind ${kind} carry the kind and the cause, at warn`, () => {
      const failure = new ControlFailure(kind, CAUSES[kind]);
      const fail = render(attachFailedEvent({ address: ADDRESS, supervisor: SUPERVISOR, failure, attempt: 3 }));
      assertFailureLine(fail, { kind, cause: CAUSES[kind], level: WARN, severity: 'MED' });
      assert.ok(fail.shorthand.includes(`NET:FAIL [MED] -(-) -> ${SUPERVISOR} [policy:- engine:control] [error:${kind} `), fail.shorthand);
      const close = render(sessionEndedEvent({ address: ADDRESS, failure, note: 'unused' }));
      assertFailureLine(close, { kind, cause: CAUSES[kind], level: WARN, severity: 'MED' });
      assert.ok(close.shorthand.includes('NET:CLOSE [MED]'), close.shorthand);
    });
  }

  it('puts a refusal that retrying cannot fix at error and HIGH, from the retryable field', () => {
    const cause = 'identity-mismatch: certificate names sb-1 (supervisor says retrying will not help until this is fixed)';
    const event = attachFailedEvent({
      address: ADDRESS,
      supervisor: SUPERVISOR,
      failure: new ControlFailure('refused-by-supervisor', cause),
      retryable: false,
      attempt: 1,
    });
    assert.deepEqual(event.unmapped?.error, { kind: 'refused-by-supervisor', message: cause, retryable: false });
    assertFailureLine(render(event), { kind: 'refused-by-supervisor', cause, level: ERROR, severity: 'HIGH' });
    const retryable = attachFailedEvent({ address: ADDRESS, supervisor: SUPERVISOR, failure: new ControlFailure('refused-by-supervisor', cause), attempt: 1 });
    assert.equal(retryable.severity, 'MED');
    assert.deepEqual(retryable.unmapped?.error, { kind: 'refused-by-supervisor', message: cause, retryable: true });
  });

  it('leaves a session that ended cleanly at info and LOW, without an error part', () => {
    const event = sessionEndedEvent({ address: ADDRESS, failure: undefined, note: 'closed' });
    const rendered = render({ ...event, severity: 'LOW' });
    assert.equal(auditLevel(event), 'info');
    assert.equal(rendered.shorthand.includes('[error:'), false);
  });

  it('renders CONFIG:FAILED of a rejected pushed policy and credentials with the cause, at warn', async () => {
    const events: AuditEvent[] = [];
    const applier = createControlApplier({
      store: createPolicyStore(),
      parsePolicy,
      emptyPolicy,
      credentials: {
        replace() {
          throw new Error('provider broken: endpoint 0 has no host');
        },
      },
      sink: { emit: (event) => events.push(event) },
      now: () => T,
    });
    await applier.applyAdmitted({
      kind: 'admitted',
      sessionId: 's-1',
      generation: 4,
      policyHash: 'sha256:bad',
      policy: 'version: 2\n',
      credentialsHash: 'c1',
      credentials: [{ name: 'broken', env: {} }],
      settings: { failureMode: 'fail_closed' },
    });
    const failed = events.filter((e) => e.class === 'CONFIG' && e.activity === 'FAILED');
    assert.deepEqual(
      failed.map((e) => (e.unmapped?.error as { kind?: string } | undefined)?.kind).sort(),
      ['credentials', 'policy'],
    );
    for (const event of failed) {
      const error = event.unmapped?.error as { kind: string; message: string };
      const rendered = render(event);
      // The cause as every rendered field is: one line (a parser's multi-line report has its newlines cut).
      assertFailureLine(rendered, { kind: error.kind, cause: cleanText(error.message), level: WARN, severity: 'MED' });
      assert.ok(rendered.shorthand.includes('CONFIG:FAILED [MED] [policy:- engine:control]'), rendered.shorthand);
    }
  });
});

describe('audit line levels', () => {
  it('are pino’s own warn and error lines, byte for byte, on the raw writer and its memo of templates', () => {
    const events: AuditEvent[] = [
      { class: 'NET', activity: 'FAIL', severity: 'MED', engine: 'control', message: 'm', unmapped: { error: 'connect ECONNREFUSED' } },
      { class: 'NET', activity: 'FAIL', severity: 'HIGH', engine: 'control', message: 'm', unmapped: { error: 'refused for good' } },
      attachFailedEvent({ address: ADDRESS, supervisor: SUPERVISOR, failure: new ControlFailure('tls', CAUSES.tls), attempt: 1 }),
      { class: 'NET', activity: 'OPEN', severity: 'HIGH', engine: 'policy', message: 'm' },
    ];
    for (const parts of [false, true]) {
      const got: string[] = [];
      const destination = parts
        ? { write: (chunk: string) => got.push(chunk) > 0, writeParts: (p: readonly LinePart[]) => got.push(joinParts(p)) > 0 }
        : { write: (chunk: string) => got.push(chunk) > 0 };
      const sink = createAuditSink({ logger: createLogger({ format: 'json', destination, now: () => T }), now: () => T, format: 'json' });
      const expected: string[] = [];
      const reference = pino({ base: null, timestamp: () => `,"time":${T}` }, { write: (chunk: string) => expected.push(chunk) });
      // Three times each: the memo admits an event the second time and writes from its template the third.
      for (const event of [...events, ...events, ...events]) {
        sink.emit(event);
        const line = got.at(-1) ?? '';
        const uid = /"uid":"([0-9a-f-]{36})"/.exec(line)?.[1] ?? '';
        reference[auditLevel(event)]({ ocsf: toOcsf(event, { time: T, uid }) }, toShorthand(event));
        assert.equal(line, expected.at(-1), `parts=${parts}`);
      }
      assert.deepEqual(
        got.slice(0, 4).map((line) => (JSON.parse(line) as { level: number }).level),
        [WARN, ERROR, WARN, 30],
      );
    }
  });
});
