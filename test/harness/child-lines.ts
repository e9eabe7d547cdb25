// spawnLogged(): a child process whose stdout carries JSON log lines (boundary, the supervisor) or plain
// text lines (dnsmasq on stderr), collected so that a test waits for a line instead of sleeping. stop()
// sends SIGTERM to that one child and waits; kill() sends SIGKILL (a crash, not a shutdown).

import { type ChildProcess, spawn } from 'node:child_process';

export const CHILD_WAIT_TIMEOUT_MS = 20_000;

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

interface Waiter {
  readonly json: boolean;
  readonly predicate: (line: never) => boolean;
  readonly resolve: (line: never) => void;
  readonly reject: (err: Error) => void;
}

export function spawnLogged(command: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; label?: string } = {}): LoggedChild {
  const label = options.label ?? command[0] ?? 'child';
  const child = spawn(command[0] as string, command.slice(1), {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: options.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  const lines: LogLine[] = [];
  const text: string[] = [];
  const waiters = new Set<Waiter>();
  let errText = '';
  let outText = '';
  let status: number | string | undefined;

  function deliver(line: string, json: LogLine | undefined): void {
    text.push(line);
    if (json !== undefined) lines.push(json);
    for (const waiter of waiters) {
      const subject = waiter.json ? json : line;
      if (subject === undefined || !(waiter.predicate as (l: unknown) => boolean)(subject)) continue;
      waiters.delete(waiter);
      (waiter.resolve as (l: unknown) => void)(subject);
    }
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
      for (const waiter of waiters) waiter.reject(new Error(`${label} exited (${status}) before the awaited line:\n${errText.slice(-4_000)}`));
      waiters.clear();
      resolve(status);
    }),
  );

  function wait<T>(json: boolean, predicate: (line: T) => boolean, timeoutMs: number): Promise<T> {
    const seen = (json ? lines : text).find(predicate as (l: unknown) => boolean) as T | undefined;
    if (seen !== undefined) return Promise.resolve(seen);
    if (status !== undefined) return Promise.reject(new Error(`${label} already exited (${status}):\n${errText.slice(-4_000)}`));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`${label}: no matching line within ${timeoutMs} ms; stderr:\n${errText.slice(-4_000)}`));
      }, timeoutMs);
      timer.unref();
      const waiter: Waiter = {
        json,
        predicate: predicate as (line: never) => boolean,
        resolve: ((line: T) => {
          clearTimeout(timer);
          resolve(line);
        }) as (line: never) => void,
        reject: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      waiters.add(waiter);
    });
  }

  return {
    child,
    label,
    lines,
    text,
    waitFor: (predicate, timeoutMs = CHILD_WAIT_TIMEOUT_MS) => wait<LogLine>(true, predicate, timeoutMs),
    waitForText: (predicate, timeoutMs = CHILD_WAIT_TIMEOUT_MS) => wait<string>(false, predicate, timeoutMs),
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
