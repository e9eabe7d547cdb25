// `boundary supervisor`: runs the reference supervisor until the CLI's signal fires. Parses its own
// arguments; everything else, reading and following the TLS folder included, is in supervisor/supervisor.ts.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Registry } from 'prom-client';
import { isBoundaryError } from '../../shared/errors.js';
import { parseAuthority } from '../../net/host.js';
import { MIN_ADMIN_TOKEN_CHARS } from '../../supervisor/admin-auth.js';
import { ATTACH_DEADLINE_MS, createSupervisor } from '../../supervisor/supervisor.js';
import type { WithdrawalHookConfig } from '../../supervisor/withdrawal-hook.js';
import { createLogger, LOG_FORMATS, type LogFormat } from '../../telemetry/logger.js';
import type { CliIo, Command } from './io.js';

// Every interface: a supervisor serves boundaries in other pods. Only mTLS peers from its CA get past the handshake.
const DEFAULT_LISTEN = '0.0.0.0:5500';
// Loopback unless told otherwise: the admin API opens shells into sandboxes.
const DEFAULT_ADMIN_LISTEN = '127.0.0.1:9902';
const OFF = 'off';
const MAX_ATTACH_DEADLINE_S = 86_400;

const USAGE = `Usage:
  boundary supervisor --tls-dir DIR --policies DIR (--admin-token-file FILE | --admin-tls | --admin-listen off)
                      [--listen HOST:PORT] [--credentials FILE] [--middleware-config FILE] [--admin-listen HOST:PORT|off]
                      [--metrics-listen HOST:PORT|off] [--attach-deadline SECONDS] [--trust-domain DOMAIN]
                      [--state-dir DIR | --database-url URL | --database-url-file FILE]
                      [--withdrawal-hook PATH [--withdrawal-hook-arg ARG ...]]
                      [--withdrawal-webhook URL [--withdrawal-webhook-token-file FILE] [--withdrawal-webhook-ca FILE]]
                      [--log-format json|shorthand]

--listen            control listener, mTLS HTTP/2 (default ${DEFAULT_LISTEN}: every IPv4 interface, because the
                    boundaries it serves run in other pods; each must present a client certificate from the
                    --tls-dir CA. [::]:5500 for IPv6; 127.0.0.1:5500 keeps it on this host)
--tls-dir           DIR/ca.pem (the CA boundaries' certificates must chain to), DIR/cert.pem, DIR/key.pem
                    (this supervisor's serving certificate), as written by 'boundary pki issue --server';
                    watched: a renewal or a new CA that passes the checks applies to new connections, no restart
--policies          DIR/<sandbox-id>.yaml, or DIR/default.yaml for any other sandbox; watched, pushed on change
--credentials       credentials file (same format as 'boundary run --credentials'); watched, pushed on change
--middleware-config external network middleware services (same YAML as 'boundary run --middleware-config'; CA
                    files read here), registered on every attached boundary; read at start. See
                    docs/supervisor.md#middleware-services
--admin-listen      operator API (default ${DEFAULT_ADMIN_LISTEN}; 'off' for none): GET /v1/sandboxes,
                    PUT /v1/sandboxes/<id>/instances/<instance>, /healthz, /readyz, and relays to a loopback port
                    of a sandbox (one its boundary lists in --relay-allow) as POST /v1/sandboxes/<id>/relay?port=N
                    (Upgrade: boundary-relay) or as CONNECT <id>:<port> (optional header boundary-instance: <instance>).
                    Every route needs an operator: --admin-token-file, --admin-tls or both. No credentials: 401
                    (CONNECT: 407); a wrong token or a certificate that names no operator: 403.
--admin-token-file  FILE holds the bearer token (trimmed, at least ${MIN_ADMIN_TOKEN_CHARS} characters); re-checked on every
                    request, so a rotated Kubernetes Secret applies without a restart. Send Authorization: Bearer
                    TOKEN; CONNECT also takes Proxy-Authorization: Bearer TOKEN or Basic base64(<any>:TOKEN), e.g.
                    ssh -o ProxyCommand='socat - PROXY:127.0.0.1:%h:%p,proxyport=9902,proxyauth=op:TOKEN' -p 22 sb-1
--admin-tls         the admin listener speaks HTTPS with the --tls-dir certificate and accepts client certificates
                    from its CA naming spiffe://<trust-domain>/operator/<name> ('boundary pki issue --operator')
--metrics-listen    GET /metrics (process and Node.js metrics), /healthz and /readyz without credentials; nothing
                    else (default: off, also written 'off'; 0.0.0.0:9090 in a pod, for Prometheus and kubelet probes)
--attach-deadline   seconds an expected or detached instance may take to attach before it is withdrawn
                    (default ${ATTACH_DEADLINE_MS / 1000})
--trust-domain      accept only client certificates (sandbox and operator) of this SPIFFE trust domain
--state-dir         one replica: sandboxes, generations, expected instances, deadlines and withdrawals survive a
                    restart in DIR/supervisor-state.json (a PersistentVolume in a pod; created 0700 when missing,
                    written at start). A write that fails is retried every second; until one succeeds admin calls
                    answer 503 and /readyz says why. Without it and without a database they live in memory: a
                    restart forgets expected instances
--database-url      any number of replicas share that state in PostgreSQL (postgresql://USER@HOST/DB); put a
                    password in PGPASSWORD or a PGPASSFILE, or give the whole URL in --database-url-file FILE
--withdrawal-hook   run PATH (with each --withdrawal-hook-arg, no shell) for every withdrawal: the withdrawal as
                    JSON on stdin and in BOUNDARY_WITHDRAWAL_* variables; exit 0 acknowledges, anything else is
                    retried with backoff until it does
--withdrawal-webhook POST every withdrawal as JSON to URL (header idempotency-key: the withdrawal id); any 2xx
                    acknowledges. --withdrawal-webhook-token-file sends Authorization: Bearer (re-read every time),
                    --withdrawal-webhook-ca verifies an https URL against FILE instead of the system CAs
`;

class UsageError extends Error {}

const VALUE_FLAGS = [
  '--listen',
  '--tls-dir',
  '--policies',
  '--credentials',
  '--middleware-config',
  '--admin-listen',
  '--admin-token-file',
  '--metrics-listen',
  '--attach-deadline',
  '--trust-domain',
  '--log-format',
  '--state-dir',
  '--database-url',
  '--database-url-file',
  '--withdrawal-hook',
  '--withdrawal-webhook',
  '--withdrawal-webhook-token-file',
  '--withdrawal-webhook-ca',
] as const;
/** May be given more than once: each is one argument of the withdrawal hook, in order. */
const HOOK_ARG_FLAG = '--withdrawal-hook-arg';
type Flag = (typeof VALUE_FLAGS)[number];

function parseArgs(args: readonly string[]): { values: Map<Flag, string>; hookArgs: string[]; help: boolean; adminTls: boolean } {
  const values = new Map<Flag, string>();
  const hookArgs: string[] = [];
  let help = false;
  let adminTls = false;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] ?? '';
    if (arg === '--help' || arg === '-h') {
      help = true;
      continue;
    }
    if (arg === '--admin-tls') {
      if (adminTls) throw new UsageError('--admin-tls given twice');
      adminTls = true;
      continue;
    }
    // `--flag=value` too: Kubernetes manifests write args that way.
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    if (flag === HOOK_ARG_FLAG) {
      // Any text, a leading dash included: it is the hook's argument, not a flag of ours.
      const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
      if (value === undefined) throw new UsageError(`${flag} needs a value`);
      hookArgs.push(value);
      continue;
    }
    if (!(VALUE_FLAGS as readonly string[]).includes(flag)) throw new UsageError(`unexpected argument '${arg}'`);
    const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
    if (value === undefined || (eq < 0 && value.startsWith('--'))) throw new UsageError(`${flag} needs a value`);
    if (values.has(flag as Flag)) throw new UsageError(`${flag} given twice`);
    values.set(flag as Flag, value);
  }
  return { values, hookArgs, help, adminTls };
}

function hostPort(flag: string, text: string): { host: string; port: number } {
  const parsed = parseAuthority(text);
  if (!parsed.ok) throw new UsageError(`${flag}: ${parsed.message}`);
  if (parsed.kind === 'name' && parsed.host !== 'localhost') throw new UsageError(`${flag}: expected an IP address and port, got ${text}`);
  return { host: parsed.host === 'localhost' ? '127.0.0.1' : parsed.host, port: parsed.port };
}

export const supervisorCommand: Command = async function supervisorCommand(argv: readonly string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  let options: ReturnType<typeof readOptions>;
  try {
    parsed = parseArgs(argv);
    if (parsed.help) {
      io.stdout.write(USAGE);
      return 0;
    }
    options = readOptions(parsed.values, parsed.hookArgs, parsed.adminTls, io);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`boundary supervisor: ${err.message} (USAGE)\n\n${USAGE}`);
    return 2;
  }
  const logger = createLogger({ format: options.logFormat, level: 'info', now: io.now });
  try {
    // Read here, not taken from argv: a URL with a password would show in every process listing.
    const databaseUrl = options.databaseUrlFile === undefined ? options.databaseUrl : (await readFile(options.databaseUrlFile, 'utf8')).trim();
    const supervisor = createSupervisor(
      {
        listen: options.listen,
        tls: { dir: options.tlsDir },
        policiesDir: options.policies,
        credentialsFile: options.credentials,
        middlewareConfig: options.middlewareConfig,
        adminListen: options.adminListen,
        adminTokenFile: options.adminTokenFile,
        adminTls: options.adminTls,
        metricsListen: options.metricsListen,
        attachDeadlineMs: options.attachDeadlineMs,
        trustDomain: options.trustDomain,
        stateDir: options.stateDir,
        databaseUrl,
        withdrawalHook: options.withdrawalHook,
      },
      { now: io.now, logger, env: io.env, registry: new Registry() },
    );
    await supervisor.start();
    if (!io.signal.aborted) await new Promise<void>((done) => io.signal.addEventListener('abort', () => done(), { once: true }));
    await supervisor.close();
    logger.flush();
    return 0;
  } catch (err) {
    const code = isBoundaryError(err) ? err.code : ((err as NodeJS.ErrnoException).code ?? 'ERROR');
    io.stderr.write(`boundary supervisor: ${(err as Error).message} (${code})\n`);
    logger.flush();
    return 1;
  }
};

function readOptions(values: Map<Flag, string>, hookArgs: readonly string[], adminTls: boolean, io: CliIo) {
  const tlsDir = values.get('--tls-dir');
  const policies = values.get('--policies');
  if (tlsDir === undefined) throw new UsageError('--tls-dir DIR is required');
  if (policies === undefined) throw new UsageError('--policies DIR is required');
  const deadlineText = values.get('--attach-deadline');
  const deadline = deadlineText === undefined ? ATTACH_DEADLINE_MS / 1000 : Number(deadlineText);
  if (!(Number.isFinite(deadline) && deadline > 0 && deadline <= MAX_ATTACH_DEADLINE_S)) {
    throw new UsageError(`--attach-deadline must be a number of seconds from 1 to ${MAX_ATTACH_DEADLINE_S}`);
  }
  const logFormat = values.get('--log-format') ?? 'json';
  if (!(LOG_FORMATS as readonly string[]).includes(logFormat)) throw new UsageError('--log-format must be json or shorthand');
  const admin = values.get('--admin-listen') ?? DEFAULT_ADMIN_LISTEN;
  const tokenFile = values.get('--admin-token-file');
  if (admin === OFF && (tokenFile !== undefined || adminTls)) throw new UsageError('--admin-token-file and --admin-tls need the admin listener; drop --admin-listen off');
  if (admin !== OFF && tokenFile === undefined && !adminTls) {
    throw new UsageError(`the admin listener (${admin}) needs --admin-token-file FILE, --admin-tls or both; or --admin-listen off`);
  }
  const metrics = values.get('--metrics-listen');
  const credentials = values.get('--credentials');
  const stateDir = values.get('--state-dir');
  const databaseUrl = values.get('--database-url');
  const databaseUrlFile = values.get('--database-url-file');
  if ([stateDir, databaseUrl, databaseUrlFile].filter((v) => v !== undefined).length > 1) {
    throw new UsageError('give one of --state-dir, --database-url and --database-url-file: one replica keeps its state in a directory, replicas share a database');
  }
  const path = (value: string | undefined): string | undefined => (value === undefined ? undefined : resolve(io.cwd, value));
  return {
    listen: hostPort('--listen', values.get('--listen') ?? DEFAULT_LISTEN),
    tlsDir: resolve(io.cwd, tlsDir),
    policies: resolve(io.cwd, policies),
    credentials: credentials === undefined ? undefined : resolve(io.cwd, credentials),
    middlewareConfig: path(values.get('--middleware-config')),
    adminListen: admin === OFF ? undefined : hostPort('--admin-listen', admin),
    adminTokenFile: tokenFile === undefined ? undefined : resolve(io.cwd, tokenFile),
    adminTls,
    metricsListen: metrics === undefined || metrics === OFF ? undefined : hostPort('--metrics-listen', metrics),
    attachDeadlineMs: Math.round(deadline * 1000),
    trustDomain: values.get('--trust-domain'),
    logFormat: logFormat as LogFormat,
    stateDir: path(stateDir),
    databaseUrl,
    databaseUrlFile: path(databaseUrlFile),
    withdrawalHook: readHook(values, hookArgs, path),
  };
}

function readHook(values: Map<Flag, string>, hookArgs: readonly string[], path: (value: string | undefined) => string | undefined): WithdrawalHookConfig | undefined {
  const command = values.get('--withdrawal-hook');
  const url = values.get('--withdrawal-webhook');
  if (command === undefined && hookArgs.length > 0) throw new UsageError(`${HOOK_ARG_FLAG} needs --withdrawal-hook PATH`);
  const tokenFile = path(values.get('--withdrawal-webhook-token-file'));
  const caFile = path(values.get('--withdrawal-webhook-ca'));
  if (url === undefined && (tokenFile !== undefined || caFile !== undefined)) {
    throw new UsageError('--withdrawal-webhook-token-file and --withdrawal-webhook-ca need --withdrawal-webhook URL');
  }
  if (url !== undefined && !/^https?:\/\//.test(url)) throw new UsageError('--withdrawal-webhook must be an http:// or https:// URL');
  if (command === undefined && url === undefined) return undefined;
  return {
    ...(command === undefined ? {} : { command: [command.includes('/') ? (path(command) ?? command) : command, ...hookArgs] }),
    ...(url === undefined ? {} : { webhook: { url, ...(tokenFile === undefined ? {} : { tokenFile }), ...(caFile === undefined ? {} : { caFile }) } }),
  };
}
