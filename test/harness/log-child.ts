// A child process that writes log lines through the default stdout destination (src/telemetry/log-destination.ts),
// its stdout a pipe the parent reads, a regular file or /dev/null: for tests of what reaches stdout, and when.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const LOGGER = fileURLToPath(new URL('../../src/telemetry/logger.ts', import.meta.url));
const AUDIT = fileURLToPath(new URL('../../src/telemetry/audit.ts', import.meta.url));
/** A guard against a child that hangs (a test that needs it has failed). */
const CHILD_TIMEOUT_MS = 20_000;
const FILE_POLL_MS = 50;

/** 'null': /dev/null, which the destination writes through the thread pool (writeMode 'pool'). */
export type Stdout = 'pipe' | 'file' | 'null';

export interface ChildOptions {
  /** Ends the child (SIGTERM) once its stdout lines (and stderr so far) satisfy this. */
  until?: (lines: string[], stderr: string) => boolean;
  /** Module code run before the logger is made. */
  before?: string;
  stdout?: Stdout;
  /** A pipe the parent does not read until onStderr resumes it. */
  paused?: boolean;
  /** A pipe whose read end the parent closes at once: the child's writes fail with EPIPE. */
  closeStdout?: boolean;
  /** Called with the child and each chunk of its stderr. */
  onStderr?: (child: ChildProcess, text: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface ChildResult {
  readonly lines: string[];
  readonly code: number | null;
  readonly stderr: string;
}

/** Runs `body` (module code with `logger` and `sink` in scope) in a child; resolves its stdout lines. */
export async function runChild(body: string, options: ChildOptions = {}): Promise<string[]> {
  const { lines, stderr } = await runChildResult(body, options);
  if (lines.length === 0 && stderr.length > 0) throw new Error(stderr);
  return lines;
}

export async function runChildResult(body: string, options: ChildOptions = {}): Promise<ChildResult> {
  const source = `
    ${options.before ?? ''}
    const { createLogger, logLinesDropped } = await import(${JSON.stringify(LOGGER)});
    const { createAuditSink } = await import(${JSON.stringify(AUDIT)});
    const logger = createLogger({ format: 'json' });
    const sink = createAuditSink({ logger, now: () => 1767225600000, format: 'json' });
    ${body}
  `;
  const dir = options.stdout === 'file' ? mkdtempSync(join(tmpdir(), 'boundary-stdout-')) : undefined;
  const file = dir === undefined ? undefined : join(dir, 'stdout');
  const fd = file === undefined ? undefined : openSync(file, 'w');
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    stdio: ['ignore', fd ?? (options.stdout === 'null' ? 'ignore' : 'pipe'), 'pipe'],
    env: { ...process.env, ...options.env },
  });
  let out = '';
  let err = '';
  const read = (): string => (file === undefined ? out : readFileSync(file, 'utf8'));
  const check = (): void => {
    if (options.until?.(complete(read()), err)) child.kill('SIGTERM');
  };
  const stderr = child.stderr;
  assert.ok(stderr !== null);
  stderr.setEncoding('utf8');
  stderr.on('data', (chunk: string) => {
    err += chunk;
    options.onStderr?.(child, chunk);
    check();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
  const poll = file === undefined ? undefined : setInterval(check, FILE_POLL_MS);
  if (options.closeStdout) child.stdout?.destroy();
  else {
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      out += chunk;
      check();
    });
    if (options.paused) child.stdout?.pause();
  }
  try {
    const [code] = (await once(child, 'exit')) as [number | null];
    return { lines: complete(read()), code, stderr: err };
  } finally {
    clearTimeout(timer);
    clearInterval(poll);
    if (fd !== undefined) closeSync(fd);
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

function complete(text: string): string[] {
  return text.split('\n').slice(0, -1);
}

export const EVENT = `{ class: 'HTTP', activity: 'GET', severity: 'INFO', action: 'ALLOWED', engine: 'policy', policy: 'p',
  dst: { host: 'origin.example.test', port: 8080 }, http: { method: 'GET', url: 'http://origin.example.test:8080/é/' + i },
  message: 'FORWARD allowed GET origin.example.test:8080/é/' + i, reason: 'r', unmapped: { n: i, pad: 'x'.repeat(i % 300) } }`;

export function assertNumbered(lines: string[], count: number): void {
  assert.equal(lines.length, count);
  lines.forEach((line, i) => {
    const parsed = JSON.parse(line) as { ocsf: { unmapped: { n: number } } };
    assert.equal(parsed.ocsf.unmapped.n, i, line.slice(0, 200));
  });
}

