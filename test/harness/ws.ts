// A minimal WebSocket origin (node:http 'upgrade' + the proxy's own frame codec) that records what it
// receives and echoes text, plus a client side: the handshake through the proxy and a server-frame reader.
// Loopback only.

import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { createClientFrameParser, decodeClose, encodeClose, encodeFrame, OPCODES } from '../../src/websocket/ws-frames.js';
import { CLIENT_TIMEOUT_MS, openTunnel, readHead, tlsOverTunnel } from './proxy-client.js';
import { waiterList } from './waiters.js';

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const CLIENT_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const MASK = Buffer.from([0xa1, 0xb2, 0xc3, 0xd4]);

export type OriginRecord =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'binary'; readonly bytes: Buffer }
  | { readonly kind: 'close'; readonly code: number | undefined }
  | { readonly kind: 'upgrade'; readonly url: string; readonly headers: IncomingMessage['headers'] };

export interface WsOrigin {
  readonly port: number;
  /** Everything received, in order (upgrades, messages, close frames). */
  readonly records: OriginRecord[];
  /** The first record (already seen or still to come) that matches. */
  waitFor(predicate: (record: OriginRecord) => boolean): Promise<OriginRecord>;
  close(): Promise<void>;
}

function accept(req: IncomingMessage, socket: Socket, emit: (record: OriginRecord) => void): void {
  socket.on('error', () => socket.destroy());
  emit({ kind: 'upgrade', url: req.url ?? '', headers: req.headers });
  const key = String(req.headers['sec-websocket-key'] ?? '');
  const digest = createHash('sha1').update(key + WS_GUID).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${digest}\r\n\r\n`);
  const parser = createClientFrameParser();
  socket.on('data', (chunk: Buffer) => {
    const result = parser.push(chunk);
    for (const event of result.events) {
      if (event.kind === 'text') {
        emit({ kind: 'text', text: event.text });
        socket.write(encodeFrame({ opcode: OPCODES.text, payload: Buffer.from(`echo:${event.text}`) }));
      } else if (event.kind === 'binary') {
        emit({ kind: 'binary', bytes: event.frame.payload });
        socket.write(encodeFrame({ opcode: OPCODES.binary, payload: event.frame.payload }));
      } else if (event.kind === 'control' && event.frame.opcode === OPCODES.close) {
        const { code } = decodeClose(event.frame.payload);
        emit({ kind: 'close', code });
        socket.end(encodeClose(code ?? 1000));
      } else if (event.kind === 'control' && event.frame.opcode === OPCODES.ping) {
        socket.write(encodeFrame({ opcode: OPCODES.pong, payload: event.frame.payload }));
      }
    }
    if (result.error !== undefined) socket.end(encodeClose(result.error.code));
  });
}

/** A WebSocket origin on 127.0.0.1 port 0; with `tls`, HTTPS with a certificate from `tls.ca`. */
export async function wsOrigin(options: { tls?: { ca: CertificateAuthority; names: readonly string[] } } = {}): Promise<WsOrigin> {
  const recorded = waiterList<OriginRecord>();
  const sockets = new Set<Socket>();
  let server: Server;
  if (options.tls === undefined) server = createHttpServer();
  else {
    const cert = await issueCertificate({ ca: options.tls.ca, kind: 'server', names: options.tls.names, now: Date.now });
    server = createHttpsServer({ cert: cert.certPem, key: cert.keyPem, ALPNProtocols: ['http/1.1'] });
  }
  const emit = (record: OriginRecord): void => recorded.push(record);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => accept(req, socket, emit));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('ws origin did not bind');
  return {
    port: address.port,
    records: recorded.items,
    waitFor: (predicate) => recorded.waitFor(predicate, CLIENT_TIMEOUT_MS, 'ws origin record'),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface ServerFrame {
  readonly opcode: number;
  readonly payload: Buffer;
}

export interface WsClient {
  readonly socket: Socket;
  sendText(text: string, options?: { fin?: boolean; opcode?: number }): void;
  sendBinary(bytes: Buffer): void;
  sendFrame(opcode: number, payload: Buffer, fin?: boolean): void;
  /** The next frame from the server side (in order); rejects when the socket closes first. */
  next(): Promise<ServerFrame>;
  /** Frames until the first close frame; resolves with its code. */
  closeCode(): Promise<number | undefined>;
}

/** Reads unmasked server frames from `socket` (after the 101), starting with `initial`. */
function wsClient(socket: Socket, initial: Buffer): WsClient {
  let buffered = initial;
  const frames: ServerFrame[] = [];
  const waiters: Array<{ resolve: (f: ServerFrame) => void; reject: (e: Error) => void }> = [];
  let ended = false;
  const drain = (): void => {
    // Each pass takes one whole frame; bounded by the bytes buffered.
    while (buffered.length >= 2) {
      const len7 = (buffered[1] as number) & 0x7f;
      const extra = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
      if (buffered.length < 2 + extra) return;
      const length = len7 === 126 ? buffered.readUInt16BE(2) : len7 === 127 ? Number(buffered.readBigUInt64BE(2)) : len7;
      if (buffered.length < 2 + extra + length) return;
      frames.push({ opcode: (buffered[0] as number) & 0x0f, payload: buffered.subarray(2 + extra, 2 + extra + length) });
      buffered = buffered.subarray(2 + extra + length);
    }
  };
  const flush = (): void => {
    while (frames.length > 0 && waiters.length > 0) waiters.shift()?.resolve(frames.shift() as ServerFrame);
    if (ended) for (const w of waiters.splice(0)) w.reject(new Error('socket closed before a frame'));
  };
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    drain();
    flush();
  });
  socket.once('close', () => {
    ended = true;
    flush();
  });
  drain();
  socket.resume();
  const sendFrame = (opcode: number, payload: Buffer, fin = true): void => {
    socket.write(encodeFrame({ fin, opcode, payload, maskKey: MASK }));
  };
  const next = (): Promise<ServerFrame> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no frame from the server')), CLIENT_TIMEOUT_MS);
      waiters.push({
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      flush();
    });
  return {
    socket,
    sendText: (text, options = {}) => sendFrame(options.opcode ?? OPCODES.text, Buffer.from(text), options.fin ?? true),
    sendBinary: (bytes) => sendFrame(OPCODES.binary, bytes),
    sendFrame,
    next,
    async closeCode() {
      // Bounded: each iteration consumes one frame, and next() rejects once the socket is closed.
      for (let i = 0; i < 64; i++) {
        const frame = await next();
        if (frame.opcode === OPCODES.close) return decodeClose(frame.payload).code;
      }
      throw new Error('no close frame in 64 frames');
    },
  };
}

export type WsTransport = 'forward' | 'connect' | 'connect-tls';

function upgradeHead(target: string, host: string, extra: Readonly<Record<string, string>> = {}): string {
  let more = '';
  for (const [name, value] of Object.entries(extra)) more += `${name}: ${value}\r\n`;
  return (
    `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
    `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${CLIENT_KEY}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n${more}\r\n`
  );
}

/**
 * Opens a WebSocket to `host:port` `path` through the proxy: forward (absolute-form `GET http://...`), or
 * inside a CONNECT tunnel in plaintext or TLS (trusting `caPem`). Resolves with the handshake status.
 */
export async function openWebSocket(options: {
  readonly proxyPort: number;
  readonly transport: WsTransport;
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly caPem?: string | undefined;
  /** Extra handshake headers, written after the standard ones. */
  readonly headers?: Readonly<Record<string, string>>;
}): Promise<{ status: number; head: string; client: WsClient }> {
  const authority = `${options.host}:${options.port}`;
  let socket: Socket;
  if (options.transport === 'forward') {
    socket = connect({ host: '127.0.0.1', port: options.proxyPort });
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.write(upgradeHead(`http://${authority}${options.path}`, authority, options.headers));
  } else {
    const tunnel = await openTunnel(options.proxyPort, authority);
    if (tunnel.status !== 200) throw new Error(`CONNECT answered ${tunnel.status}`);
    socket = tunnel.socket;
    if (options.transport === 'connect-tls') socket = await tlsOverTunnel(socket, { servername: options.host, ca: options.caPem ?? '' });
    socket.write(upgradeHead(options.path, authority, options.headers));
  }
  const { head, status, rest } = await readHead(socket);
  return { status, head, client: wsClient(socket, rest) };
}
