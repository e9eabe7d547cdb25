// `boundary supervisor`: runs the reference supervisor until the CLI's signal fires. Parses its own
// arguments; everything else, reading and following the TLS folder included, is in supervisor/supervisor.ts.
import { resolve } from 'node:path';
import { Registry } from 'prom-client';
import { isBoundaryError } from '../errors.js';
import { parseAuthority } from '../net/host.js';
import { MIN_ADMIN_TOKEN_CHARS } from '../supervisor/admin-auth.js';
import { ATTACH_DEADLINE_MS, createSupervisor } from '../supervisor/supervisor.js';
import { createLogger, LOG_FORMATS, type LogFormat } from '../telemetry/logger.js';
import type { CliIo, Command } from './io.js';

const DEFAULT_LISTEN = '0.0.0.0:5500';
// Loopback unless told otherwise: the admin API opens shells into sandboxes.
const DEFAULT_ADMIN_LISTEN = '127.0.0.1:9902';
const OFF = 'off';
const MAX_ATTACH_DEADLINE_S = 86_400;

const USAGE = `Usage:
  boundary supervisor --tls-dir DIR --policies DIR (--admin-token-file FILE | --admin-tls | --admin-listen off)
                      [--listen HOST:PORT] [--credentials FILE] [--admin-listen HOST:PORT|off]
                      [--metrics-listen HOST:PORT] [--attach-deadline SECONDS] [--trust-domain DOMAIN]
                      [--log-format json|shorthand]

--listen            control listener, mTLS HTTP/2 (default ${DEFAULT_LISTEN})
--tls-dir           DIR/ca.pem (the CA boundaries' certificates must chain to), DIR/cert.pem, DIR/key.pem
                    (this supervisor's serving certificate), as written by 'boundary pki issue --server';
                    watched: a renewal or a new CA that passes the checks applies to new connections, no restart
--policies          DIR/<sandbox-id>.yaml, or DIR/default.yaml for any other sandbox; watched, pushed on change
--credentials       credentials file (same format as 'boundary run --credentials'); watched, pushed on change
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
                    else (default: off; 0.0.0.0:9090 in a pod, for Prometheus and kubelet probes)
--attach-deadline   seconds an expected or detached instance may take to attach before it is withdrawn
                    (default ${ATTACH_DEADLINE_MS / 1000})
--trust-domain      accept only client certificates (sandbox and operator) of this SPIFFE trust domain
`;

class UsageError extends Error {}

const VALUE_FLAGS = [
  '--listen',
  '--tls-dir',
  '--policies',
  '--credentials',
  '--admin-listen',
  '--admin-token-file',
  '--metrics-listen',
  '--attach-deadline',
  '--trust-domain',
  '--log-format',
] as const;
type Flag = (typeof VALUE_FLAGS)[number];

function parseArgs(args: readonly string[]): { values: Map<Flag, string>; help: boolean; adminTls: boolean } {
  const values = new Map<Flag, string>();
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
    if (!(VALUE_FLAGS as readonly string[]).includes(flag)) throw new UsageError(`unexpected argument '${arg}'`);
    const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
    if (value === undefined || (eq < 0 && value.startsWith('--'))) throw new UsageError(`${flag} needs a value`);
    if (values.has(flag as Flag)) throw new UsageError(`${flag} given twice`);
    values.set(flag as Flag, value);
  }
  return { values, help, adminTls };
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
    options = readOptions(parsed.values, parsed.adminTls, io);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`boundary supervisor: ${err.message} (USAGE)\n\n${USAGE}`);
    return 2;
  }
  const logger = createLogger({ format: options.logFormat, level: 'info', now: io.now });
  try {
    const supervisor = createSupervisor(
      {
        listen: options.listen,
        tls: { dir: options.tlsDir },
        policiesDir: options.policies,
        credentialsFile: options.credentials,
        adminListen: options.adminListen,
        adminTokenFile: options.adminTokenFile,
        adminTls: options.adminTls,
        metricsListen: options.metricsListen,
        attachDeadlineMs: options.attachDeadlineMs,
        trustDomain: options.trustDomain,
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

function readOptions(values: Map<Flag, string>, adminTls: boolean, io: CliIo) {
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
  return {
    listen: hostPort('--listen', values.get('--listen') ?? DEFAULT_LISTEN),
    tlsDir: resolve(io.cwd, tlsDir),
    policies: resolve(io.cwd, policies),
    credentials: credentials === undefined ? undefined : resolve(io.cwd, credentials),
    adminListen: admin === OFF ? undefined : hostPort('--admin-listen', admin),
    adminTokenFile: tokenFile === undefined ? undefined : resolve(io.cwd, tokenFile),
    adminTls,
    metricsListen: metrics === undefined ? undefined : hostPort('--metrics-listen', metrics),
    attachDeadlineMs: Math.round(deadline * 1000),
    trustDomain: values.get('--trust-domain'),
    logFormat: logFormat as LogFormat,
  };
}
