// `boundary identity serve`: the privileged half of binary identity (docs/identity.md#privilege). Reads /proc with
// CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, answers boundary's lookups on a unix socket, and does nothing else: no
// network listener, no policy, no traffic. Runs until io.signal aborts.

import { parseArgs } from 'node:util';
import { isAbsolute, resolve } from 'node:path';
import { isBoundaryError } from '../../shared/errors.js';
import { createProcIdentitySource } from '../../identity/proc-source.js';
import { createIdentityServer } from '../../identity/server.js';
import { createLogger } from '../../telemetry/logger.js';
import { LOG_FORMATS } from '../config.js';
import type { Command } from './io.js';

const HELP = `Usage: boundary identity serve --socket PATH [--proc-root DIR] [--log-format json|shorthand]

Answers boundary's process lookups (boundary run --identity-socket PATH) on a unix socket, mode 0660: its
owner and group may connect. Needs to read other uids' /proc/<pid>/fd and /proc/<pid>/exe: run it as uid 0
with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH only, in the workload's PID and network namespaces, with its
group set to boundary's (docs/identity.md#privilege).
  --socket PATH        where to listen (a stale socket there is replaced)
  --proc-root DIR      the process table to read (default /proc)
  --log-format FORMAT  json (default) or shorthand
`;

export const identityCommand: Command = async function identityCommand(argv, io) {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub !== 'serve') {
    (sub === undefined || sub === '--help' || sub === '-h' ? io.stdout : io.stderr).write(HELP);
    return sub === '--help' || sub === '-h' ? 0 : 2;
  }
  let values: { socket?: string | undefined; 'proc-root'?: string | undefined; 'log-format'?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({
      args: [...rest],
      options: { socket: { type: 'string' }, 'proc-root': { type: 'string' }, 'log-format': { type: 'string' }, help: { type: 'boolean' } },
      strict: true,
    }));
  } catch (err) {
    io.stderr.write(`boundary identity: ${err instanceof Error ? err.message : String(err)} (USAGE)\n\n${HELP}`);
    return 2;
  }
  if (values.help === true) {
    io.stdout.write(HELP);
    return 0;
  }
  const format = values['log-format'] ?? 'json';
  if (values.socket === undefined || !(LOG_FORMATS as readonly string[]).includes(format)) {
    io.stderr.write(`boundary identity: serve needs --socket PATH${values.socket === undefined ? '' : ` and --log-format ${LOG_FORMATS.join('|')}`} (USAGE)\n\n${HELP}`);
    return 2;
  }
  const absolute = (path: string): string => (isAbsolute(path) ? path : resolve(io.cwd, path));
  const logger = createLogger({ format: format as (typeof LOG_FORMATS)[number], now: io.now });
  const source = createProcIdentitySource({ now: io.now, warm: true, ...(values['proc-root'] === undefined ? {} : { procRoot: absolute(values['proc-root']) }) });
  const server = createIdentityServer({ socketPath: absolute(values.socket), source, logger });
  try {
    await server.start();
  } catch (err) {
    await server.close();
    if (!isBoundaryError(err)) throw err;
    io.stderr.write(`boundary identity: ${err.message} (${err.code})\n`);
    return 1;
  }
  const problem = source.problem();
  if (problem !== undefined) logger.error({ problem }, 'identity lookups will fail closed');
  if (!io.signal.aborted) await new Promise<void>((done) => io.signal.addEventListener('abort', () => done(), { once: true }));
  await server.close();
  await new Promise<void>((done) => logger.flush(() => done()));
  return 0;
};
