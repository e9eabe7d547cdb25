// The boundary's run configuration: the Config type, DEFAULTS, and parseConfig(unknown) -> deep-frozen Config,
// or CONFIG_INVALID listing every problem. Never reads files, argv or env (cli/run.ts turns flags into input).

import { isIP } from 'node:net';
import { SHUTDOWN_DRAIN_MS } from './boundary-shutdown.js';
import { issue, oneOf, optionalString, parseListenAddress, positiveInteger } from './config-fields.js';
import type { AttachedSettings } from '../control/attached.js';
import { parseRelayAllow } from '../control/relay.js';
import { DEFAULT_TUNNEL_DETECTION, TUNNEL_DETECTION_MODES, type TunnelDetectionMode } from '../net/tunnel-detect.js';
import { BoundaryError, type Issue, isBoundaryError } from '../shared/errors.js';
import { normaliseHost, parseAuthority } from '../net/host.js';
import { NEW_NAMES_BURST, NEW_NAMES_PER_SECOND } from '../net/lookup-gate.js';
import { MAX_DNS_WORKERS } from '../dns/worker-protocol.js';
import { DEFAULT_SYNTHETIC_CIDR, syntheticCidrProblem } from '../net/synthetic.js';
import { BINARY_IDENTITY_MODES, type BinaryIdentityMode } from '../identity/source.js';
import { DEFAULT_PLACEHOLDER_FAMILY, PLACEHOLDER_FAMILIES, type PlaceholderFamily } from '../credentials/placeholder.js';
import { PEER_POLICY_HEADER_NAMES, type PeerPolicyHeader } from '../http1/headers.js';
import { DEFAULT_PROXY_LIMITS, type ProxyLimits } from '../proxy/limits.js';
import { type BypassList, parseBypassList, parseUpstreamProxyUrl, type UpstreamProxyEndpoint } from '../net/upstream-proxy.js';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

export const LOG_FORMATS = ['json', 'shorthand'] as const;
type LogFormatName = (typeof LOG_FORMATS)[number];
const ON_INVALID_POLICY = ['keep', 'deny-all'] as const;
type OnInvalidPolicy = (typeof ON_INVALID_POLICY)[number];
/**
 * Transparent capture (`--capture`): required (not ready while its listeners cannot bind), optional (tried; when the
 * synthetic range is not routed, the proxy and policy DNS still serve and /readyz says so but stays ready) or off.
 */
export const CAPTURE_MODES = ['required', 'optional', 'off'] as const;
export type CaptureMode = (typeof CAPTURE_MODES)[number];

export interface Config {
  readonly proxyListen: ListenAddress;
  readonly adminListen: ListenAddress;
  /** Watched policy file; undefined means no policy yet (everything denied, not ready). */
  readonly policyFile: string | undefined;
  readonly stateDir: string;
  /** Operator CA for interception; both or neither. */
  readonly caCert: string | undefined;
  readonly caKey: string | undefined;
  /** Where the interception CA certificate is written (default `<stateDir>/ca.pem`). */
  readonly caOut: string | undefined;
  /** Where the workload trust bundle (system roots + upstreamCa + the CA) is written; undefined: nowhere.
   *  `boundary run` defaults it to `<stateDir>/ca-bundle.pem`. */
  readonly caBundleOut: string | undefined;
  /** Extra trust anchors (PEM file) for upstream TLS, beside the system roots. */
  readonly upstreamCa: string | undefined;
  readonly upstreamDns: ListenAddress | undefined;
  /** Policy DNS (UDP and TCP); an IP literal. Port 53 in a pod. */
  readonly dnsListen: ListenAddress;
  /**
   * `--dns-workers`: threads that replay policy DNS's cached answers on their own SO_REUSEPORT sockets
   * (docs/dns.md#replay-workers); 0, the default, is the single-threaded server. Needs Node 22.12 or later.
   */
  readonly dnsWorkers: number;
  /** IPv4 range of synthetic answers (captured); one /(prefix+8) window per boot epoch. */
  readonly syntheticCidr: string;
  /** `--capture`: optional standalone, required attached (a pod), unless given. */
  readonly capture: CaptureMode;
  readonly hostsFile: string | undefined;
  /** The workload's resolv.conf `search` domains: policy DNS answers NXDOMAIN under them (see dns/policy-dns.ts). */
  readonly searchDomains: readonly string[];
  /** Tunnelling-shaped names under an allowed wildcard (docs/dns.md#tunnelling): off, audit (findings) or enforce (REFUSED). */
  readonly dnsTunnelDetection: TunnelDetectionMode;
  /** New names under wildcards resolved upstream per second, by policy DNS and the proxy together (docs/dns.md#the-lookup-gate). */
  readonly newNamesPerSecond: number;
  /** New names in a burst before newNamesPerSecond applies. */
  readonly newNamesBurst: number;
  /** Standalone credentials YAML (`--credentials`, watched); run.ts turns it into deps.credentials. */
  readonly credentialsFile: string | undefined;
  /** `--middleware-config`: the external network middleware services policies may name (docs/running.md#middleware-services); read at start. */
  readonly middlewareConfig: string | undefined;
  readonly logFormat: LogFormatName;
  readonly onInvalidPolicy: OnInvalidPolicy;
  /** Operator-only: loopback upstreams pass SSRF validation. Never settable from policy. */
  readonly unsafeAllowLoopbackUpstream: boolean;
  readonly limits: ProxyLimits;
  /** The drain deadline on shutdown (`--shutdown-drain-ms`): what is still open then is destroyed ('forced', exit 3). */
  readonly shutdownDrainMs: number;
  /** Attached mode (`--supervisor`): policy, credentials and relays come from the supervisor. */
  readonly attached: AttachedSettings | undefined;
  /** `--binary-identity`: enforce policy binaries (required, fail closed) or the operator's endpoint-only choice (docs/identity.md#modes). */
  readonly binaryIdentity: BinaryIdentityMode;
  /** `--identity-socket`: ask `boundary identity serve` there; undefined: boundary reads /proc itself. */
  readonly identitySocket: string | undefined;
  /** `--placeholder-family`: the placeholder spelling resolved; the other is refused (docs/credentials.md#placeholder-families). */
  readonly placeholderFamily: PlaceholderFamily;
  /** `--upstream-proxy` and its companions: every upstream dial goes through this proxy (docs/running.md#corporate-upstream-proxy). */
  readonly upstreamProxy: UpstreamProxyConfig | undefined;
  /** `--peer-policy-header`: a denial's policy key also as X-OpenShell-Policy or X-Ryno-Policy (docs/errors.md). */
  readonly peerPolicyHeader: PeerPolicyHeader;
}

export interface UpstreamProxyConfig {
  readonly endpoint: UpstreamProxyEndpoint;
  /** `user:pass`, read at start; never on the command line. */
  readonly authFile: string | undefined;
  /** Trusted for the proxy's own TLS (`https://`), beside the system roots. */
  readonly caFile: string | undefined;
  readonly bypass: BypassList;
  readonly connectByName: boolean;
}

export const DEFAULTS: Config = Object.freeze({
  proxyListen: Object.freeze({ host: '127.0.0.1', port: 3128 }),
  adminListen: Object.freeze({ host: '127.0.0.1', port: 9901 }),
  policyFile: undefined,
  stateDir: '.boundary',
  caCert: undefined,
  caKey: undefined,
  caOut: undefined,
  caBundleOut: undefined,
  upstreamCa: undefined,
  upstreamDns: undefined,
  dnsListen: Object.freeze({ host: '127.0.0.1', port: 15053 }),
  dnsWorkers: 0,
  syntheticCidr: DEFAULT_SYNTHETIC_CIDR,
  capture: 'optional',
  hostsFile: undefined,
  searchDomains: Object.freeze([]),
  dnsTunnelDetection: DEFAULT_TUNNEL_DETECTION,
  newNamesPerSecond: NEW_NAMES_PER_SECOND,
  newNamesBurst: NEW_NAMES_BURST,
  credentialsFile: undefined,
  middlewareConfig: undefined,
  logFormat: 'json',
  onInvalidPolicy: 'keep',
  unsafeAllowLoopbackUpstream: false,
  limits: DEFAULT_PROXY_LIMITS,
  shutdownDrainMs: SHUTDOWN_DRAIN_MS,
  attached: undefined,
  binaryIdentity: 'required',
  identitySocket: undefined,
  placeholderFamily: DEFAULT_PLACEHOLDER_FAMILY,
  upstreamProxy: undefined,
  peerPolicyHeader: 'none',
});

export { MAX_TIMER_MS } from './config-fields.js';

/** Kubernetes writes at most 32 search domains into a pod's resolv.conf. */
export const MAX_SEARCH_DOMAINS = 32;

const LIMIT_KEYS = Object.keys(DEFAULT_PROXY_LIMITS) as (keyof ProxyLimits)[];
const ATTACHED_KEYS = ['supervisor', 'tlsDir', 'sandboxId', 'instanceId', 'relayAllow'] as const;
const UPSTREAM_PROXY_KEYS = ['upstreamProxyAuthFile', 'upstreamProxyAuthInsecure', 'upstreamProxyCa', 'noUpstreamProxy', 'upstreamProxyConnectByName'] as const;
const CONFIG_KEYS = [...(Object.keys(DEFAULTS) as string[]).filter((k) => k !== 'attached'), ...ATTACHED_KEYS, ...UPSTREAM_PROXY_KEYS];
function parseLimits(raw: unknown, issues: Issue[]): ProxyLimits {
  if (raw === undefined) return DEFAULT_PROXY_LIMITS;
  if (typeof raw !== 'object' || raw === null) {
    issue(issues, 'limits', 'expected an object');
    return DEFAULT_PROXY_LIMITS;
  }
  const out: Record<string, number> = { ...DEFAULT_PROXY_LIMITS };
  for (const [key, value] of Object.entries(raw)) {
    if (!(LIMIT_KEYS as string[]).includes(key)) {
      issue(issues, `limits.${key}`, 'unknown key');
      continue;
    }
    const n = positiveInteger(value, `limits.${key}`, issues, key.endsWith('Ms'));
    if (n !== undefined) out[key] = n;
  }
  return Object.freeze(out) as unknown as ProxyLimits;
}

/** Validates run configuration; missing keys take DEFAULTS; unknown keys are refused. */
export function parseConfig(raw: unknown): Config {
  const issues: Issue[] = [];
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new BoundaryError('CONFIG_INVALID', 'configuration must be an object', { issues: [{ code: 'CONFIG_INVALID', path: '', message: 'expected an object' }] });
  }
  const input = raw as Record<string, unknown>;
  for (const key of Object.keys(input)) {
    if (!CONFIG_KEYS.includes(key)) issue(issues, key, 'unknown key');
  }
  const listen = (key: 'proxyListen' | 'adminListen' | 'upstreamDns' | 'dnsListen'): ListenAddress | undefined =>
    input[key] === undefined ? DEFAULTS[key] : parseListenAddress(input[key], key, issues);
  const upstreamDns = listen('upstreamDns');
  if (upstreamDns !== undefined && upstreamDns.port === 0) issue(issues, 'upstreamDns.port', 'expected a port 1-65535');
  const stateDir = optionalString(input.stateDir, 'stateDir', issues) ?? DEFAULTS.stateDir;
  const dnsListen = listen('dnsListen') ?? DEFAULTS.dnsListen;
  if (isIP(dnsListen.host) === 0) issue(issues, 'dnsListen.host', 'expected an IP literal');
  const syntheticCidr = optionalString(input.syntheticCidr, 'syntheticCidr', issues) ?? DEFAULTS.syntheticCidr;
  const cidrProblem = syntheticCidrProblem(syntheticCidr);
  if (cidrProblem !== undefined) issue(issues, 'syntheticCidr', cidrProblem);
  const caCert = optionalString(input.caCert, 'caCert', issues);
  const caKey = optionalString(input.caKey, 'caKey', issues);
  if ((caCert === undefined) !== (caKey === undefined)) issue(issues, caCert === undefined ? 'caCert' : 'caKey', 'caCert and caKey go together');
  const unsafe = input.unsafeAllowLoopbackUpstream;
  if (unsafe !== undefined && typeof unsafe !== 'boolean') issue(issues, 'unsafeAllowLoopbackUpstream', 'expected a boolean');
  if (input.credentialsFile !== undefined && input.supervisor !== undefined) {
    issue(issues, 'credentialsFile', 'a credentials file and a supervisor exclude each other: the supervisor delivers credentials');
  }
  const config: Config = {
    proxyListen: listen('proxyListen') ?? DEFAULTS.proxyListen,
    adminListen: listen('adminListen') ?? DEFAULTS.adminListen,
    policyFile: optionalString(input.policyFile, 'policyFile', issues),
    stateDir,
    caCert,
    caKey,
    caOut: optionalString(input.caOut, 'caOut', issues),
    caBundleOut: optionalString(input.caBundleOut, 'caBundleOut', issues),
    upstreamCa: optionalString(input.upstreamCa, 'upstreamCa', issues),
    upstreamDns,
    dnsListen,
    dnsWorkers: parseDnsWorkers(input.dnsWorkers, issues),
    syntheticCidr,
    // A pod (attached) is not ready without capture; a laptop (standalone) still has the proxy.
    capture: oneOf(input.capture, CAPTURE_MODES, input.supervisor === undefined ? DEFAULTS.capture : 'required', 'capture', issues),
    hostsFile: optionalString(input.hostsFile, 'hostsFile', issues),
    searchDomains: parseSearchDomains(input.searchDomains, issues),
    dnsTunnelDetection: oneOf(input.dnsTunnelDetection, TUNNEL_DETECTION_MODES, DEFAULTS.dnsTunnelDetection, 'dnsTunnelDetection', issues),
    newNamesPerSecond: input.newNamesPerSecond === undefined ? DEFAULTS.newNamesPerSecond : (positiveInteger(input.newNamesPerSecond, 'newNamesPerSecond', issues, false) ?? DEFAULTS.newNamesPerSecond),
    newNamesBurst: input.newNamesBurst === undefined ? DEFAULTS.newNamesBurst : (positiveInteger(input.newNamesBurst, 'newNamesBurst', issues, false) ?? DEFAULTS.newNamesBurst),
    credentialsFile: optionalString(input.credentialsFile, 'credentialsFile', issues),
    middlewareConfig: optionalString(input.middlewareConfig, 'middlewareConfig', issues),
    logFormat: oneOf(input.logFormat, LOG_FORMATS, DEFAULTS.logFormat, 'logFormat', issues),
    onInvalidPolicy: oneOf(input.onInvalidPolicy, ON_INVALID_POLICY, DEFAULTS.onInvalidPolicy, 'onInvalidPolicy', issues),
    unsafeAllowLoopbackUpstream: unsafe === true,
    limits: parseLimits(input.limits, issues),
    shutdownDrainMs: input.shutdownDrainMs === undefined ? DEFAULTS.shutdownDrainMs : (positiveInteger(input.shutdownDrainMs, 'shutdownDrainMs', issues, true) ?? DEFAULTS.shutdownDrainMs),
    attached: parseAttached(input, issues),
    binaryIdentity: oneOf(input.binaryIdentity, BINARY_IDENTITY_MODES, DEFAULTS.binaryIdentity, 'binaryIdentity', issues),
    identitySocket: optionalString(input.identitySocket, 'identitySocket', issues),
    placeholderFamily: oneOf(input.placeholderFamily, PLACEHOLDER_FAMILIES, DEFAULTS.placeholderFamily, 'placeholderFamily', issues),
    upstreamProxy: parseUpstreamProxy(input, issues),
    peerPolicyHeader: oneOf(input.peerPolicyHeader, PEER_POLICY_HEADER_NAMES, DEFAULTS.peerPolicyHeader, 'peerPolicyHeader', issues),
  };
  if (issues.length > 0) {
    throw new BoundaryError('CONFIG_INVALID', `configuration is invalid: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
  }
  return Object.freeze(config);
}

/** 0 (no workers) to MAX_DNS_WORKERS. */
function parseDnsWorkers(raw: unknown, issues: Issue[]): number {
  if (raw === undefined) return DEFAULTS.dnsWorkers;
  if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0 && raw <= MAX_DNS_WORKERS) return raw;
  issue(issues, 'dnsWorkers', `expected an integer 0-${MAX_DNS_WORKERS}`);
  return DEFAULTS.dnsWorkers;
}

/** A list of DNS names (resolv.conf `search`), normalised; at most MAX_SEARCH_DOMAINS. */
function parseSearchDomains(raw: unknown, issues: Issue[]): readonly string[] {
  if (raw === undefined) return DEFAULTS.searchDomains;
  if (!Array.isArray(raw) || raw.length > MAX_SEARCH_DOMAINS) {
    issue(issues, 'searchDomains', `expected a list of at most ${MAX_SEARCH_DOMAINS} DNS names`);
    return DEFAULTS.searchDomains;
  }
  const out: string[] = [];
  for (const [i, entry] of raw.entries()) {
    const host = typeof entry === 'string' ? normaliseHost(entry) : undefined;
    if (host?.ok === true && host.kind === 'name') out.push(host.host);
    else issue(issues, `searchDomains[${i}]`, 'expected a DNS name');
  }
  return Object.freeze(out);
}

/** `upstreamProxy` and its companions; each companion without `upstreamProxy` is refused. */
function parseUpstreamProxy(input: Record<string, unknown>, issues: Issue[]): UpstreamProxyConfig | undefined {
  if (input.upstreamProxy === undefined) {
    for (const key of UPSTREAM_PROXY_KEYS) if (input[key] !== undefined) issue(issues, key, 'only valid with upstreamProxy (--upstream-proxy)');
    return undefined;
  }
  const before = issues.length;
  const url = typeof input.upstreamProxy === 'string' ? parseUpstreamProxyUrl(input.upstreamProxy) : { ok: false as const, message: 'expected a URL' };
  if (!url.ok) issue(issues, 'upstreamProxy', url.message);
  const authFile = optionalString(input.upstreamProxyAuthFile, 'upstreamProxyAuthFile', issues);
  const flag = (key: 'upstreamProxyAuthInsecure' | 'upstreamProxyConnectByName'): boolean => {
    if (input[key] !== undefined && typeof input[key] !== 'boolean') issue(issues, key, 'expected a boolean');
    return input[key] === true;
  };
  const insecure = flag('upstreamProxyAuthInsecure');
  if (url.ok && authFile !== undefined && !url.value.tls && !insecure) {
    issue(issues, 'upstreamProxyAuthFile', 'proxy credentials over http:// travel in clear text: use an https:// proxy, or set upstreamProxyAuthInsecure (--upstream-proxy-auth-insecure)');
  }
  const caFile = optionalString(input.upstreamProxyCa, 'upstreamProxyCa', issues);
  if (url.ok && caFile !== undefined && !url.value.tls) issue(issues, 'upstreamProxyCa', 'only valid with an https:// proxy');
  let bypass: BypassList = { entries: [] };
  if (input.noUpstreamProxy !== undefined) {
    const parsed = typeof input.noUpstreamProxy === 'string' ? parseBypassList(input.noUpstreamProxy) : { ok: false as const, message: 'expected a comma list' };
    if (parsed.ok) bypass = parsed.value;
    else issue(issues, 'noUpstreamProxy', parsed.message);
  }
  const connectByName = flag('upstreamProxyConnectByName');
  if (!url.ok || issues.length > before) return undefined;
  return Object.freeze({ endpoint: url.value, authFile, caFile, bypass, connectByName });
}

// Same shape the control client and the supervisor accept for sandbox and instance ids.
const CONTROL_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The attached-mode keys: all or nothing around `supervisor`, and never together with `policyFile`. */
function parseAttached(input: Record<string, unknown>, issues: Issue[]): AttachedSettings | undefined {
  if (input.supervisor === undefined) {
    for (const key of ATTACHED_KEYS) if (input[key] !== undefined) issue(issues, key, 'only valid with supervisor (attached mode)');
    return undefined;
  }
  const before = issues.length;
  let supervisor: { host: string; port: number } | undefined;
  if (typeof input.supervisor !== 'string') issue(issues, 'supervisor', 'expected HOST:PORT');
  else {
    const parsed = parseAuthority(input.supervisor);
    if (parsed.ok) supervisor = { host: parsed.host, port: parsed.port };
    else issue(issues, 'supervisor', `expected HOST:PORT: ${parsed.message}`);
  }
  if (input.policyFile !== undefined) issue(issues, 'policyFile', 'a policy file and a supervisor exclude each other: the supervisor delivers the policy');
  if (input.middlewareConfig !== undefined) {
    issue(issues, 'middlewareConfig', 'middleware services and a supervisor exclude each other: the supervisor registers them (boundary supervisor --middleware-config)');
  }
  const tlsDir = optionalString(input.tlsDir, 'tlsDir', issues);
  if (tlsDir === undefined && input.tlsDir === undefined) issue(issues, 'tlsDir', 'required with supervisor (DIR/ca.pem, cert.pem, key.pem)');
  const id = (key: 'sandboxId' | 'instanceId'): string | undefined => {
    const value = optionalString(input[key], key, issues);
    if (value !== undefined && !CONTROL_ID.test(value)) issue(issues, key, 'expected 1-128 characters of [A-Za-z0-9._:-], starting with a letter or digit');
    return value;
  };
  const sandboxId = id('sandboxId');
  if (input.sandboxId === undefined) issue(issues, 'sandboxId', 'required with supervisor');
  const instanceId = id('instanceId') ?? sandboxId;
  let relayAllow: AttachedSettings['relayAllow'] = [];
  if (input.relayAllow !== undefined) {
    if (typeof input.relayAllow !== 'string') issue(issues, 'relayAllow', 'expected a comma-separated list of loopback PORT or HOST:PORT');
    else {
      try {
        relayAllow = Object.freeze(parseRelayAllow(input.relayAllow).map((t) => Object.freeze({ ...t })));
      } catch (err) {
        if (!isBoundaryError(err)) throw err;
        issues.push(...err.issues);
      }
    }
  }
  if (issues.length > before || supervisor === undefined || tlsDir === undefined || sandboxId === undefined || instanceId === undefined) return undefined;
  return Object.freeze({ supervisor: Object.freeze(supervisor), tlsDir, sandboxId, instanceId, relayAllow });
}
