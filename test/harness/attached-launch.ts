// The boundary under test for the shutdown tests (work-in-flight.ts): the real `boundary run` child attached to a
// supervisor, or the same configuration built in this process for drain settings the CLI has no flags for
// (closeGraceMs, shutdownDrainMs). Both resolve through the given upstream DNS and trust the origins' CA upstream.

import { Registry } from 'prom-client';
import type { Boundary } from '../../src/app/boundary-types.js';
import { createBoundary } from '../../src/app/boundary.js';
import { createUpstreamResolver } from '../../src/dns/upstream.js';
import { attachedConfig } from './attached-config.js';
import { TEST_SYNTHETIC_CIDR } from './boundary.js';
import type { TestPki } from './certs.js';
import { type BoundaryCli, dnsAddressOf, isDnsReady, spawnBoundaryCli } from './cli-boundary.js';
import type { TestSupervisor } from './control.js';
import { type LogSink, logSink } from './log-sink.js';

export interface DrainSettings {
  readonly closeGraceMs: number;
  readonly shutdownDrainMs: number;
}

export interface Launched {
  readonly proxyPort: number;
  readonly adminPort: number;
  readonly dnsPort: number;
  /** The `boundary run` child (the default), or the in-process boundary and its log (launchInProcess). */
  readonly cli?: BoundaryCli;
  readonly boundary?: Boundary;
  readonly log?: LogSink;
}

/** What both launchers attach to and read: the supervisor, its PKI, the boundary's folders and loopback ports. */
export interface Site {
  readonly sup: TestSupervisor;
  readonly pki: TestPki;
  readonly tlsDir: string;
  readonly stateDir: string;
  readonly upstreamCa: string;
  readonly upstreamPort: number;
  readonly relayPort: number;
}

/** `boundary run` in attached mode; resolves once its first policy is effective. Cleanups get its SIGKILL first. */
export async function launchCli(site: Site, cleanups: (() => unknown)[]): Promise<Launched> {
  const cli = spawnBoundaryCli([
    '--supervisor', `127.0.0.1:${site.sup.port()}`,
    '--tls-dir', site.tlsDir,
    '--sandbox-id', site.pki.sandboxId,
    '--instance-id', 'pod-sigterm',
    '--proxy-listen', '127.0.0.1:0',
    '--admin-listen', '127.0.0.1:0',
    '--dns-listen', '127.0.0.1:0',
    '--synthetic-cidr', TEST_SYNTHETIC_CIDR,
    '--state-dir', site.stateDir,
    '--upstream-dns', `127.0.0.1:${site.upstreamPort}`,
    '--upstream-ca', site.upstreamCa,
    '--unsafe-allow-loopback-upstream',
    '--relay-allow', `127.0.0.1:${site.relayPort}`,
  ]);
  // SIGKILL: a test that failed must not leave a child that a SIGTERM did not end.
  cleanups.unshift(() => (cli.child.exitCode === null && cli.child.signalCode === null ? cli.kill() : undefined));
  const listening = await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
  const proxyPort = Number(/:(\d+)$/.exec(listening.ocsf?.message ?? '')?.[1]);
  const dnsPort = dnsAddressOf(await cli.waitFor(isDnsReady)).port;
  const adminLine = await cli.waitFor((line) => typeof (line.admin as { port?: unknown } | undefined)?.port === 'number');
  const adminPort = (adminLine.admin as { port: number }).port;
  await cli.waitFor((line) => /policy generation \d+ from supervisor .* is effective/.test(line.ocsf?.message ?? ''));
  return { cli, proxyPort, adminPort, dnsPort };
}

/** createBoundary with the same attached configuration and `drain`; resolves once its first policy is effective. */
export async function launchInProcess(site: Site, drain: DrainSettings, cleanups: (() => unknown)[]): Promise<Launched> {
  const log = logSink();
  const config = attachedConfig({
    supervisor: `127.0.0.1:${site.sup.port()}`,
    tlsDir: site.tlsDir,
    sandboxId: site.pki.sandboxId,
    stateDir: site.stateDir,
    extra: { unsafeAllowLoopbackUpstream: true, upstreamCa: site.upstreamCa, relayAllow: `127.0.0.1:${site.relayPort}`, limits: { closeGraceMs: drain.closeGraceMs } },
  });
  const boundary = createBoundary(config, {
    resolver: createUpstreamResolver({ servers: [{ host: '127.0.0.1', port: site.upstreamPort }] }),
    now: Date.now,
    logger: log.logger,
    audit: log.sink,
    registry: new Registry(),
    version: '0.1.0-test',
    shutdownDrainMs: drain.shutdownDrainMs,
  });
  cleanups.unshift(() => boundary.close());
  await boundary.start();
  await log.waitFor((e) => /policy generation \d+ from supervisor .* is effective/.test(e.message ?? ''));
  const dns = boundary.transparent.dnsAddress();
  if (dns === undefined) throw new Error('policy DNS is not listening');
  return { boundary, log, proxyPort: boundary.proxyAddress().port, adminPort: boundary.adminAddress().port, dnsPort: dns.port };
}

