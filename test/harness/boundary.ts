// startBoundary(): a real boundary on 127.0.0.1 port 0 with a fake resolver (or the production resolver over a
// loopback DNS server), an in-memory log sink, a counting dialer, loopback upstreams allowed and the test CA as
// upstream CA. Files live in a temp dir.

import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { Boundary } from '../../src/app/boundary-types.js';
import { createBoundary } from '../../src/app/boundary.js';
import { buildResolver } from '../../src/app/cli/run.js';
import { parseConfig } from '../../src/app/config.js';
import type { CredentialSource } from '../../src/credentials/source.js';
import type { MiddlewareRegistry } from '../../src/middleware/registry.js';
import { createSocketIdentitySource } from '../../src/identity/socket-source.js';
import type { IdentitySource } from '../../src/identity/source.js';
import { type DialTarget, netDial } from '../../src/chain/dial.js';
import type { ProxyLimits } from '../../src/proxy/limits.js';
import type { Timers } from '../../src/shared/timers.js';
import { TEST_IDENTITY_LOOKUP_TIMEOUT_MS, testProcSource } from './identity-processes.js';
import { type FakeAnswer, type FakeResolver, fakeResolver } from './fake-resolver.js';
import { type LogSink, logSink } from './log-sink.js';

/** Drain time on close in tests (production: CLOSE_GRACE_MS). */
export const TEST_CLOSE_GRACE_MS = 200;
/** Inside 127.0.0.0/8: every address is local without a route, so capture listeners bind without root. */
export const TEST_SYNTHETIC_CIDR = '127.77.0.0/16';

export interface StartOptions {
  /** Policy YAML; omitted: no policy file (everything denied, not ready). */
  readonly policy?: string;
  /** Names for the fake resolver; api.example.test and other.example.test map to 127.0.0.1 by default. */
  readonly names?: Readonly<Record<string, FakeAnswer>>;
  readonly limits?: Partial<ProxyLimits>;
  /** PEM of extra upstream trust anchors (the test CA of a tlsOrigin). */
  readonly upstreamCaPem?: string;
  /** Point the interception CA at files that do not exist: inspected CONNECTs get 503. */
  readonly caUnavailable?: boolean;
  readonly onInvalidPolicy?: 'keep' | 'deny-all';
  readonly allowLoopback?: boolean;
  readonly now?: () => number;
  /** Replaces the real (loopback) dial; every target is still recorded in `dials`. */
  readonly dial?: (target: DialTarget) => Promise<Socket>;
  /** Synthetic range of policy DNS; inside 127.0.0.0/8 so capture needs no route (default 127.77.0.0/16). */
  readonly syntheticCidr?: string;
  /** config.capture (`--capture`); default optional, as standalone. */
  readonly capture?: 'required' | 'optional' | 'off';
  /** Pre-existing state directory (e.g. with a corrupt epoch file); default a fresh one in the temp dir. */
  readonly stateDir?: string;
  /** The boundary's credential source (deps.credentials); default: an empty static source. */
  readonly credentials?: CredentialSource;
  /** Log and audit line format of the in-memory sink (default json). */
  readonly logFormat?: 'json' | 'shorthand';
  /** Where the workload trust bundle goes (config.caBundleOut); default: not written. */
  readonly caBundleOut?: string;
  /** resolv.conf search domains (config.searchDomains). */
  readonly searchDomains?: readonly string[];
  /** deps.shutdownDrainMs: a drain deadline shorter than SHUTDOWN_DRAIN_MS. */
  readonly shutdownDrainMs?: number;
  /** config.binaryIdentity (`--binary-identity`); default required. */
  readonly binaryIdentity?: 'required' | 'endpoint-only';
  /** config.identitySocket (`--identity-socket`): ask an identity server there instead of reading /proc. */
  readonly identitySocket?: string;
  /**
   * deps.identity: a source of the test's own (a /proc walk of another root, say). Default: what the flags would
   * open (the identity socket, or /proc), with TEST_IDENTITY_LOOKUP_TIMEOUT_MS.
   */
  readonly identity?: IdentitySource;
  /** deps.middleware: network middleware implementations and capacity of the test's own. */
  readonly middleware?: MiddlewareRegistry;
  /** Text of a `--middleware-config` file (external middleware services), written beside the policy. */
  readonly middlewareConfig?: string;
  /**
   * config.upstreamDns: resolve through the production resolver (cli/run.ts buildResolver: upstream DNS client and
   * TTL cache) asking this loopback DNS server (test/harness/dns-upstream.ts) instead of the fake resolver.
   */
  readonly upstreamDns?: { readonly host: string; readonly port: number };
  /** config.dnsTunnelDetection (`--dns-tunnel-detection`). */
  readonly tunnelDetection?: 'off' | 'audit' | 'enforce';
  /** config.newNamesPerSecond and newNamesBurst (`--new-names-per-second`, `--new-names-burst`). */
  readonly newNames?: { readonly perSecond: number; readonly burst: number };
  /** config.placeholderFamily (`--placeholder-family`); default openshell. */
  readonly placeholderFamily?: 'openshell' | 'ryno';
  /** deps.timers: what token grants schedule on (a test's fake timers). */
  readonly timers?: Timers;
  /** The upstream proxy's config keys (`upstreamProxy`, `noUpstreamProxy`, ...; docs/running.md#corporate-upstream-proxy). */
  readonly upstreamProxy?: Readonly<Record<string, unknown>>;
  /** config.peerPolicyHeader (`--peer-policy-header`); default none. */
  readonly peerPolicyHeader?: 'none' | 'openshell' | 'ryno';
}

/** The source openIdentitySource would open for these options, but with the test's lookup timeout. */
function testIdentitySource(options: StartOptions, now: () => number): IdentitySource | undefined {
  if (options.identity !== undefined || options.binaryIdentity === 'endpoint-only') return options.identity;
  if (options.identitySocket !== undefined) return createSocketIdentitySource({ socketPath: options.identitySocket, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS });
  return testProcSource({ now });
}

export interface RunningBoundary {
  readonly boundary: Boundary;
  readonly proxyPort: number;
  readonly adminPort: number;
  /** Policy DNS (UDP and TCP on 127.0.0.1), or undefined when it failed closed. */
  readonly dnsPort: number | undefined;
  /** The interception CA certificate (PEM), or undefined when unavailable. */
  readonly caPem: string | undefined;
  readonly log: LogSink;
  /** The fake resolver; not asked when `upstreamDns` was given. */
  readonly resolver: FakeResolver;
  /** Every upstream dial the boundary asked for, in order. */
  readonly dials: DialTarget[];
  readonly dir: string;
  readonly policyPath: string;
  /** Replaces the policy file atomically (write + rename), as an editor or config manager would. */
  writePolicy(text: string): Promise<void>;
  close(): Promise<void>;
}

export async function startBoundary(options: StartOptions = {}): Promise<RunningBoundary> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-test-'));
  const policyPath = join(dir, 'policy.yaml');
  if (options.policy !== undefined) await writeFile(policyPath, options.policy);
  let upstreamCa: string | undefined;
  const middlewareConfig = options.middlewareConfig === undefined ? undefined : join(dir, 'middleware.yaml');
  if (middlewareConfig !== undefined) await writeFile(middlewareConfig, options.middlewareConfig ?? '');
  if (options.upstreamCaPem !== undefined) {
    upstreamCa = join(dir, 'upstream-ca.pem');
    await writeFile(upstreamCa, options.upstreamCaPem);
  }
  const now = options.now ?? Date.now;
  const log = logSink({ now, ...(options.logFormat === undefined ? {} : { format: options.logFormat }) });
  const resolver = fakeResolver({ 'api.example.test': ['127.0.0.1'], 'other.example.test': ['127.0.0.1'], ...options.names });
  const dials: DialTarget[] = [];
  const identity = testIdentitySource(options, now);
  const config = parseConfig({
    proxyListen: '127.0.0.1:0',
    adminListen: '127.0.0.1:0',
    dnsListen: '127.0.0.1:0',
    syntheticCidr: options.syntheticCidr ?? TEST_SYNTHETIC_CIDR,
    ...(options.capture === undefined ? {} : { capture: options.capture }),
    stateDir: options.stateDir ?? join(dir, 'state'),
    ...(options.policy === undefined ? {} : { policyFile: policyPath }),
    ...(upstreamCa === undefined ? {} : { upstreamCa }),
    ...(middlewareConfig === undefined ? {} : { middlewareConfig }),
    ...(options.caBundleOut === undefined ? {} : { caBundleOut: options.caBundleOut }),
    ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
    ...(options.caUnavailable === true ? { caCert: join(dir, 'missing.pem'), caKey: join(dir, 'missing.key') } : {}),
    ...(options.onInvalidPolicy === undefined ? {} : { onInvalidPolicy: options.onInvalidPolicy }),
    // Tests leave client sockets open; a short grace keeps teardown quick.
    limits: { closeGraceMs: TEST_CLOSE_GRACE_MS, ...options.limits },
    unsafeAllowLoopbackUpstream: options.allowLoopback ?? true,
    ...(options.logFormat === undefined ? {} : { logFormat: options.logFormat }),
    ...(options.binaryIdentity === undefined ? {} : { binaryIdentity: options.binaryIdentity }),
    ...(options.identitySocket === undefined ? {} : { identitySocket: options.identitySocket }),
    ...(options.upstreamDns === undefined ? {} : { upstreamDns: `${options.upstreamDns.host}:${options.upstreamDns.port}` }),
    ...(options.tunnelDetection === undefined ? {} : { dnsTunnelDetection: options.tunnelDetection }),
    ...(options.newNames === undefined ? {} : { newNamesPerSecond: options.newNames.perSecond, newNamesBurst: options.newNames.burst }),
    ...(options.placeholderFamily === undefined ? {} : { placeholderFamily: options.placeholderFamily }),
    ...options.upstreamProxy,
    ...(options.peerPolicyHeader === undefined ? {} : { peerPolicyHeader: options.peerPolicyHeader }),
  });
  const real = options.upstreamDns === undefined ? undefined : await buildResolver(config, now, log.logger);
  const boundary = createBoundary(config, {
    resolver: real?.resolver ?? resolver,
    ...(real === undefined ? {} : { ownQueries: real.ownQueries }),
    now,
    logger: log.logger,
    audit: log.sink,
    registry: new Registry(),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    ...(options.shutdownDrainMs === undefined ? {} : { shutdownDrainMs: options.shutdownDrainMs }),
    ...(identity === undefined ? {} : { identity }),
    ...(options.middleware === undefined ? {} : { middleware: options.middleware }),
    ...(options.timers === undefined ? {} : { timers: options.timers }),
    dial: (target) => {
      dials.push(target);
      return options.dial === undefined ? netDial(target) : options.dial(target);
    },
  });
  try {
    await boundary.start();
  } catch (err) {
    // A start refused (a bad first policy, a middleware service that cannot be used) leaves nothing running behind.
    await boundary.close();
    await real?.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const caPem = options.caUnavailable === true ? undefined : await readFile(join(options.stateDir ?? join(dir, 'state'), 'ca.pem'), 'utf8');
  let closed: Promise<void> | undefined;
  return {
    boundary,
    proxyPort: boundary.proxyAddress().port,
    adminPort: boundary.adminAddress().port,
    dnsPort: boundary.transparent.dnsAddress()?.port,
    caPem,
    log,
    resolver,
    dials,
    dir,
    policyPath,
    async writePolicy(text) {
      const tmp = join(dir, `.policy-${Math.random().toString(16).slice(2)}.tmp`);
      await writeFile(tmp, text);
      await rename(tmp, policyPath);
    },
    close() {
      closed ??= (async () => {
        await boundary.close();
        await real?.close();
        await rm(dir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}
