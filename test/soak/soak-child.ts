// The soak's `boundary run` child: the same entry as cli-boundary.ts spawnBoundaryCli(), but its audit lines are
// tallied as they stream (class:activity:reason key -> count) instead of kept. A ten-minute soak writes hundreds of
// thousands of events (every DNS query is one); kept whole, the test process would grow faster than the boundary.

import { type ChildProcess, spawn } from 'node:child_process';
import { MAIN, PROJECT_ROOT } from '../harness/cli-boundary.js';
import type { LogLine } from '../harness/child-lines.js';
import { waiterList } from '../harness/waiters.js';

/** The last stderr bytes kept for a failure message. */
const STDERR_TAIL_CHARS = 8_000;
/** Distinct tally keys kept: the key is built from closed sets, so more than this means a key built from data. */
export const MAX_TALLY_KEYS = 1_024;
const RECENT_LINES = 40;
/** JSON lines that are not audit events (pino logs: warnings, errors) kept as samples for the report. */
const PLAIN_SAMPLES = 10;
const SAMPLES_PER_KEY = 3;
const SAMPLE_CHARS = 1_200;

export interface SoakChild {
  readonly child: ChildProcess;
  readonly pid: number;
  /** `class_name:activity_name:reason` -> events seen; reason from unmapped.reason_code or status_detail. */
  readonly tally: Map<string, number>;
  /** The next JSON line that matches (lines are not kept: register before the line can arrive). */
  next(predicate: (line: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine>;
  /** Events whose key starts with `prefix`. */
  count(prefix: string): number;
  /** Counts the lines from now on that match; the returned function reads the count. */
  counter(predicate: (line: LogLine) => boolean): () => number;
  /** The first SAMPLES_PER_KEY lines of each tally key, cut to SAMPLE_CHARS: what a surprising key was about. */
  readonly samples: Map<string, string[]>;
  /** The first PLAIN_SAMPLES JSON lines without an OCSF event (level and msg): warnings and errors, if any. */
  readonly plainLogs: string[];
  /** The last RECENT_LINES stdout lines, for a failure message (e.g. what a slow shutdown was doing). */
  recent(): string[];
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderrTail(): string;
  kill(): void;
}

function keyOf(line: LogLine): string {
  const ocsf = (line.ocsf ?? line) as Record<string, unknown> & { unmapped?: Record<string, unknown> };
  const reason = ocsf.unmapped?.reason_code ?? ocsf.status_detail ?? '';
  return `${String(ocsf.class_name ?? '')}:${String(ocsf.activity_name ?? '')}:${String(reason)}`;
}

export function spawnSoakBoundary(args: readonly string[]): SoakChild {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'run', ...args], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  if (child.pid === undefined) throw new Error('boundary child did not start');
  const lines = waiterList<LogLine>({ record: false, unref: true });
  const tally = new Map<string, number>();
  const counters: { readonly predicate: (line: LogLine) => boolean; n: number }[] = [];
  let stderr = '';
  let pending = '';
  const recent: string[] = [];
  const plainLogs: string[] = [];
  const samples = new Map<string, string[]>();
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    pending += chunk;
    for (let cut = pending.indexOf('\n'); cut >= 0; cut = pending.indexOf('\n')) {
      const text = pending.slice(0, cut);
      pending = pending.slice(cut + 1);
      recent.push(text);
      if (recent.length > RECENT_LINES) recent.shift();
      if (!text.startsWith('{')) continue;
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        continue;
      }
      if (line.ocsf === undefined && plainLogs.length < PLAIN_SAMPLES) plainLogs.push(`level ${String(line.level)}: ${String(line.msg ?? '').slice(0, 200)}`);
      const key = keyOf(line);
      if (tally.has(key) || tally.size < MAX_TALLY_KEYS) {
        tally.set(key, (tally.get(key) ?? 0) + 1);
        const kept = samples.get(key) ?? [];
        if (kept.length < SAMPLES_PER_KEY) samples.set(key, [...kept, text.slice(0, SAMPLE_CHARS)]);
      }
      for (const counter of counters) if (counter.predicate(line)) counter.n++;
      lines.push(line);
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL_CHARS);
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      lines.end(new Error(`boundary exited (${code ?? signal}):\n${stderr}`));
      resolve({ code, signal });
    }),
  );
  return {
    child,
    pid: child.pid,
    tally,
    plainLogs,
    samples,
    next: (predicate, timeoutMs, what) => lines.waitFor(predicate, timeoutMs, what, () => `stderr:\n${stderr}`),
    count(prefix) {
      let total = 0;
      for (const [key, n] of tally) if (key.startsWith(prefix)) total += n;
      return total;
    },
    counter(predicate) {
      const counter = { predicate, n: 0 };
      counters.push(counter);
      return () => counter.n;
    },
    recent: () => [...recent],
    exited: () => exit,
    stderrTail: () => stderr,
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
