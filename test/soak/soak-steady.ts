// Steady allowed traffic from real clients, each kind on its own fixed schedule: curl forward HTTP, curl through
// an intercepted CONNECT tunnel (trusting the boundary CA) with a credential placeholder, a node:http keep-alive
// client with a placeholder, a long-lived WebSocket doing echo round trips, and policy DNS lookups. Every request
// is timed and checked; the result goes to whichever LatencyLog `log()` returns at that moment (baseline or
// hostile phase).

import { execFile } from 'node:child_process';
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as pause } from 'node:timers/promises';
import { promisify } from 'node:util';
import { rcodeOf, udpQuery, buildQuery } from '../harness/dns-client.js';
import { PH } from '../harness/credential-parts.js';
import type { Origin } from '../harness/servers.js';
import { openWebSocket, type WsClient } from '../harness/ws.js';
import type { LatencyLog } from './soak-figures.js';
import { SOAK_HOSTS, type SoakStack } from './soak-stack.js';

const run = promisify(execFile);

/** One allowed request of each kind this often: about 25 requests a second in all, a light steady load. */
export const STEADY_INTERVAL_MS = { 'curl-forward': 200, 'curl-connect-tls': 250, 'node-forward': 100, 'ws-echo': 100, 'dns-udp': 250 } as const;
export type SteadyKind = keyof typeof STEADY_INTERVAL_MS;
/** Any one allowed request that takes longer than this has failed: far above a loaded p99, far below a hang. */
export const STEADY_REQUEST_TIMEOUT_MS = 10_000;
/** A rotated credential as the origin must see it; a placeholder or anything else there is a leak or a miss. */
const ROTATED_AUTHORIZATION = /^Bearer tok-soak-\d+$/;
const CURL_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

type Attempt = () => Promise<{ ms: number; problem?: string }>;

/**
 * What the origin received for the request whose path ends in `/<id>` (its record is taken, so the list stays short).
 * The origin's own record, not the echo in the answer: boundary masks an echoed bound secret in the answer.
 */
function authorizationProblem(origin: Origin, id: string): string | undefined {
  const at = origin.seen.findIndex((seen) => seen.url.endsWith(`/${id}`));
  if (at < 0) return `the origin has no record of request ${id}`;
  const [record] = origin.seen.splice(at, 1);
  const seen = String(record?.headers.authorization ?? '');
  return ROTATED_AUTHORIZATION.test(seen) ? undefined : `origin saw authorization ${JSON.stringify(seen.slice(0, 60))}`;
}

let requestIds = 0;
const nextRequestId = (): string => String(++requestIds);

/** curl; `-w` puts the status and time_total on a last line after the body. */
async function curl(args: readonly string[], check?: { readonly origin: Origin; readonly id: string }): Promise<{ ms: number; problem?: string }> {
  const { stdout } = await run('curl', ['-sS', '--max-time', String(STEADY_REQUEST_TIMEOUT_MS / 1_000), '-w', '\n%{http_code} %{time_total}', ...args], { env: CURL_ENV });
  const cut = stdout.lastIndexOf('\n');
  const [code, seconds] = stdout.slice(cut + 1).split(' ');
  const ms = Number(seconds) * 1_000;
  if (code !== '200') return { ms, problem: `status ${code}: ${stdout.slice(0, Math.min(cut, 160))}` };
  const problem = check === undefined ? undefined : authorizationProblem(check.origin, check.id);
  return problem === undefined ? { ms } : { ms, problem };
}

function nodeForward(stack: SoakStack, agent: Agent): Attempt {
  const authority = `${SOAK_HOSTS.plain}:${stack.ports.plain}`;
  return () =>
    new Promise((resolve) => {
      const started = performance.now();
      const id = nextRequestId();
      const req = httpRequest({
        host: '127.0.0.1',
        port: stack.proxyPort,
        path: `http://${authority}/steady/node/${id}`,
        headers: { host: authority, authorization: `Bearer ${PH}API_TOKEN` },
        agent,
        timeout: STEADY_REQUEST_TIMEOUT_MS,
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (err) => resolve({ ms: performance.now() - started, problem: err.message }));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => resolve({ ms: performance.now() - started, problem: err.message }));
        res.on('end', () => {
          const ms = performance.now() - started;
          const body = Buffer.concat(chunks).toString('utf8');
          const problem = res.statusCode === 200 ? authorizationProblem(stack.plain, id) : `status ${res.statusCode}: ${body.slice(0, 160)}`;
          resolve(problem === undefined ? { ms } : { ms, problem });
        });
      });
      req.end();
    });
}

/** Round trips on one long-lived WebSocket; a lost socket is a failure, and the next attempt opens a new one. */
function wsEcho(stack: SoakStack, opened: Set<WsClient>): Attempt {
  let client: WsClient | undefined;
  let n = 0;
  return async () => {
    const started = performance.now();
    try {
      if (client === undefined || client.socket.destroyed) {
        const ws = await openWebSocket({ proxyPort: stack.proxyPort, transport: 'forward', host: SOAK_HOSTS.ws, port: stack.ports.ws, path: '/socket' });
        opened.add(ws.client);
        if (ws.status !== 101) return { ms: performance.now() - started, problem: `upgrade answered ${ws.status}` };
        client = ws.client;
      }
      const text = `steady-${n++}`;
      client.sendText(text);
      const frame = await client.next();
      const got = frame.payload.toString('utf8');
      const ms = performance.now() - started;
      return got === `echo:${text}` ? { ms } : { ms, problem: `echo was ${JSON.stringify(got.slice(0, 60))}` };
    } catch (err) {
      client?.socket.destroy();
      client = undefined;
      return { ms: performance.now() - started, problem: (err as Error).message };
    }
  };
}

function dnsLookup(stack: SoakStack): Attempt {
  return async () => {
    const started = performance.now();
    const answer = await udpQuery(stack.dnsPort, buildQuery(SOAK_HOSTS.plain, 'A'));
    const ms = performance.now() - started;
    const rcode = rcodeOf(answer);
    return rcode === 'NOERROR' && (answer.answers?.length ?? 0) > 0 ? { ms } : { ms, problem: `rcode ${rcode}` };
  };
}

export interface SteadyTraffic {
  /** Resolves once every loop has finished its current request after stop(). */
  stop(): Promise<void>;
}

/** Starts every kind's loop; each records into `log()` until stop(). */
export function startSteadyTraffic(stack: SoakStack, log: () => LatencyLog): SteadyTraffic {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<WsClient>();
  const proxy = ['-x', `http://127.0.0.1:${stack.proxyPort}`];
  const placeholder = ['-H', `Authorization: Bearer ${PH}API_TOKEN`];
  const attempts: Record<SteadyKind, Attempt> = {
    'curl-forward': () => curl([...proxy, '-o', '/dev/null', `http://${SOAK_HOSTS.plain}:${stack.ports.plain}/steady/curl`]),
    'curl-connect-tls': () => {
      const id = nextRequestId();
      return curl([...proxy, ...placeholder, '--cacert', stack.caFile, `https://${SOAK_HOSTS.tls}:${stack.ports.secure}/steady/curl-tls/${id}`], { origin: stack.secure, id });
    },
    'node-forward': nodeForward(stack, agent),
    'ws-echo': wsEcho(stack, sockets),
    'dns-udp': dnsLookup(stack),
  };
  let running = true;
  const loop = async (kind: SteadyKind): Promise<void> => {
    const interval = STEADY_INTERVAL_MS[kind];
    // Bounded by stop(); each pass is one request (bounded by its timeout) and the pause to the next slot.
    for (let next = performance.now(); running; next += interval) {
      let outcome: { ms: number; problem?: string };
      try {
        outcome = await attempts[kind]();
      } catch (err) {
        // execFile's error names the command on its first line; what curl said is in stderr.
        const { stderr, message } = err as Error & { stderr?: string };
        outcome = { ms: Number.NaN, problem: (stderr?.trim() || message.split('\n')[0]) ?? 'error' };
      }
      log().record(kind, outcome.ms, outcome.problem === undefined, outcome.problem);
      // Pacing, not waiting for an event: a fixed schedule keeps the offered rate the same in both phases.
      const wait = next + interval - performance.now();
      if (wait > 0 && running) await pause(wait);
      else next = performance.now();
    }
  };
  const loops = (Object.keys(STEADY_INTERVAL_MS) as SteadyKind[]).map((kind) => loop(kind));
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
      for (const client of sockets) client.socket.destroy();
    },
  };
}
