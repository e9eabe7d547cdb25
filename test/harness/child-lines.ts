// spawnLogged(): a child process whose stdout carries JSON log lines (boundary, the supervisor) or plain
// text lines (dnsmasq on stderr), collected so that a test waits for a line instead of sleeping. stop()
// sends SIGTERM to that one child and waits; kill() sends SIGKILL (a crash, not a shutdown).

import { type ChildProcess, spawn } from 'node:child_process';
import { waiterList } from './waiters.js';

/**
 * Bounds a hang only: how long a child's line is waited for. Start-up under tsx compiles the sources first, which on
 * a loaded host (or at low priority beside other work) takes far longer than the second or two it takes when quiet.
 */
export const CHILD_WAIT_TIMEOUT_MS = 120_000;

export interface LogLine {
  readonly msg?: string;
  readonly ocsf?: { readonly message?: string; readonly status_detail?: string; readonly unmapped?: Record<string, unknown> };
  readonly [key: string]: unknown;
}

export interface LoggedChild {
  readonly child: ChildProcess;
  readonly label: string;
  /** stdout lines that parsed as JSON objects. */
  readonly lines: LogLine[];
  /** Every text line of stdout and stderr, in order of arrival. */
  readonly text: string[];
  /** The first JSON line (already seen or still to come) that matches; rejects on exit or timeout. */
  waitFor(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** The same for text lines of either stream. */
  waitForText(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code (or signal name) once the child has exited. */
  exited(): Promise<number | string>;
  stderr(): string;
  /** Everything the child wrote to stdout, JSON or not. */
  stdout(): string;
  stop(): Promise<void>;
  kill(): Promise<void>;
}

export function spawnLogged(command: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; label?: string } = {}): LoggedChild {
  const label = options.label ?? command[0] ?? 'child';
  const child = spawn(command[0] as string, command.slice(1), {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: options.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  const jsonLines = waiterList<LogLine>({ unref: true });
  const textLines = waiterList<string>({ unref: true });
  let errText = '';
  let outText = '';
  let status: number | string | undefined;

  function deliver(line: string, json: LogLine | undefined): void {
    textLines.push(line);
    if (json !== undefined) jsonLines.push(json);
  }

  function follow(stream: NodeJS.ReadableStream | null, parse: boolean): void {
    let pending = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      if (parse) outText += chunk;
      else errText += chunk;
      pending += chunk;
      for (let cut = pending.indexOf('\n'); cut >= 0; cut = pending.indexOf('\n')) {
        const line = pending.slice(0, cut);
        pending = pending.slice(cut + 1);
        let json: LogLine | undefined;
        if (parse && line.startsWith('{')) {
          try {
            json = JSON.parse(line) as LogLine;
          } catch {
            json = undefined;
          }
        }
        deliver(line, json);
      }
    });
  }
  follow(child.stdout, true);
  follow(child.stderr, false);

  const exit = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => {
      status = code ?? signal ?? 'unknown';
      const exited = new Error(`${label} exited (${status}) before the awaited line:\n${errText.slice(-4_000)}`);
      jsonLines.end(exited);
      textLines.end(exited);
      resolve(status);
    }),
  );

  const stderrTail = (): string => `stderr:\n${errText.slice(-4_000)}`;

  return {
    child,
    label,
    lines: jsonLines.items,
    text: textLines.items,
    waitFor: (predicate, timeoutMs = CHILD_WAIT_TIMEOUT_MS) => jsonLines.waitFor(predicate, timeoutMs, `${label} line`, stderrTail),
    waitForText: (predicate, timeoutMs = CHILD_WAIT_TIMEOUT_MS) => textLines.waitFor(predicate, timeoutMs, `${label} line`, stderrTail),
    exited: () => exit,
    stderr: () => errText,
    stdout: () => outText,
    async stop() {
      if (status === undefined) child.kill('SIGTERM');
      await exit;
    },
    async kill() {
      if (status === undefined) child.kill('SIGKILL');
      await exit;
    },
  };
}
