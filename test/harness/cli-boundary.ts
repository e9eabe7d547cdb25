// spawnBoundaryCli(): the real `boundary run` (src/main.ts through tsx) as a child process, optionally behind a
// command prefix such as `ip netns exec <ns>`. Reads its JSON log lines so a test can wait for an event
// (e.g. the bound DNS address) without sleeping; stop() sends SIGTERM to that one child and waits for it.

import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
export const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CLI_WAIT_TIMEOUT_MS = 20_000;

export interface LogLine {
  readonly msg?: string;
  readonly ocsf?: { readonly message?: string; readonly status_detail?: string; readonly unmapped?: Record<string, unknown> };
  readonly [key: string]: unknown;
}

export interface BoundaryCli {
  readonly child: ChildProcess;
  readonly lines: LogLine[];
  /** The first log line (already seen or still to come) that matches; rejects on exit or timeout. */
  waitFor(predicate: (line: LogLine) => boolean): Promise<LogLine>;
  /** Everything the child wrote to stderr, for failure messages. */
  stderr(): string;
  stop(): Promise<void>;
}

/** `node --import tsx src/main.ts run ...args`, after `prefix` (e.g. ['ip', 'netns', 'exec', ns]). */
export function spawnBoundaryCli(args: readonly string[], options: { prefix?: readonly string[]; env?: NodeJS.ProcessEnv } = {}): BoundaryCli {
  const command = [...(options.prefix ?? []), process.execPath, '--import', 'tsx', MAIN, 'run', ...args];
  const child = spawn(command[0] as string, command.slice(1), { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: options.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  const lines: LogLine[] = [];
  const waiters = new Set<{ predicate: (line: LogLine) => boolean; resolve: (line: LogLine) => void; reject: (err: Error) => void }>();
  let pending = '';
  let errText = '';
  let exited = false;
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    pending += chunk;
    let cut = pending.indexOf('\n');
    while (cut >= 0) {
      const text = pending.slice(0, cut);
      pending = pending.slice(cut + 1);
      cut = pending.indexOf('\n');
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        continue;
      }
      lines.push(line);
      for (const waiter of waiters) {
        if (!waiter.predicate(line)) continue;
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    errText += chunk;
  });
  const exit = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const waiter of waiters) waiter.reject(new Error(`boundary exited (${code ?? signal}) before the awaited line:\n${errText}`));
      waiters.clear();
      resolve();
    }),
  );
  return {
    child,
    lines,
    stderr: () => errText,
    waitFor(predicate) {
      const seen = lines.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      if (exited) return Promise.reject(new Error(`boundary already exited:\n${errText}`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no matching log line within ${CLI_WAIT_TIMEOUT_MS} ms; stderr:\n${errText}`));
        }, CLI_WAIT_TIMEOUT_MS);
        timer.unref();
        const waiter = {
          predicate,
          resolve: (line: LogLine) => {
            clearTimeout(timer);
            resolve(line);
          },
          reject: (err: Error) => {
            clearTimeout(timer);
            reject(err);
          },
        };
        waiters.add(waiter);
      });
    },
    async stop() {
      if (!exited) child.kill('SIGTERM');
      await exit;
    },
  };
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
