import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCaptureHealth } from '../../src/proxy/capture-health.js';
import { logSink } from '../harness/log-sink.js';

const CIDR = '198.18.0.0/15';
const UNROUTED_HINT = "the synthetic range is not routed to lo: run 'ip route add local 198.18.0.0/15 dev lo' as root, or boundary init-netns";

function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}

function health(required = true) {
  const sink = logSink();
  return { sink, health: createCaptureHealth({ logger: sink.logger, cidr: CIDR, required }) };
}

/** The log lines that say capture is unavailable, parsed. */
function unavailableLines(sink: ReturnType<typeof logSink>): { level: number; msg: string; err?: unknown }[] {
  return sink
    .lines()
    .map((line) => JSON.parse(line) as { level: number; msg: string; err?: unknown })
    .filter((line) => line.msg.startsWith('transparent capture unavailable'));
}

describe('capture health', () => {
  it('names an unrouted listener with the route to add, and clears the reason once a later bind succeeds', () => {
    const { health: h } = health();
    assert.equal(h.failed(errno('EADDRNOTAVAIL'), '198.18.0.1', 443), true);
    assert.equal(h.problem(), `capture-unavailable: EADDRNOTAVAIL 198.18.0.1:443 (${UNROUTED_HINT})`);
    h.bound('198.18.0.2', 8080);
    assert.equal(h.problem(), undefined);
  });

  it('keeps the failed port when a re-probe fails the same way', () => {
    const { health: h } = health();
    h.failed(errno('EADDRNOTAVAIL'), '198.18.0.1', 443);
    h.failed(errno('EADDRNOTAVAIL'), '198.18.0.1', 0);
    assert.match(h.problem() ?? '', /198\.18\.0\.1:443 /);
  });

  it('ignores a port that is merely taken, and clears EACCES only with a privileged bind', () => {
    const { health: h } = health();
    assert.equal(h.failed(errno('EADDRINUSE'), '127.77.0.1', 443), false);
    assert.equal(h.problem(), undefined);
    h.failed(errno('EACCES'), '127.77.0.1', 443);
    assert.match(h.problem() ?? '', /^capture-unavailable: EACCES 127\.77\.0\.1:443 \(ports below 1024 need CAP_NET_BIND_SERVICE or the pod sysctl net\.ipv4\.ip_unprivileged_port_start=0\)$/);
    h.bound('127.77.0.1', 8443);
    assert.notEqual(h.problem(), undefined);
    h.bound('127.77.0.2', 80);
    assert.equal(h.problem(), undefined);
  });

  it('logs an unrouted range once, however many names fail, without a stack: an error when required, a warning when optional', () => {
    for (const [required, level] of [[true, 50], [false, 40]] as const) {
      const { sink, health: h } = health(required);
      h.failed(errno('EADDRNOTAVAIL'), '198.18.0.0', 0);
      for (let i = 1; i <= 20; i++) h.failed(errno('EADDRNOTAVAIL'), `198.18.0.${i}`, 443);
      const lines = unavailableLines(sink);
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.equal(lines[0]?.level, level);
      assert.equal(lines[0]?.err, undefined);
      assert.ok(lines[0]?.msg.includes(`ip route add local ${CIDR} dev lo`), lines[0]?.msg);
    }
  });
});
