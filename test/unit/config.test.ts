import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRunFlags } from '../../src/app/cli/run.js';
import { DEFAULTS, parseConfig } from '../../src/app/config.js';
import { MAX_DNS_WORKERS } from '../../src/dns/worker-protocol.js';
import { BoundaryError } from '../../src/shared/errors.js';
import { DEFAULT_PROXY_LIMITS, MAX_CONNECTIONS_PER_LISTENER } from '../../src/proxy/limits.js';

describe('parseConfig', () => {
  it('fills every missing key from DEFAULTS and freezes the result', () => {
    const config = parseConfig({});
    assert.deepEqual(config, DEFAULTS);
    assert.equal(Object.isFrozen(config), true);
    assert.equal(config.proxyListen.port, 3128);
    assert.equal(config.adminListen.port, 9901);
    assert.equal(config.limits.maxConnections, MAX_CONNECTIONS_PER_LISTENER);
    assert.equal(config.onInvalidPolicy, 'keep');
    assert.equal(config.unsafeAllowLoopbackUpstream, false);
  });

  it('parses host:port strings, bracketed IPv6 and port 0', () => {
    const config = parseConfig({ proxyListen: '127.0.0.1:0', adminListen: '[::1]:9902', upstreamDns: '10.0.0.2:53' });
    assert.deepEqual(config.proxyListen, { host: '127.0.0.1', port: 0 });
    assert.deepEqual(config.adminListen, { host: '::1', port: 9902 });
    assert.deepEqual(config.upstreamDns, { host: '10.0.0.2', port: 53 });
  });

  it('reports every problem at once with its path', () => {
    let caught: unknown;
    try {
      parseConfig({
        proxyListen: 'example.com:3128',
        adminListen: '127.0.0.1:99999',
        logFormat: 'xml',
        onInvalidPolicy: 'ignore',
        caCert: '/ca.pem',
        limits: { maxConnections: 0, nope: 1 },
        deny_rule: true,
      });
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof BoundaryError);
    assert.equal(caught.code, 'CONFIG_INVALID');
    assert.deepEqual(
      caught.issues.map((i) => i.path).sort(),
      ['adminListen.port', 'caKey', 'deny_rule', 'limits.maxConnections', 'limits.nope', 'logFormat', 'onInvalidPolicy', 'proxyListen.host'].sort(),
    );
    assert.ok(caught.issues.every((i) => i.code === 'CONFIG_INVALID'));
  });

  it('refuses a DNS server on port 0 and a non-object input', () => {
    assert.throws(() => parseConfig({ upstreamDns: '10.0.0.2:0' }), { code: 'CONFIG_INVALID' });
    assert.throws(() => parseConfig('run'), { code: 'CONFIG_INVALID' });
  });

  it('overrides only the limits that are given', () => {
    const config = parseConfig({ limits: { maxConnections: 10 } });
    assert.equal(config.limits.maxConnections, 10);
    assert.equal(config.limits.headersTimeoutMs, DEFAULTS.limits.headersTimeoutMs);
  });
});

describe('parseRunFlags', () => {
  it('maps run flags onto config keys and resolves paths against cwd', () => {
    const raw = parseRunFlags(
      ['--policy', 'p.yaml', '--proxy-listen=127.0.0.1:0', '--log-format', 'shorthand', '--unsafe-allow-loopback-upstream', '--on-invalid-policy', 'deny-all'],
      '/srv',
    );
    assert.deepEqual(raw, {
      policyFile: '/srv/p.yaml',
      proxyListen: '127.0.0.1:0',
      logFormat: 'shorthand',
      unsafeAllowLoopbackUpstream: true,
      onInvalidPolicy: 'deny-all',
    });
    assert.equal(parseConfig(raw).logFormat, 'shorthand');
  });

  it('maps --ca-bundle-out to caBundleOut, a path resolved against cwd', () => {
    const raw = parseRunFlags(['--policy', 'p.yaml', '--ca-bundle-out', 'out/bundle.pem'], '/srv');
    assert.equal(parseConfig(raw).caBundleOut, '/srv/out/bundle.pem');
    assert.equal(parseConfig({}).caBundleOut, undefined);
  });

  it('maps --max-connections to limits.maxConnections; parseConfig refuses anything but a positive integer', () => {
    assert.equal(parseConfig(parseRunFlags(['--max-connections', '2'], '/')).limits.maxConnections, 2);
    for (const bad of ['0', '-1', '1.5', 'many']) assert.throws(() => parseConfig(parseRunFlags(['--max-connections', bad], '/')), BoundaryError, bad);
  });

  it('maps --max-connections-per-source-percent beside --max-connections, each at most once', () => {
    const { limits } = parseConfig(parseRunFlags(['--max-connections', '10', '--max-connections-per-source-percent', '100'], '/'));
    assert.deepEqual([limits.maxConnections, limits.maxConnectionsPerSourcePercent, limits.firstByteTimeoutMs], [10, 100, DEFAULT_PROXY_LIMITS.firstByteTimeoutMs]);
    assert.equal(parseConfig({}).limits.maxConnectionsPerSourcePercent, 50);
    assert.throws(() => parseConfig(parseRunFlags(['--max-connections-per-source-percent', '0'], '/')), BoundaryError);
    assert.equal(typeof parseRunFlags(['--max-connections-per-source-percent', '5', '--max-connections-per-source-percent=6'], '/'), 'string');
  });

  it('maps --dns-workers to dnsWorkers, 0 by default and at most MAX_DNS_WORKERS', () => {
    assert.equal(parseConfig({}).dnsWorkers, 0);
    assert.equal(parseConfig(parseRunFlags(['--dns-workers', '2'], '/')).dnsWorkers, 2);
    assert.equal(parseConfig(parseRunFlags([`--dns-workers=${MAX_DNS_WORKERS}`], '/')).dnsWorkers, MAX_DNS_WORKERS);
    for (const bad of [String(MAX_DNS_WORKERS + 1), '-1', '1.5', 'two']) {
      assert.throws(
        () => parseConfig(parseRunFlags(['--dns-workers', bad], '/')),
        (err: unknown) => err instanceof BoundaryError && err.code === 'CONFIG_INVALID' && err.issues.some((i) => i.path === 'dnsWorkers'),
        bad,
      );
    }
  });

  it('says what is wrong with unknown, repeated or valueless flags', () => {
    assert.equal(typeof parseRunFlags(['--nope'], '/'), 'string');
    assert.equal(typeof parseRunFlags(['--policy', 'a', '--policy', 'b'], '/'), 'string');
    assert.equal(typeof parseRunFlags(['--policy'], '/'), 'string');
  });
});
