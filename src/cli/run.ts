// `boundary run`: parses the run flags into a Config, builds the production deps (resolver, logger, registry,
// clock from io), starts the boundary and drains it when io.signal aborts. Exit codes: 0 ok, 1 failed, 2 usage.

import { lookup as dnsLookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { Registry } from 'prom-client';
import { createBoundary } from '../boundary.js';
import { createFileCredentialSource, type FileCredentialSource } from '../credentials/file-source.js';
import { type Config, parseConfig } from '../config.js';
import { isBoundaryError } from '../errors.js';
import { createUpstreamResolver } from '../dns/upstream.js';
import { parseHostsFile } from '../net/hosts.js';
import { createCachingResolver } from '../net/resolver-cache.js';
import { createLogger, type Logger } from '../telemetry/logger.js';
import type { CliIo, Command } from './io.js';

const RESOLV_CONF = '/etc/resolv.conf';
const DNS_PORT = 53;

export const RUN_HELP = `Usage: boundary run --policy FILE [options]
       boundary run --supervisor HOST:PORT --tls-dir DIR --sandbox-id ID [options]

  --policy FILE                     policy file (watched; a change loads as a new generation)
  --proxy-listen HOST:PORT          proxy listener (default 127.0.0.1:3128)
  --admin-listen HOST:PORT          /healthz /readyz /metrics (default 127.0.0.1:9901)
  --state-dir DIR                   interception CA and state (default .boundary)
  --ca-cert FILE --ca-key FILE      use this interception CA instead of creating one
  --ca-out FILE                     write the CA certificate here (default <state-dir>/ca.pem)
  --upstream-ca FILE                extra trust anchors for upstream TLS (beside the system roots)
  --upstream-dns HOST:PORT          trusted DNS server (default: first nameserver in /etc/resolv.conf)
  --hosts FILE                      hosts file consulted before DNS
  --dns-listen HOST:PORT            policy DNS, UDP and TCP (default 127.0.0.1:15053; 127.0.0.1:53 in a pod)
  --synthetic-cidr CIDR             synthetic answers, captured per (address, port) (default 198.18.0.0/15)
  --log-format json|shorthand       audit line format (default json)
  --on-invalid-policy keep|deny-all what an invalid policy change does (default keep)
  --unsafe-allow-loopback-upstream  let upstreams on 127.0.0.0/8 and ::1 through (development only)
  --credentials FILE                credential providers (YAML, watched; a rotation applies to the next request)

Attached mode (instead of --policy): policy, credentials and relays come from the supervisor; until its
first policy is effective all egress is denied and /readyz is 503 with the reason.
  --supervisor HOST:PORT            the supervisor's mTLS HTTP/2 control listener
  --tls-dir DIR                     DIR/ca.pem, cert.pem, key.pem ('boundary pki issue --sandbox ID --out DIR')
  --sandbox-id ID                   this sandbox, as named in the client certificate
  --instance-id ID                  stable across restarts of this instance (default $HOSTNAME, else the sandbox id)
  --relay-allow LIST                loopback PORT or HOST:PORT entries a relay may reach (default: none)
  (--on-invalid-policy is standalone only; attached, the supervisor's failure mode governs pushed policies)
`;

const VALUE_FLAGS: Readonly<Record<string, string>> = {
  '--policy': 'policyFile',
  '--proxy-listen': 'proxyListen',
  '--admin-listen': 'adminListen',
  '--state-dir': 'stateDir',
  '--ca-cert': 'caCert',
  '--ca-key': 'caKey',
  '--ca-out': 'caOut',
  '--upstream-ca': 'upstreamCa',
  '--upstream-dns': 'upstreamDns',
  '--hosts': 'hostsFile',
  '--dns-listen': 'dnsListen',
  '--synthetic-cidr': 'syntheticCidr',
  '--log-format': 'logFormat',
  '--on-invalid-policy': 'onInvalidPolicy',
  '--credentials': 'credentialsFile',
  '--supervisor': 'supervisor',
  '--tls-dir': 'tlsDir',
  '--sandbox-id': 'sandboxId',
  '--instance-id': 'instanceId',
  '--relay-allow': 'relayAllow',
};
const PATH_KEYS: ReadonlySet<string> = new Set(['policyFile', 'stateDir', 'caCert', 'caKey', 'caOut', 'upstreamCa', 'hostsFile', 'credentialsFile', 'tlsDir']);

/** Flags -> the raw input of parseConfig; paths resolved against cwd. Returns a usage message on error. */
export function parseRunFlags(argv: readonly string[], cwd: string): Record<string, unknown> | string {
  const raw: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    if (flag === '--unsafe-allow-loopback-upstream') {
      raw.unsafeAllowLoopbackUpstream = true;
      continue;
    }
    const key = VALUE_FLAGS[flag];
    if (key === undefined) return `unknown option ${arg}`;
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined) return `${flag} needs a value`;
    if (raw[key] !== undefined) return `${flag} given twice`;
    raw[key] = PATH_KEYS.has(key) && !isAbsolute(value) ? resolve(cwd, value) : value;
  }
  return raw;
}

/** The first `nameserver` line of resolv.conf text, as an IP literal (zone ids dropped). */
export function firstNameserver(text: string): string | undefined {
  for (const line of text.split('\n')) {
    const [word, value] = line.trim().split(/\s+/);
    if (word === 'nameserver' && value !== undefined) return value.split('%')[0];
  }
  return undefined;
}

async function buildResolver(config: Config, now: () => number) {
  let server = config.upstreamDns;
  if (server === undefined) {
    const ns = firstNameserver(await readFile(RESOLV_CONF, 'utf8'));
    if (ns === undefined) throw new Error(`no nameserver in ${RESOLV_CONF}; pass --upstream-dns HOST:PORT`);
    server = { host: ns, port: DNS_PORT };
  }
  // In a pod resolv.conf names boundary itself: asking it would only ever loop back into policy DNS.
  if (server.host === config.dnsListen.host && server.port === config.dnsListen.port) {
    throw new Error(`the upstream DNS server ${server.host}:${server.port} is boundary's own --dns-listen; pass --upstream-dns HOST:PORT`);
  }
  const hosts = config.hostsFile === undefined ? undefined : parseHostsFile(await readFile(config.hostsFile, 'utf8'));
  const upstream = createUpstreamResolver({ servers: [server], ...(hosts === undefined ? {} : { hosts }) });
  return createCachingResolver(upstream, { now });
}

/** The supervisor's name through the system resolver (hosts file, cluster DNS), as addresses. */
async function systemLookup(hostname: string): Promise<readonly string[]> {
  return (await dnsLookup(hostname, { all: true })).map((entry) => entry.address);
}

/** The watched credentials file, undefined without --credentials, or exit code 1 when the first load fails. */
async function openCredentials(config: Config, io: CliIo, logger: Logger): Promise<FileCredentialSource | undefined | number> {
  if (config.credentialsFile === undefined) return undefined;
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
  if (typeof raw === 'string') {
    io.stderr.write(`boundary run: ${raw} (USAGE)\n\n${RUN_HELP}`);
    return 2;
  }
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
  const boundary = createBoundary(config, {
    ...(credentials === undefined ? {} : { credentials }),
    resolver: await buildResolver(config, io.now),
    now: io.now,
    logger,
    registry: new Registry(),
    controlLookup: systemLookup,
    version: io.env.npm_package_version ?? '0.1.0',
  });
  try {
    await boundary.start();
  } catch (err) {
    await boundary.close().catch(() => undefined);
    await credentials?.close();
    if (!isBoundaryError(err)) throw err;
    io.stderr.write(`boundary run: ${err.message} (${err.code})\n`);
    for (const issue of err.issues) io.stderr.write(`  ${issue.path}${issue.line === undefined ? '' : ` (line ${issue.line})`}: ${issue.message} (${issue.code})\n`);
    return 1;
  }
  if (!io.signal.aborted) await new Promise<void>((done) => io.signal.addEventListener('abort', () => done(), { once: true }));
  await boundary.close();
  await credentials?.close();
  return 0;
};
