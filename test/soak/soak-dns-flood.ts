// The soak's DNS flood: dnsperf at a fixed rate over a file of allowed and refused names, or, where dnsperf is
// not installed, the same rate from one node:dgram socket. Either way the result is one summary: queries sent,
// answered and lost, and the answers counted by response code. Loopback only.

import { type ChildProcess, execFile, execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { decode } from 'dns-packet';
import { buildQuery, rcodeOf } from '../harness/dns-client.js';

/** Answers still in flight this long after the last query are lost (dnsperf's -t says the same). */
const DNS_QUERY_TIMEOUT_SECONDS = 2;
/** The node flooder sends one batch this often: fine enough for a steady rate, coarse enough to stay cheap. */
const FLOOD_TICK_MS = 10;
const PATH_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

export interface FloodSummary {
  readonly tool: 'dnsperf' | 'node:dgram';
  readonly sent: number;
  readonly completed: number;
  readonly lost: number;
  readonly rcodes: Readonly<Record<string, number>>;
  /** Why the tool failed, if it did. */
  readonly error?: string;
}

export interface DnsFlood {
  readonly done: Promise<FloodSummary>;
  stop(): void;
}

/** dnsperf's summary: queries sent, completed and lost, and the count per response code. */
export function parseDnsperf(output: string): Omit<FloodSummary, 'tool'> {
  const number = (label: string): number => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(output)?.[1] ?? Number.NaN);
  const rcodes: Record<string, number> = {};
  const line = /Response codes:\s+(.*)/.exec(output)?.[1] ?? '';
  for (const match of line.matchAll(/([A-Z]+) (\d+)/g)) rcodes[match[1] as string] = Number(match[2]);
  return { sent: number('Queries sent'), completed: number('Queries completed'), lost: number('Queries lost'), rcodes };
}

function hasDnsperf(): boolean {
  try {
    execFileSync('which', ['dnsperf'], { env: PATH_ENV, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function dnsperfFlood(options: { port: number; file: string; seconds: number; qps: number }): DnsFlood {
  let child: ChildProcess | undefined;
  const done = new Promise<FloodSummary>((resolve) => {
    const args = ['-s', '127.0.0.1', '-p', String(options.port), '-d', options.file, '-l', String(options.seconds), '-Q', String(options.qps), '-t', String(DNS_QUERY_TIMEOUT_SECONDS)];
    child = execFile('dnsperf', args, { env: PATH_ENV }, (err, stdout, stderr) => {
      resolve({ tool: 'dnsperf', ...parseDnsperf(stdout), ...(err === null ? {} : { error: (stderr || err.message).slice(0, 200) }) });
    });
  });
  return { done, stop: () => child?.kill('SIGKILL') };
}

function dgramFlood(options: { port: number; names: readonly string[]; seconds: number; qps: number }): DnsFlood {
  const socket = createSocket('udp4');
  const rcodes: Record<string, number> = {};
  let sent = 0;
  let completed = 0;
  let running = true;
  socket.on('message', (reply) => {
    completed++;
    const rcode = rcodeOf(decode(reply));
    rcodes[rcode] = (rcodes[rcode] ?? 0) + 1;
  });
  const perTick = Math.max(1, Math.round((options.qps * FLOOD_TICK_MS) / 1_000));
  const done = (async (): Promise<FloodSummary> => {
    const ticks = Math.round((options.seconds * 1_000) / FLOOD_TICK_MS);
    // Bounded by the tick count; the pause is the flood's pacing, not a wait for an event.
    for (let tick = 0; tick < ticks && running; tick++) {
      for (let i = 0; i < perTick; i++) socket.send(buildQuery(options.names[sent % options.names.length] as string, 'A', { id: sent++ & 0xffff }), options.port, '127.0.0.1');
      await pause(FLOOD_TICK_MS);
    }
    if (running) await pause(DNS_QUERY_TIMEOUT_SECONDS * 1_000);
    socket.close();
    return { tool: 'node:dgram', sent, completed, lost: sent - completed, rcodes };
  })();
  return {
    done,
    stop() {
      running = false;
    },
  };
}

/** Floods policy DNS on `port` with `names` (cycled) at `qps` for `seconds`, with dnsperf when installed. */
export async function startDnsFlood(options: { port: number; dir: string; names: readonly string[]; seconds: number; qps: number }): Promise<DnsFlood> {
  if (!hasDnsperf()) return dgramFlood(options);
  const file = join(options.dir, 'dnsperf-queries.txt');
  await writeFile(file, `${options.names.map((name) => `${name} A`).join('\n')}\n`);
  return dnsperfFlood({ ...options, file });
}
