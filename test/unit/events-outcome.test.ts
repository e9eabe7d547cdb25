import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { beginOutcome, type Outcome, OUTCOME_VERDICTS, outcomeEvent } from '../../src/chain/events.js';
import { ADAPTERS } from '../../src/policy/types.js';
import type { AuditEvent } from '../../src/telemetry/event.js';

// outcomeEvent written out plainly, as it was before its status details came from a table: the reference for its output.
const ACTION = { allow: 'ALLOWED', audit: 'ALLOWED', deny: 'DENIED', fail: undefined } as const;
const STATUS_WORD = { allow: 'allowed', audit: 'audit', deny: 'denied', fail: 'failed' } as const;

function target(host: string | undefined, port: number | undefined): string {
  if (host === undefined) return '-';
  const shown = host.includes(':') ? `[${host}]` : host;
  return port === undefined ? shown : `${shown}:${port}`;
}

/** Renders the outcome as an AuditEvent (docs/events.md#what-is-emitted). Never includes a query string. */
function referenceOutcomeEvent(o: Outcome): AuditEvent {
  const action = ACTION[o.verdict];
  const severity = o.severity ?? (o.verdict === 'deny' ? 'MED' : o.verdict === 'fail' ? 'LOW' : 'INFO');
  const where = target(o.host, o.port);
  const unmapped: Record<string, unknown> = { adapter: o.adapter, verdict: o.verdict, reason_code: o.reason };
  if (o.status !== undefined) unmapped.status_code = o.status;
  if (o.extra !== undefined) Object.assign(unmapped, o.extra);
  // A denial carries what explain needs to replay it (docs/events.md#replaying-a-denial): a connection its target,
  // a request its scheme, method, canonical path and query keys too.
  if (o.verdict === 'deny' && o.host !== undefined && o.port !== undefined) {
    unmapped.replay =
      o.kind === 'net' || o.path === undefined ? { host: o.host, port: o.port } : { scheme: o.scheme ?? 'http', method: o.method, host: o.host, port: o.port, path: o.path };
  }
  // Built by assignment, not object spreads: one of these is made per request.
  const dst: { host?: string; port?: number } = {};
  if (o.host !== undefined) dst.host = o.host;
  if (o.port !== undefined) dst.port = o.port;
  const src: { ip?: string; port?: number } = {};
  if (o.srcIp !== undefined) src.ip = o.srcIp;
  if (o.srcPort !== undefined) src.port = o.srcPort;
  const net = o.kind === 'net' || o.verdict === 'fail';
  const label = net ? (o.adapter === 'connect' ? (o.extra?.inspect === true ? 'CONNECT_L7' : 'CONNECT') : 'FORWARD') : o.adapter === 'forward' ? 'FORWARD' : 'L7_REQUEST';
  const event: {
    -readonly [K in keyof AuditEvent]: AuditEvent[K];
  } = {
    class: net ? 'NET' : 'HTTP',
    activity: net ? (o.verdict === 'fail' ? 'FAIL' : 'OPEN') : o.method,
    statusDetail: `${label} ${STATUS_WORD[o.verdict]}`,
    message: net ? `${label} ${STATUS_WORD[o.verdict]} ${where}` : `${label} ${STATUS_WORD[o.verdict]} ${o.method} ${where}${o.path ?? ''}`,
    severity,
    engine: o.engine,
    dst,
    src,
    detail: o.detail,
    unmapped,
  };
  if (action !== undefined) event.action = action;
  if (o.policy !== undefined) event.policy = o.policy;
  if (o.generation !== undefined) event.generation = o.generation;
  if (o.policyHash !== undefined) event.policyHash = o.policyHash;
  if (!net && o.host !== undefined) {
    // docs/events.md#shorthand-line: https after TLS termination; the port is printed unless the scheme's default.
    const scheme = o.scheme ?? 'http';
    const shown = o.port === undefined || o.port === (scheme === 'https' ? 443 : 80) ? target(o.host, undefined) : where;
    event.http = { method: o.method, url: `${scheme}://${shown}${o.path ?? ''}` };
  }
  return event;
}

describe('outcomeEvent', () => {
  it('renders every adapter, kind, verdict and label as it did before, field for field and in key order', () => {
    const verdicts = [...OUTCOME_VERDICTS, 'unexpected' as Outcome['verdict']];
    for (const adapter of ADAPTERS) {
      for (const kind of ['net', 'http'] as const) {
        for (const verdict of verdicts) {
          for (const extra of [undefined, { inspect: true }, { inspect: false, rule: 'r' }]) {
            for (const [host, port, path, scheme] of [
              ['h.test', 8080, '/p', undefined],
              ['::1', 80, undefined, undefined],
              [undefined, undefined, undefined, undefined],
              ['h.test', 443, '/p', 'https'],
              ['h.test', 443, '/p', 'http'],
            ] as const) {
              // Each of the fields an allowed request has all of, missing in turn, and the status too.
              for (const missing of [undefined, 'status', 'policy', 'generation', 'policyHash', 'src'] as const) {
                const o = beginOutcome(adapter, kind, { remoteAddress: '127.0.0.1', remotePort: 5 });
                Object.assign(o, { verdict, host, port, path, extra, status: verdict === 'fail' ? 502 : 200, policy: 'p', generation: 3, policyHash: 'h' });
                if (scheme !== undefined) o.scheme = scheme;
                if (missing === 'src') o.srcIp = undefined;
                else if (missing !== undefined) o[missing] = undefined;
                const got = outcomeEvent(o);
                const want: AuditEvent = referenceOutcomeEvent(o);
                assert.deepEqual(got, want);
                assert.deepEqual(Object.keys(got), Object.keys(want));
                assert.deepEqual(Object.keys(got.unmapped ?? {}), Object.keys(want.unmapped ?? {}));
                assert.equal(JSON.stringify(got), JSON.stringify(want));
              }
            }
          }
        }
      }
    }
  });

  it('gives the same message and URL for the same request parts, and the right ones when any part changes (the texts table)', () => {
    const hosts = ['h.test', 'g.test', '::1', '10.0.0.1', 'h.tesu'];
    const ports = [80, 443, 8080, 81];
    const paths = ['/', '/a', '/b', '/ab', '/x/y?', `/${'p'.repeat(600)}`, ''];
    const methods = ['GET', 'POST'];
    let seed = 7;
    const pick = <T>(list: readonly T[]): T => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return list[seed % list.length] as T;
    };
    // Enough requests that every slot is taken and overwritten many times over, with parts that differ in one place only.
    for (let i = 0; i < 4000; i++) {
      const o = beginOutcome(pick(['forward', 'connect'] as const), 'http', { remoteAddress: '127.0.0.1', remotePort: 5 });
      const path = pick(paths);
      Object.assign(o, { verdict: pick(['allow', 'deny', 'audit'] as const), host: pick(hosts), port: pick(ports), path: path === '' ? undefined : path, method: pick(methods), status: 200 });
      o.scheme = pick(['http', 'https'] as const);
      assert.deepEqual(outcomeEvent(o), referenceOutcomeEvent(o));
    }
    const o = beginOutcome('forward', 'http', { remoteAddress: '127.0.0.1', remotePort: 5 });
    Object.assign(o, { verdict: 'allow', host: 'same.test', port: 8080, path: '/same', status: 200 });
    const a = outcomeEvent(o);
    const b = outcomeEvent({ ...o, path: `/${'same'}`, host: ['same', 'test'].join('.') });
    assert.equal(a.message, 'FORWARD allowed UNKNOWN same.test:8080/same');
    assert.equal(b.message, a.message);
    assert.equal(b.http?.url, 'http://same.test:8080/same');
  });
});
