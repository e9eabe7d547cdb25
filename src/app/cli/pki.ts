// `boundary pki init|issue`: create the control-channel CA and issue sandbox client, operator client or
// supervisor server certificates into a directory. Parses its own arguments; all file work is in pki/issue.ts.
import { resolve } from 'node:path';
import { type ErrorCode, isBoundaryError } from '../../shared/errors.js';
import { DEFAULT_TRUST_DOMAIN, initPki, ISSUED_VALIDITY_DAYS, issueToDir } from '../../pki/issue.js';
import type { CliIo, Command } from './io.js';

const USAGE = `Usage:
  boundary pki init  --dir DIR [--trust-domain DOMAIN] [--days N]
  boundary pki issue --dir DIR --sandbox ID --out OUT [--days N]
  boundary pki issue --dir DIR --operator NAME --out OUT [--days N]
  boundary pki issue --dir DIR --server NAME [NAME...] --out OUT [--days N]

init   creates DIR/ca.pem, DIR/ca.key (mode 0600) and DIR/trust-domain (default ${DEFAULT_TRUST_DOMAIN}).
       The CA's subject is O=<trust domain>, CN=boundary control CA <random id>: unique per init.
       An existing CA is never overwritten.
issue  signs a certificate with the CA in DIR and writes exactly OUT/ca.pem, OUT/cert.pem and
       OUT/key.pem (mode 0600).
       --sandbox ID    client certificate for a boundary: URI SAN spiffe://<trust-domain>/sandbox/ID
       --operator NAME client certificate for a person or tool using the supervisor's admin listener
                       (--admin-tls): URI SAN spiffe://<trust-domain>/operator/NAME; never a sandbox identity
       --server NAME   server certificate for a supervisor: DNS names and IP addresses (repeatable)
       --days N        validity in days (default ${ISSUED_VALIDITY_DAYS} for issue)
`;

class UsageError extends Error {}

interface Parsed {
  readonly dir?: string;
  readonly out?: string;
  readonly trustDomain?: string;
  readonly sandbox?: string;
  readonly operator?: string;
  readonly servers: string[];
  readonly days?: number;
  readonly help: boolean;
}

const VALUE_FLAGS = new Set(['--dir', '--out', '--trust-domain', '--sandbox', '--operator', '--days']);

function parseArgs(args: readonly string[]): Parsed {
  const values = new Map<string, string>();
  const servers: string[] = [];
  let help = false;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] ?? '';
    if (arg === '--help' || arg === '-h') {
      help = true;
    } else if (arg === '--server') {
      // --server takes one or more names, up to the next flag.
      const start = servers.length;
      while (i + 1 < args.length && !(args[i + 1] ?? '').startsWith('--')) servers.push(args[++i] ?? '');
      if (servers.length === start) throw new UsageError('--server needs at least one name');
    } else if (VALUE_FLAGS.has(arg)) {
      const value = args[i + 1];
      if (value === undefined || value.startsWith('--')) throw new UsageError(`${arg} needs a value`);
      if (values.has(arg)) throw new UsageError(`${arg} given twice`);
      values.set(arg, value);
      i += 1;
    } else {
      throw new UsageError(`unexpected argument '${arg}'`);
    }
  }
  const daysText = values.get('--days');
  const days = daysText === undefined ? undefined : Number(daysText);
  if (days !== undefined && !(Number.isInteger(days) && days >= 1 && days <= 36_500)) {
    throw new UsageError('--days must be an integer from 1 to 36500');
  }
  const pick = (flag: string) => values.get(flag);
  return {
    help,
    servers,
    ...(pick('--dir') === undefined ? {} : { dir: pick('--dir') }),
    ...(pick('--out') === undefined ? {} : { out: pick('--out') }),
    ...(pick('--trust-domain') === undefined ? {} : { trustDomain: pick('--trust-domain') }),
    ...(pick('--sandbox') === undefined ? {} : { sandbox: pick('--sandbox') }),
    ...(pick('--operator') === undefined ? {} : { operator: pick('--operator') }),
    ...(days === undefined ? {} : { days }),
  } as Parsed;
}

async function runInit(parsed: Parsed, io: CliIo): Promise<number> {
  if (parsed.dir === undefined) throw new UsageError('pki init needs --dir DIR');
  if (parsed.out !== undefined || parsed.sandbox !== undefined || parsed.operator !== undefined || parsed.servers.length > 0) {
    throw new UsageError('pki init takes only --dir, --trust-domain and --days');
  }
  const result = await initPki({
    dir: resolve(io.cwd, parsed.dir),
    now: io.now,
    ...(parsed.trustDomain === undefined ? {} : { trustDomain: parsed.trustDomain }),
    ...(parsed.days === undefined ? {} : { validityDays: parsed.days }),
  });
  io.stdout.write(`wrote ${result.caPath}\nwrote ${result.keyPath}\nwrote ${result.trustDomainPath}\n`);
  io.stdout.write(`trust domain ${result.trustDomain}\nCA subject ${result.ca.subject}\n`);
  return 0;
}

async function runIssue(parsed: Parsed, io: CliIo): Promise<number> {
  if (parsed.dir === undefined || parsed.out === undefined) throw new UsageError('pki issue needs --dir DIR and --out OUT');
  if ([parsed.sandbox !== undefined, parsed.operator !== undefined, parsed.servers.length > 0].filter(Boolean).length !== 1) {
    throw new UsageError('pki issue needs exactly one of --sandbox ID, --operator NAME or --server NAME...');
  }
  if (parsed.trustDomain !== undefined) throw new UsageError('--trust-domain belongs to pki init (it is stored in DIR)');
  const result = await issueToDir({
    dir: resolve(io.cwd, parsed.dir),
    out: resolve(io.cwd, parsed.out),
    now: io.now,
    ...(parsed.sandbox !== undefined ? { sandboxId: parsed.sandbox } : parsed.operator !== undefined ? { operator: parsed.operator } : { names: parsed.servers }),
    ...(parsed.days === undefined ? {} : { validityDays: parsed.days }),
  });
  io.stdout.write(`wrote ${result.files.ca}\nwrote ${result.files.cert}\nwrote ${result.files.key}\n`);
  if (result.spiffeId !== undefined) io.stdout.write(`identity ${result.spiffeId}\n`);
  io.stdout.write(`valid until ${new Date(result.notAfter).toISOString()}\n`);
  return 0;
}

export const pkiCommand: Command = async function pkiCommand(argv, io) {
  const [sub, ...rest] = argv;
  try {
    if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
      io.stdout.write(USAGE);
      return sub === undefined ? 2 : 0;
    }
    const parsed = parseArgs(rest);
    if (parsed.help) {
      io.stdout.write(USAGE);
      return 0;
    }
    if (sub === 'init') return await runInit(parsed, io);
    if (sub === 'issue') return await runIssue(parsed, io);
    throw new UsageError(`unknown pki subcommand '${sub}'`);
  } catch (err) {
    return report(err, io);
  }
};

function report(err: unknown, io: CliIo): number {
  if (err instanceof UsageError) {
    io.stderr.write(`boundary pki: ${err.message} (USAGE)\n\n${USAGE}`);
    return 2;
  }
  if (isBoundaryError(err)) {
    const code: ErrorCode = err.code;
    io.stderr.write(`boundary pki: ${err.message} (${code})\n`);
    return code === 'USAGE' || code === 'PKI_NAME_INVALID' ? 2 : 1;
  }
  const errno = (err as NodeJS.ErrnoException).code;
  io.stderr.write(`boundary pki: ${err instanceof Error ? err.message : String(err)}${errno ? ` (${errno})` : ''}\n`);
  return 1;
}
