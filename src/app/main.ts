#!/usr/bin/env node
// The CLI entry: the only file that reads argv, env, signals and exit codes. Each subcommand is a
// Command in src/cli/ that receives a CliIo and returns an exit code.

import { type CliIo, type Command, EXIT_DRAIN_FORCED } from './cli/io.js';

const HELP = `boundary — egress boundary for sandboxed workloads

Usage: boundary <command> [options]

Commands:
  run                 run the boundary (proxy, policy DNS, admin server); standalone or attached
  supervisor          run the reference supervisor
  policy check        validate policy files
  policy explain      say which rule allows or denies a target, and why
  pki init|issue      create a CA and issue server/client certificates
  env                 print the workload's environment of credential placeholders
  init-netns          pod init step: route the synthetic range to lo and fence direct egress
  identity serve      answer boundary's process lookups from a privileged sidecar (binary identity)

Run 'boundary <command> --help' for the options of a command.
`;

const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  run: async () => (await import('./cli/run.js')).runCommand,
  supervisor: async () => (await import('./cli/supervisor.js')).supervisorCommand,
  policy: async () => (await import('./cli/policy.js')).policyCommand,
  pki: async () => (await import('./cli/pki.js')).pkiCommand,
  env: async () => (await import('./cli/env.js')).envCommand,
  'init-netns': async () => (await import('./cli/init-netns.js')).initNetnsCommand,
  identity: async () => (await import('./cli/identity.js')).identityCommand,
};

/** Past the drain deadline, the forced drain gets this long to log and return its own exit code before main.ts exits. */
const FORCED_EXIT_GRACE_MS = 1_000;
/** What a Node timer holds (config-fields.ts MAX_TIMER_MS, not imported: main.ts loads no command's modules up front). */
const TIMER_MAX_MS = 2_147_483_647;

/** When the process must be gone (performance.now() ms): set by `run` once it drains. */
let exitAt: number | undefined;
let exitTimer: NodeJS.Timeout | undefined;

/** Exits with EXIT_DRAIN_FORCED in `ms` unless the process has ended by then, naming what still held it. */
function exitIn(ms: number): void {
  clearTimeout(exitTimer);
  exitTimer = setTimeout(() => {
    const held = process.getActiveResourcesInfo().join(', ') || 'nothing visible';
    process.stderr.write(`boundary: still running at the drain deadline (held by ${held}); exiting with ${EXIT_DRAIN_FORCED}\n`);
    process.exit(EXIT_DRAIN_FORCED);
  }, ms);
  // It only ends a process that something else keeps alive: one with nothing left exits at once, with its own code.
  exitTimer.unref();
}

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(HELP);
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') {
    process.stdout.write(`${process.env.npm_package_version ?? '0.1.0'}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (load === undefined) {
    process.stderr.write(`boundary: unknown command '${name}' (USAGE)\n\n${HELP}`);
    return 2;
  }
  const controller = new AbortController();
  // The signal's name is the abort reason: `run` reports which signal stopped it (CONFIG:STOPPING).
  const stop = (signal: NodeJS.Signals): void => controller.abort(signal);
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  const io: CliIo = {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
    signal: controller.signal,
    now: Date.now,
    exitDeadline(ms) {
      exitAt = performance.now() + ms;
      // Past what a timer holds it would fire at once; such a deadline is armed when the drain returns.
      if (ms + FORCED_EXIT_GRACE_MS <= TIMER_MAX_MS) exitIn(ms + FORCED_EXIT_GRACE_MS);
    },
  };
  try {
    return await (await load())(rest, io);
  } finally {
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // A forced drain may have left a handle that would keep the event loop, and so the process, alive.
    if (code === EXIT_DRAIN_FORCED) process.exit(code);
    // A drain that reported clean may still have left one (issue 28): the deadline holds whatever the drain said.
    if (exitAt !== undefined) exitIn(Math.max(0, exitAt - performance.now()));
  },
  (err: unknown) => {
    const code = typeof err === 'object' && err !== null && 'code' in err ? ` (${String(err.code)})` : '';
    process.stderr.write(`boundary: ${err instanceof Error ? err.message : String(err)}${code}\n`);
    process.exitCode = 1;
  },
);
