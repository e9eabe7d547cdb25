import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCaptureHealth } from '../../src/proxy/capture-health.js';
import { logSink } from '../harness/log-sink.js';

function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}

describe('capture health', () => {
  it('names an unrouted listener and clears the reason once a later bind succeeds', () => {
    const health = createCaptureHealth({ logger: logSink().logger });
    health.failed(errno('EADDRNOTAVAIL'), '198.18.0.1', 443);
    assert.equal(health.problem(), 'capture-unavailable: EADDRNOTAVAIL 198.18.0.1:443 (is the synthetic range routed to lo? run boundary init-netns)');
    health.bound('198.18.0.2', 8080);
    assert.equal(health.problem(), undefined);
  });

  it('keeps the failed port when a re-probe fails the same way', () => {
    const health = createCaptureHealth({ logger: logSink().logger });
    health.failed(errno('EADDRNOTAVAIL'), '198.18.0.1', 443);
    health.failed(errno('EADDRNOTAVAIL'), '198.18.0.1', 0);
    assert.match(health.problem() ?? '', /198\.18\.0\.1:443 /);
  });

  it('ignores a port that is merely taken, and clears EACCES only with a privileged bind', () => {
    const health = createCaptureHealth({ logger: logSink().logger });
    health.failed(errno('EADDRINUSE'), '127.77.0.1', 443);
    assert.equal(health.problem(), undefined);
    health.failed(errno('EACCES'), '127.77.0.1', 443);
    assert.match(health.problem() ?? '', /^capture-unavailable: EACCES 127\.77\.0\.1:443 \(ports below 1024 need CAP_NET_BIND_SERVICE or the pod sysctl net\.ipv4\.ip_unprivileged_port_start=0\)$/);
    health.bound('127.77.0.1', 8443);
    assert.notEqual(health.problem(), undefined);
    health.bound('127.77.0.2', 80);
    assert.equal(health.problem(), undefined);
  });
});
