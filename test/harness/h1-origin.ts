// The scripted origins and pools the h1-client tests run against: a raw TCP origin that answers each request
// head through a callback, a pool dialling it, send() for one request, and small response helpers. Loopback only.
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after } from 'node:test';
import { createH1Pool, type H1Exchange, type H1Handler, type H1Pool, type H1Timeouts } from '../../src/http1/h1-client.js';
import type { H1Request } from '../../src/http1/h1-request.js';
import type { Timers } from '../../src/shared/timers.js';
import { waiterList } from './waiters.js';

/** One request as a scripted origin read it: the raw head, and the socket to answer on. */
export interface Arrival {
  readonly head: string;
  readonly method: string;
  readonly target: string;
  readonly socket: Socket;
  /** Index of the accepted connection it came in on (0-based). */
  readonly connection: number;
  /** Bytes after the head that arrived in the same reads (request body, if any). */
  readonly rest: Buffer;
}

export interface ScriptedOrigin {
  readonly port: number;
  accepted(): number;
  /** The `n`th request head the origin read (0-based), already read or still to come. */
  arrival(n: number): Promise<Arrival>;
  /** Every byte the origin received, on every connection. */
  received(): number;
  sockets: Socket[];
  close(): Promise<void>;
}

/** A raw TCP origin: `answer` is called per request head it reads (simple: heads only, no body parsing). */
export async function scriptedOrigin(answer: (arrival: Arrival) => void): Promise<ScriptedOrigin> {
  const sockets: Socket[] = [];
  const arrivals = waiterList<Arrival>();
  let bytes = 0;
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    const index = sockets.length;
    sockets.push(socket);
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      buffered = Buffer.concat([buffered, chunk]);
      for (let guard = 0; guard < 16; guard++) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString('latin1');
        const rest = buffered.subarray(end + 4);
        buffered = Buffer.alloc(0);
        const [method = '', target = ''] = (head.split('\r\n')[0] ?? '').split(' ');
        const arrival: Arrival = { head, method, target, socket, connection: index, rest };
        arrivals.push(arrival);
        answer(arrival);
        if (method !== 'GET' && method !== 'HEAD') return;
        buffered = rest;
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  return {
    port: address.port,
    accepted: () => sockets.length,
    arrival: (n) => arrivals.waitFor((a) => arrivals.items.indexOf(a) === n, 5_000, `request ${n}`),
    received: () => bytes,
    sockets,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export const TIMEOUTS: H1Timeouts = { headersTimeoutMs: 5_000, bodyTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000 };

export function poolTo(port: number, options: { maxConnections?: number; maxQueued?: number; timeouts?: Partial<H1Timeouts>; timers?: Timers } = {}): H1Pool {
  return createH1Pool({
    connect: () =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
        s.once('connect', () => resolve(s));
        s.once('error', reject);
      }),
    maxConnections: options.maxConnections ?? 4,
    timeouts: { ...TIMEOUTS, ...options.timeouts },
    ...(options.maxQueued === undefined ? {} : { maxQueued: options.maxQueued }),
    ...(options.timers === undefined ? {} : { timers: options.timers }),
  });
}

export interface Answer {
  status: number;
  headers: string[];
  body: string;
  /** How the body arrived: with the head in one read, or streamed after it. */
  whole: boolean;
}

/** Sends one request; resolves with the answer or rejects with the handler's error. */
export function send(pool: H1Pool, req: Partial<H1Request> & { target?: string }, hooks: { onExchange?: (x: H1Exchange) => void; onData?: (x: H1Exchange, chunk: Buffer) => void } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let answer: Answer | undefined;
    let exchange: H1Exchange | undefined;
    const handler: H1Handler = {
      onHead(status, headers, body, complete) {
        answer = { status, headers, body: '', whole: complete };
        if (body !== undefined) chunks.push(body);
        if (body !== undefined && !complete && exchange !== undefined) hooks.onData?.(exchange, body);
        if (complete) resolve({ ...answer, body: Buffer.concat(chunks).toString('latin1') });
      },
      onData(chunk) {
        chunks.push(chunk);
        if (exchange !== undefined) hooks.onData?.(exchange, chunk);
      },
      onEnd() {
        if (answer !== undefined) resolve({ ...answer, body: Buffer.concat(chunks).toString('latin1') });
      },
      onError: reject,
    };
    exchange = pool.request({ method: 'GET', target: '/', headers: ['host', 'origin.test'], body: null, ...req }, handler);
    hooks.onExchange?.(exchange);
  });
}

/** Resolves once the client side ended or dropped the connection (the origin is half-open capable). */
export function peerGone(s: Socket): Promise<void> {
  if (s.readableEnded || s.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    s.once('end', resolve);
    s.once('close', resolve);
  });
}

export function ok(body: string, extra = ''): string {
  return `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
}

export type PoolOptions = Parameters<typeof poolTo>[1];

/** Origins and pools for one suite, all closed after it: call inside a describe. */
export function h1Fixtures(): { origin(answer: (arrival: Arrival) => void): Promise<ScriptedOrigin>; pool(port: number, options?: PoolOptions): H1Pool } {
  const cleanup: (() => Promise<void> | void)[] = [];
  after(async () => {
    for (const c of cleanup) await c();
  });
  return {
    async origin(answer) {
      const o = await scriptedOrigin(answer);
      cleanup.push(() => o.close());
      return o;
    },
    pool(port, options) {
      const p = poolTo(port, options);
      cleanup.push(() => p.destroy());
      return p;
    },
  };
}
