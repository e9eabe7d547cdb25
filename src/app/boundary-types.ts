// The composition root's types: what createBoundary (boundary.ts) takes from the world (Deps), what it returns
// (Boundary), and the policy DNS and capture part it assembles (Transparent). Types only.

import type { MiddlewareRegistry } from '../middleware/registry.js';
import type { Registry } from 'prom-client';
import type { CaptureMode, ListenAddress } from './config.js';
import type { AttachedControlOptions } from '../control/attached.js';
import type { ControlLookup } from '../control/dial.js';
import type { CredentialSource } from '../credentials/source.js';
import type { IdentitySource } from '../identity/source.js';
import type { HostCache } from '../net/host.js';
import type { LookupGate } from '../net/lookup-gate.js';
import type { Resolver } from '../net/resolver.js';
import type { SelfAddress } from '../net/ssrf.js';
import type { SyntheticPool } from '../net/synthetic.js';
import type { PolicyStore } from '../policy/store.js';
import type { ProxyContext } from '../proxy/context.js';
import type { DialFunction } from '../chain/dial.js';
import type { ProxyServer } from '../proxy/server.js';
import type { ProxyLimits } from '../proxy/limits.js';
import type { Readiness } from '../telemetry/admin.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import type { Timers } from '../shared/timers.js';
import type { LookupMetrics } from '../dns/metrics.js';
import type { OwnQueries } from '../dns/own-queries.js';
export interface Deps {
  readonly resolver: Resolver;
  /** The upstream resolver's queries in flight, UDP and TCP (dns/upstream.ts): policy DNS fails one that comes back. */
  readonly ownQueries?: OwnQueries;
  /** Epoch ms: certificate validity, event times. */
  readonly now: () => number;
  readonly logger: Logger;
  /** Never the global default registry. */
  readonly registry: Registry;
  /** Defaults to an audit sink on `logger` in `config.logFormat`. */
  readonly audit?: AuditSink;
  /** Replaces net.connect for upstream dials (tests count dials through it). */
  readonly dial?: DialFunction;
  /** Standalone: the watched `--credentials` file source (run.ts builds it). Default: the source the
   *  supervisor pushes into (attached mode), empty until a push arrives. */
  readonly credentials?: CredentialSource;
  /** Attached mode: supervisor name -> addresses (main/run passes the system resolver; tests a fake). */
  readonly controlLookup?: ControlLookup;
  /** Reported to the supervisor on attach. */
  readonly version?: string;
  /** Attached mode: this process start's id (main/run may pass one; fresh per createBoundary otherwise). */
  readonly bootId?: string;
  /** Tests only: a drain deadline instead of config.shutdownDrainMs (`--shutdown-drain-ms`). */
  readonly shutdownDrainMs?: number;
  /** Where processes are looked up (docs/identity.md); default from config: the identity socket, or /proc. */
  readonly identity?: IdentitySource;
  /** Network middleware implementations and their capacity; default the built-ins (tests: a small capacity). */
  readonly middleware?: MiddlewareRegistry;
  /** What token grants schedule their refreshes, retries and expiries on (default GLOBAL_TIMERS; tests drive a fake). */
  readonly timers?: Timers;
  /** Tests only: faster control backoff/timers and a listener for control state changes. */
  readonly controlTuning?: Pick<AttachedControlOptions, 'tuning' | 'onState'>;
}

/** 'forced': the drain deadline (boundary-shutdown.ts SHUTDOWN_DRAIN_MS) passed and what was left was destroyed. */
export type DrainOutcome = 'clean' | 'forced';

export interface Boundary {
  start(): Promise<void>;
  /**
   * Idempotent: listeners stop, in-flight requests drain, tunnels close, telemetry last. A started boundary emits
   * CONFIG:STOPPING and CONFIG:STOPPED around the drain; `signal` names the signal that asked for it.
   */
  close(cause?: { readonly signal?: string }): Promise<DrainOutcome>;
  proxyAddress(): { host: string; port: number };
  adminAddress(): { host: string; port: number };
  readiness(): Readiness;
  /** Re-reads the policy file now (the watcher does this on change). */
  reloadPolicy(): Promise<void>;
  readonly store: PolicyStore;
  /** What placeholders resolve from: deps.credentials, or what the supervisor pushed (attached mode). */
  readonly credentials: CredentialSource;
  readonly proxy: ProxyServer;
  /** Policy DNS and transparent capture. */
  readonly transparent: Transparent;
  /** The one lookup gate policy DNS and the proxy resolve through (docs/dns.md#the-lookup-gate). */
  readonly lookups: LookupGate;
}

/** What createBoundary hands the policy DNS and capture assembly below. */
export interface TransparentOptions {
  readonly dnsListen: ListenAddress;
  /** `--dns-workers`: replay workers beside the main thread's DNS server (0: none). */
  readonly dnsWorkers?: number;
  readonly syntheticCidr: string;
  /** `--capture`: off builds no capture listeners; required makes an unavailable capture a readiness reason. */
  readonly capture: CaptureMode;
  /** resolv.conf `search` domains: NXDOMAIN under them for names policy does not cover. */
  readonly searchDomains?: readonly string[];
  readonly stateDir: string;
  readonly allowLoopback: boolean;
  /** The proxy's limits: the capture listeners hold the same maxConnections, share and first-byte timeout. */
  readonly limits: ProxyLimits;
  readonly store: PolicyStore;
  /** The lookup gate the proxy resolves through too: DNS answers and CONNECT destinations share its budget. */
  readonly lookups: LookupGate;
  /** The gate's counters, made by the root; the DNS metrics include them. */
  readonly lookupMetrics: LookupMetrics;
  /** The boundary's host cache, shared with the proxy. */
  readonly hosts?: HostCache;
  readonly ownQueries?: OwnQueries;
  readonly sink: AuditSink;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly now: () => number;
}

export interface CaptureState {
  readonly mode: CaptureMode;
  /** Undefined while capture binds (or is off). */
  readonly problem: string | undefined;
}

/** Policy DNS and transparent capture, as createBoundary exposes them. */
export interface Transparent {
  /** First thing in start: refuses what this process cannot run (`--dns-workers` without SO_REUSEPORT in dgram). */
  preflight(): Promise<void>;
  /** After the proxy: capture runs on its context. Throws only when the DNS listener cannot bind. */
  start(context: ProxyContext, selfAddresses: readonly SelfAddress[]): Promise<void>;
  close(): Promise<void>;
  /** Why policy DNS is not serving (starting, a corrupt epoch: fail closed, closed), or undefined. */
  problem(): string | undefined;
  /** The capture mode, and why capture cannot bind (`capture-unavailable: ...`) if it cannot. */
  capture(): CaptureState;
  dnsAddress(): ListenAddress | undefined;
  pool(): SyntheticPool | undefined;
  listening(): readonly { readonly ip: string; readonly port: number }[];
}
