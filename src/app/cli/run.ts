// `boundary run`: parses the run flags into a Config, builds the production deps (resolver, logger, registry,
// clock from io), starts the boundary and drains it when io.signal aborts. Exit codes: 0 ok (a clean drain),
// 1 failed, 2 usage, 3 drained only by force at the deadline (EXIT_DRAIN_FORCED).

import { getServers } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import type { Boundary } from '../boundary-types.js';
import { createBoundary } from '../boundary.js';
import type { FileCredentialSource } from '../../credentials/file-source.js';
import { type Config, DEFAULTS, MAX_SEARCH_DOMAINS, parseConfig } from '../config.js';
import type { ControlLookup } from '../../control/dial.js';
import { BoundaryError, isBoundaryError } from '../../shared/errors.js';
import { createUpstreamResolver } from '../../dns/upstream.js';
import { formatAuthority, normaliseHost } from '../../net/host.js';
import { openHostsFile } from '../../net/hosts-file.js';
import { createCachingResolver } from '../../net/resolver-cache.js';
import { isSelfAddress, prepareSelfAddresses } from '../../net/ssrf.js';
import { CA_CERT_FILE } from '../../pki/ca.js';
import { CA_BUNDLE_FILE } from '../../pki/trust-bundle.js';
import { createLogger, type Logger } from '../../telemetry/logger.js';
import { MetricsOffRegistry } from '../../telemetry/metrics.js';
import { Registry } from '../../telemetry/prom.js';
import { readPackageVersion } from '../version.js';
import { type CliIo, type Command, EXIT_DRAIN_FORCED } from './io.js';
import { formatRunBanner } from './run-banner.js';
import { parseRunFlags, RUN_HELP } from './run-flags.js';

export { parseRunFlags };

/** `run`'s exit codes (README.md, run section); EXIT_DRAIN_FORCED (3) is in io.ts, where main.ts reads it. */
export const EXIT_OK = 0;
export { EXIT_DRAIN_FORCED };

const RESOLV_CONF = '/etc/resolv.conf';
const DNS_PORT = 53;

const NO_SOURCE = 'give --policy FILE (standalone) or --supervisor HOST:PORT (attached): without either, nothing would ever be allowed';

/** Defaults that depend on the process: the bundle beside ca.pem, and shorthand logs for a person at a terminal. */
function setRunDefaults(raw: Record<string, unknown>, io: CliIo): void {
  const stateDir = typeof raw.stateDir === 'string' ? raw.stateDir : resolve(io.cwd, DEFAULTS.stateDir);
  raw.caBundleOut ??= join(stateDir, CA_BUNDLE_FILE);
  if (raw.logFormat === undefined && io.stdout.isTTY === true) raw.logFormat = 'shorthand';
}

/** What the terminal banner shows, from the started boundary (bound ports, not the flags' port 0). */
function banner(config: Config, boundary: Boundary, cwd: string): string {
  const { attached } = config;
  return formatRunBanner({
    mode: attached === undefined ? `standalone, policy ${config.policyFile}` : `attached to supervisor ${formatAuthority(attached.supervisor.host, attached.supervisor.port)}`,
    proxy: boundary.proxyAddress(),
    dns: boundary.transparent.dnsAddress(),
    admin: boundary.adminAddress(),
    caFile: resolve(cwd, config.caOut ?? join(config.stateDir, CA_CERT_FILE)),
    bundleFile: config.caBundleOut,
    interception: String(boundary.readiness().interception),
    capture: { cidr: config.syntheticCidr, ...boundary.transparent.capture() },
  });
}

/** The first `nameserver` line of resolv.conf text, as an IP literal (zone ids dropped). */
function firstNameserver(text: string): string | undefined {
  for (const line of text.split('\n')) {
    const [word, value] = line.trim().split(/\s+/);
    if (word === 'nameserver' && value !== undefined) return value.split('%')[0];
  }
  return undefined;
}

/**
 * resolv.conf's search list (the last `search` or `domain` line wins, as in glibc), keeping only DNS names:
 * the workload shares this file, and policy DNS answers NXDOMAIN under these domains.
 */
export function resolvSearchDomains(text: string): string[] {
  let domains: string[] = [];
  for (const line of text.split('\n')) {
    const [word, ...values] = line.trim().split(/\s+/);
    if (word === 'search' || word === 'domain') domains = values;
  }
  const names = domains.map((d) => normaliseHost(d)).flatMap((h) => (h.ok && h.kind === 'name' ? [h.host] : []));
  return [...new Set(names)].slice(0, MAX_SEARCH_DOMAINS);
}

/**
 * The cached upstream resolver; close() stops following the hosts file. `resolvConf` is the text of
 * /etc/resolv.conf as runCommand read it (undefined: unreadable), consulted when --upstream-dns is absent.
 */
export async function buildResolver(config: Config, now: () => number, logger: Logger, resolvConf?: string) {
  let server = config.upstreamDns;
  if (server === undefined) {
    const ns = resolvConf === undefined ? undefined : firstNameserver(resolvConf);
    if (ns === undefined) throw new Error(`no nameserver in ${RESOLV_CONF}; pass --upstream-dns HOST:PORT`);
    server = { host: ns, port: DNS_PORT };
  }
  // A resolv.conf that names boundary itself (dnsPolicy None with 127.0.0.1) would loop back into policy DNS; a loop
  // no configuration shows is caught when it happens (dns/own-queries.ts).
  if (isSelfAddress(prepareSelfAddresses([{ ip: config.dnsListen.host, port: config.dnsListen.port }]), server.host, server.port)) {
    throw new BoundaryError(
      'CONFIG_INVALID',
      `the upstream DNS server ${server.host}:${server.port} reaches boundary's own --dns-listen ${config.dnsListen.host}:${config.dnsListen.port}, ` +
        'so every lookup would loop back into policy DNS. ' +
        "In a pod keep dnsPolicy: ClusterFirst, so /etc/resolv.conf names the cluster DNS (boundary receives the workload's queries " +
        "through init-netns' redirect, not through resolv.conf); elsewhere pass --upstream-dns HOST:PORT",
    );
  }
  const hosts = config.hostsFile === undefined ? undefined : await openHostsFile({ path: config.hostsFile, logger });
  const upstream = createUpstreamResolver({ servers: [server], ...(hosts === undefined ? {} : { hosts: hosts.table }) });
  const resolver = createCachingResolver(upstream, { now });
  // Answers taken from the old hosts file must not outlive it.
  hosts?.subscribe(() => resolver.clear());
  return { resolver, ownQueries: upstream.ownQueries, hosts, close: () => hosts?.close() };
}

/** `10.96.0.10:53` out of getServers()'s `10.96.0.10`, `[fd00::a]:5353` or `fd00::a`. */
export function withDnsPort(server: string): string {
  if (isIP(server) === 4) return `${server}:${DNS_PORT}`;
  if (isIP(server) === 6) return `[${server}]:${DNS_PORT}`;
  return server;
}

/** The supervisor's name through the system resolver (hosts file, cluster DNS), as addresses. */
const systemLookup: ControlLookup = Object.assign(
  async function systemLookup(hostname: string): Promise<readonly string[]> {
    return (await dnsLookup(hostname, { all: true })).map((entry) => entry.address);
  },
  {
    // getaddrinfo reads /etc/resolv.conf itself; node's resolver was initialised from the same file, so its
    // list names the servers that getaddrinfo asked.
    resolvers: () => getServers().map(withDnsPort),
  },
);

/** The watched credentials file, undefined without --credentials, or exit code 1 when the first load fails. */
async function openCredentials(config: Config, io: CliIo, logger: Logger): Promise<FileCredentialSource | undefined | number> {
  if (config.credentialsFile === undefined) return undefined;
  // Loaded only with --credentials: its YAML reader (the yaml library, ~70 modules) is idle heap otherwise.
  const { createFileCredentialSource } = await import('../../credentials/file-source.js');
  try {
    return await createFileCredentialSource({
      path: config.credentialsFile,
      env: io.env,
      watch: true,
      // Revision numbers only: key names and values never reach a log line.
      onChange: (next) => logger.info({ revision: next.revision }, 'credentials reloaded'),
      onError: (err) => logger.error({ code: err.code, issues: err.issues }, 'credentials reload failed; the last good set stays in use'),
    });
  } catch (err) {
    if (!isBoundaryError(err)) throw err;
    io.stderr.write(`boundary run: ${err.message} (${err.code})\n`);
    for (const issue of err.issues) io.stderr.write(`  ${issue.path}${issue.line === undefined ? '' : ` (line ${issue.line})`}: ${issue.message} (${issue.code})\n`);
    return 1;
  }
}

export const runCommand: Command = async function runCommand(argv: readonly string[], io: CliIo): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(RUN_HELP);
    return 0;
  }
  const raw = parseRunFlags(argv, io.cwd);
  const usage = typeof raw === 'string' ? raw : raw.policyFile === undefined && raw.supervisor === undefined ? NO_SOURCE : undefined;
  if (typeof raw === 'string' || usage !== undefined) {
    io.stderr.write(`boundary run: ${usage} (USAGE)\n\n${RUN_HELP}`);
    return 2;
  }
  setRunDefaults(raw, io);
  // Read once: its search list goes to policy DNS, its first nameserver is the default upstream.
  const resolvConf = await readFile(RESOLV_CONF, 'utf8').catch(() => undefined);
  raw.searchDomains = resolvSearchDomains(resolvConf ?? '');
  // A pod's hostname is its name: stable across container restarts, so a restart supersedes its old session.
  if (raw.supervisor !== undefined && raw.instanceId === undefined && io.env.HOSTNAME) raw.instanceId = io.env.HOSTNAME;
  let config: Config;
  try {
    config = parseConfig(raw);
  } catch (err) {
    if (!isBoundaryError(err)) throw err;
    for (const issue of err.issues) io.stderr.write(`boundary run: ${issue.path}: ${issue.message} (${issue.code})\n`);
    return 2;
  }
  const logger = createLogger({ format: config.logFormat, now: io.now });
  const credentials = await openCredentials(config, io, logger);
  if (typeof credentials === 'number') return credentials;
  const dns = await buildResolver(config, io.now, logger, resolvConf);
  const boundary = createBoundary(config, {
    ...(credentials === undefined ? {} : { credentials }),
    resolver: dns.resolver,
    ownQueries: dns.ownQueries,
    now: io.now,
    logger,
    registry: io.metricsOff === true ? new MetricsOffRegistry() : new Registry(),
    controlLookup: systemLookup,
    version: readPackageVersion(),
  });
  try {
    await boundary.start();
  } catch (err) {
    await boundary.close().catch(() => undefined);
    await credentials?.close();
    dns.close();
    if (!isBoundaryError(err)) throw err;
    io.stderr.write(`boundary run: ${err.message} (${err.code})\n`);
    for (const issue of err.issues) io.stderr.write(`  ${issue.path}${issue.line === undefined ? '' : ` (line ${issue.line})`}: ${issue.message} (${issue.code})\n`);
    return 1;
  }
  if (io.stdout.isTTY === true) {
    // The start lines first: the banner is then the last thing on the screen.
    await new Promise<void>((done) => logger.flush(() => done()));
    io.stderr.write(banner(config, boundary, io.cwd));
  }
  if (!io.signal.aborted) await new Promise<void>((done) => io.signal.addEventListener('abort', () => done(), { once: true }));
  // main.ts aborts with the signal's name (SIGTERM, SIGINT); anything else is a plain close.
  const reason: unknown = io.signal.reason;
  io.exitDeadline?.(config.shutdownDrainMs);
  const outcome = await boundary.close(typeof reason === 'string' ? { signal: reason } : {});
  await credentials?.close();
  dns.close();
  return outcome === 'clean' ? EXIT_OK : EXIT_DRAIN_FORCED;
};
