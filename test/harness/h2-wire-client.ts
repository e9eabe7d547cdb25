// The client side of the HTTP/2 wire tests: boundary's own client dialled at a wireOrigin() (h2-wire-origin.ts), one
// recorded request per call, and the two shapes most cases take (a stream error, a connection error).
// Writes no frames of its own: what the origin sends is each test's choice.

import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import type { H1Exchange } from '../../src/http1/h1-client.js';
import { FrameType, H2Error } from '../../src/http2/frames.js';
import type { H2Handler, H2Request } from '../../src/http2/h2-call.js';
import { createH2Client, type H2Client } from '../../src/http2/h2-client.js';
import { dataFrames, errorName, headersFrame, type SettingsEntries, showFrame, type WireConnection, type WireFrame, type WireOrigin, wireOrigin } from './h2-wire-origin.js';
import { DEADLINE_MS, type WaiterList, waiterList } from './waiters.js';

export const AUTHORITY = 'origin.test';
export const OK = [':status', '200'];

// ---- One recorded request per call ----

export type CodedError = Error & { readonly code?: string; readonly rstCode?: number };
export type CallEvent =
  | { readonly kind: 'head'; readonly status: number; readonly headers: string[]; readonly complete: boolean }
  | { readonly kind: 'data'; readonly chunk: Buffer }
  | { readonly kind: 'trailers'; readonly trailers: string[] }
  | { readonly kind: 'end' }
  | { readonly kind: 'error'; readonly error: CodedError };

export interface Recorded {
  readonly events: WaiterList<CallEvent>;
  readonly exchange: H1Exchange;
  /** One line per handler call: `head 200`, `data hello`, `trailers grpc-status=0`, `end`, `error UPSTREAM_CLOSED`. */
  log(): string[];
  /** The call's last handler call: onEnd, onError, or an onHead that was the whole response. */
  settled(): Promise<CallEvent>;
  /** The error it failed with, once it did. */
  error(): Promise<CodedError>;
  head(): Extract<CallEvent, { kind: 'head' }> | undefined;
  body(): Buffer;
}

function line(e: CallEvent): string {
  switch (e.kind) {
    case 'head':
      return `head ${e.status}${e.complete ? ' complete' : ''}`;
    case 'data':
      return e.chunk.length <= 40 ? `data ${e.chunk.toString('latin1')}` : `data <${e.chunk.length} octets>`;
    case 'trailers':
      return `trailers ${e.trailers.map((x, i) => (i % 2 === 0 ? x : `=${x} `)).join('').trim()}`;
    case 'end':
      return 'end';
    case 'error':
      return `error ${e.error.code ?? e.error.message}`;
  }
}

export interface SendOptions {
  readonly method?: string;
  readonly headers?: readonly string[];
  readonly body?: Buffer | AsyncIterable<Uint8Array> | null;
  readonly trailers?: readonly string[];
}

export function send(client: H2Client, path: string, options: SendOptions = {}): Recorded {
  const events = waiterList<CallEvent>();
  const handler: H2Handler = {
    onHead: (status, headers, _body, complete) => events.push({ kind: 'head', status, headers, complete }),
    // The session hands views into its read buffer: keep copies.
    onData: (chunk) => events.push({ kind: 'data', chunk: Buffer.from(chunk) }),
    onTrailers: (trailers) => events.push({ kind: 'trailers', trailers }),
    onEnd: () => events.push({ kind: 'end' }),
    onError: (error) => events.push({ kind: 'error', error }),
  };
  const body = options.body ?? null;
  const trailers = options.trailers;
  const req: H2Request = {
    method: options.method ?? (body === null ? 'GET' : 'POST'),
    target: path,
    headers: options.headers ?? ['host', AUTHORITY],
    body,
    scheme: 'http',
    teTrailers: false,
    ...(trailers === undefined ? {} : { trailers: () => trailers }),
  };
  const exchange = client.request(req, handler);
  const what = `the end of ${path}`;
  return {
    events,
    exchange,
    log: () => events.items.map(line),
    settled: () => events.waitFor((e) => e.kind === 'end' || e.kind === 'error' || (e.kind === 'head' && e.complete), DEADLINE_MS, what, () => events.items.map(line).join(', ')),
    error: async () => {
      const e = await events.waitFor((x) => x.kind === 'error', DEADLINE_MS, `the error of ${path}`, () => events.items.map(line).join(', '));
      assert.ok(e.kind === 'error');
      return e.error;
    },
    head: () => events.items.find((e): e is Extract<CallEvent, { kind: 'head' }> => e.kind === 'head'),
    body: () => Buffer.concat(events.items.flatMap((e) => (e.kind === 'data' ? [e.chunk] : []))),
  };
}

// ---- A client and its origin ----

function dial(port: number): Promise<Socket> {
  return new Promise<Socket>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** A wire origin and a client that dials it, both closed after the test. */
export async function setup(t: TestContext): Promise<{ origin: WireOrigin; client: H2Client }> {
  const origin = await wireOrigin();
  const client = createH2Client({ connect: () => dial(origin.port) });
  t.after(async () => {
    client.destroy();
    await origin.close();
  });
  return { origin, client };
}

export interface Opened {
  readonly origin: WireOrigin;
  readonly client: H2Client;
  readonly conn: WireConnection;
  readonly calls: Recorded[];
}

/** `n` GET requests in flight on one connection (streams 1, 3, ...), the handshake done with `settings` (null: none). */
export async function open(t: TestContext, n: number, settings: SettingsEntries | null = []): Promise<Opened> {
  const { origin, client } = await setup(t);
  const calls = Array.from({ length: n }, (_, i) => send(client, `/s${2 * i + 1}`));
  const conn = await origin.connection(0);
  await conn.handshake(settings);
  for (let i = 0; i < n; i++) await conn.request(2 * i + 1);
  return { origin, client, conn, calls };
}

/** A response with a 2-octet body, complete. */
export function complete(streamId: number, body = 'ok'): Buffer[] {
  return [headersFrame(streamId, OK), ...dataFrames(streamId, body, true)];
}

// ---- What the client wrote back ----

export function rstOrGoaway(streamId: number): (f: WireFrame) => boolean {
  return (f) => (f.type === FrameType.RST_STREAM && f.streamId === streamId) || f.type === FrameType.GOAWAY;
}

export function isGoaway(f: WireFrame): boolean {
  return f.type === FrameType.GOAWAY;
}

export function isError(f: WireFrame): boolean {
  return f.type === FrameType.GOAWAY || f.type === FrameType.RST_STREAM;
}

// ---- Shared shapes: a stream error, a connection error ----

/** The last handler call of a stream that failed on a protocol error. */
export const ERRORED = 'error UPSTREAM_PROTOCOL_ERROR';

export interface StreamErrorCase {
  readonly name: string;
  /** What the origin sends on the stream under test (stream 1). */
  readonly frames: (id: number) => Buffer[];
  /** That stream's handler calls, in order. */
  readonly log: readonly string[];
  /** The RST_STREAM code; PROTOCOL_ERROR when not given. */
  readonly code?: number;
}

/** Stream 1 gets `c.frames`: RST_STREAM(1, code), onError; stream 3 then completes, and no GOAWAY is sent. */
export async function expectStreamError(t: TestContext, c: StreamErrorCase): Promise<void> {
  const { conn, calls } = await open(t, 2);
  const [bad, good] = calls as [Recorded, Recorded];
  const answer = await conn.answer(c.frames(1), rstOrGoaway(1));
  assert.equal(showFrame(answer), `RST_STREAM(1, ${errorName(c.code ?? H2Error.PROTOCOL_ERROR)})`);
  await bad.settled();
  assert.deepEqual(bad.log(), c.log);
  conn.write(...complete(3));
  await good.settled();
  assert.deepEqual(good.log(), ['head 200', 'data ok', 'end'], 'the other stream of the connection completes');
  await conn.sync();
  assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), [showFrame(answer)], 'one RST_STREAM, no GOAWAY');
}

export interface ConnectionErrorCase {
  readonly name: string;
  /** The GOAWAY code. */
  readonly code: number;
  /** Sent first and taken without an error frame (checked): pins the boundary the refused frames cross. */
  readonly accepted?: () => Buffer[];
  readonly frames: () => Buffer[];
  /** The origin sends no SETTINGS first: `frames` are its first bytes. */
  readonly noPreface?: boolean;
}

/** Streams 1 and 3 open: `c.frames` get GOAWAY(0, code), both streams fail, the socket is ended, nothing follows. */
export async function expectConnectionError(t: TestContext, c: ConnectionErrorCase): Promise<void> {
  const { conn, calls } = await open(t, 2, c.noPreface === true ? null : []);
  if (c.accepted !== undefined) {
    const early = await conn.answer(c.accepted(), isError);
    assert.equal(showFrame(early), showFrame(undefined), 'the frames before the boundary are taken');
  }
  const goaway = await conn.answer(c.frames(), isGoaway);
  assert.equal(showFrame(goaway), `GOAWAY(0, ${errorName(c.code)})`);
  for (const call of calls) {
    await call.settled();
    assert.equal(call.log().at(-1), ERRORED, `every open stream fails: ${call.log().join(', ')}`);
    assert.ok(!call.log().includes('end'));
  }
  assert.equal(await conn.closing, 'end', 'the client ends the socket');
  assert.equal(conn.frames.items.at(-1), goaway, 'nothing after the GOAWAY');
}
