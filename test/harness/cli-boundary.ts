// spawnBoundaryCli(): the real `boundary run` (src/app/main.ts through tsx, or a staged dist/app/main.js) as a child
// process, optionally behind a command prefix such as `ip netns exec <ns>`, with its log lines collected by
// spawnLogged() so a test waits for an event (e.g. the bound DNS address) instead of sleeping.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHILD_WAIT_TIMEOUT_MS, type LoggedChild, type LogLine, spawnLogged } from './child-lines.js';
import type { StagedBoundary } from './stage.js';

export type { LogLine } from './child-lines.js';
export const MAIN = fileURLToPath(new URL('../../src/app/main.ts', import.meta.url));
export const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CLI_WAIT_TIMEOUT_MS = CHILD_WAIT_TIMEOUT_MS;

export type BoundaryCli = LoggedChild;

export interface SpawnOptions {
  /** Put before node, e.g. ['ip', 'netns', 'exec', ns] or a setpriv to another uid. */
  readonly prefix?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** Run this compiled copy (stageBoundary()) instead of src/ through tsx: another uid may not read the checkout. */
  readonly staged?: StagedBoundary;
}

/** `node --import tsx src/app/main.ts run ...args` (or `node <staged main> run ...args`), after `prefix`. */
export function spawnBoundaryCli(args: readonly string[], options: SpawnOptions = {}): BoundaryCli {
  const entry = options.staged === undefined ? ['--import', 'tsx', MAIN] : [options.staged.main];
  const command = [...(options.prefix ?? []), process.execPath, ...entry, 'run', ...args];
  // The staged dir as cwd: a cwd in a checkout the child's uid cannot search breaks every relative lookup.
  return spawnLogged(command, { cwd: options.staged?.dir ?? PROJECT_ROOT, label: 'boundary', ...(options.env === undefined ? {} : { env: options.env }) });
}

/**
 * The flags of a standalone `boundary run` on loopback port 0 with `dir`/policy.yaml, names from `dir`/hosts and its
 * state in `dir`/state. The upstream DNS (port 9, discard, on loopback) is never asked: the hosts file answers.
 */
export function standaloneFlags(dir: string): string[] {
  return [
    '--policy', join(dir, 'policy.yaml'),
    '--proxy-listen', '127.0.0.1:0',
    '--admin-listen', '127.0.0.1:0',
    '--dns-listen', '127.0.0.1:0',
    '--hosts', join(dir, 'hosts'),
    '--upstream-dns', '127.0.0.1:9',
    '--state-dir', join(dir, 'state'),
    '--unsafe-allow-loopback-upstream',
  ];
}

/** host:port out of the CONFIG:READY line of policy DNS. */
export function dnsAddressOf(line: LogLine): { host: string; port: number } {
  const match = /listening on (.+):(\d+) \(udp, tcp\)/.exec(line.ocsf?.message ?? '');
  if (match === null) throw new Error(`not a DNS ready line: ${JSON.stringify(line)}`);
  return { host: match[1] as string, port: Number(match[2]) };
}

export function isDnsReady(line: LogLine): boolean {
  return (line.ocsf?.message ?? '').startsWith('Policy DNS listening on ');
}
