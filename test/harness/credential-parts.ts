// Credential-test building blocks: a watched credentials file (atomic rewrites, waiting on the source's change
// event), a byte-counting TCP front for "zero bytes reached that origin" assertions, a probing origin that
// reports body bytes as they arrive, and raw keep-alive exchanges. Loopback only. The whole stack built on
// these is credential-stack.ts.

import { EventEmitter, once } from 'node:events';
import { rename, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { createFileCredentialSource, type FileCredentialSource } from '../../src/credentials/file-source.js';
import { parseCredentials } from '../../src/credentials/parse.js';
import { isBoundaryError } from '../../src/shared/errors.js';
import type { CredentialSet } from '../../src/credentials/set.js';
import { CLIENT_TIMEOUT_MS } from './proxy-client.js';

export const PH = 'openshell:resolve:env:';

/** Replaces `path` atomically (write + rename), as a secret mount or editor would. */
export async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${path}.${Math.random().toString(16).slice(2)}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}

/** Writes `credentials.yaml` in `dir` and opens a watched file source on it (env is an empty object). */
export async function credentialsFile(dir: string, text: string): Promise<{ path: string; source: FileCredentialSource }> {
  const path = join(dir, 'credentials.yaml');
  await writeFile(path, text);
  return { path, source: await createFileCredentialSource({ path, env: {}, watch: true }) };
}

/** `CODE path` of every issue parsing `text` finds (empty when it parses). */
export function credentialIssues(text: string): string[] {
  try {
    parseCredentials(text);
    return [];
  } catch (err) {
    assert.ok(isBoundaryError(err));
    return err.issues.map((i) => `${i.code} ${i.path}`);
  }
}

/** Resolves with the next revision the source makes current (registered before the change is made). */
export function nextRevision(source: FileCredentialSource, after: number): Promise<CredentialSet> {
  return new Promise((resolve) => {
    const stop = source.subscribe((next) => {
      if (next.revision > after) {
        stop();
        resolve(next);
      }
    });
  });
}

export interface CountingFront {
  readonly port: number;
  /** Bytes the front received from clients (the boundary), over all connections. */
  bytes(): number;
  connections(): number;
  close(): Promise<void>;
}

/** A TCP front that counts every byte on its way to 127.0.0.1:targetPort: "zero bytes reached it". */
export async function countingFront(targetPort: number): Promise<CountingFront> {
  let bytes = 0;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer((client) => {
    accepted++;
    const upstream = connect({ host: '127.0.0.1', port: targetPort });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('front did not bind');
  return {
    port: address.port,
    bytes: () => bytes,
    connections: () => accepted,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface ProbeOrigin extends EventEmitter {
  readonly port: number;
  /** Body bytes received so far by the current (last) request, and whether it ended or was aborted. */
  received(): Buffer;
  completed(): number;
  close(): Promise<void>;
}

/** An origin that emits 'body' on every body chunk it reads and answers 200 only at the end of the body. */
export async function probeOrigin(): Promise<ProbeOrigin> {
  const events = new EventEmitter();
  let current: Buffer[] = [];
  let completed = 0;
  const sockets = new Set<Socket>();
  const server = createHttpServer((req: IncomingMessage, res) => {
    current = [];
    req.on('data', (chunk: Buffer) => {
      current.push(chunk);
      events.emit('body', chunk);
    });
    req.on('end', () => {
      completed++;
      res.end('ok');
    });
    req.on('error', () => undefined);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('probe origin did not bind');
  return Object.assign(events, {
    port: address.port,
    received: () => Buffer.concat(current),
    completed: () => completed,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

export interface RawResponse {
  readonly status: number;
  readonly head: string;
  readonly body: string;
}

/**
 * Reads one response with a Content-Length body from `socket` (keep-alive: the socket stays open).
 * Bytes after the body are pushed back for the next read.
 */
export function readResponse(socket: Socket): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => finish(new Error('no complete response')), CLIENT_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.toString('latin1', 0, end);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
      if (buffered.length < end + 4 + length) return;
      const body = buffered.toString('utf8', end + 4, end + 4 + length);
      const rest = buffered.subarray(end + 4 + length);
      finish(undefined, { status: Number(head.split(' ')[1]), head, body }, rest);
    };
    const onClose = (): void => finish(new Error(`closed before a complete response (${buffered.length} bytes)`));
    function finish(err?: Error, value?: RawResponse, rest?: Buffer): void {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.pause();
      if (rest !== undefined && rest.length > 0) socket.unshift(rest);
      if (err !== undefined) reject(err);
      else if (value !== undefined) resolve(value);
    }
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
}

/** Writes a request head (and body) to an open socket and reads the response; the socket stays open. */
export async function exchange(socket: Socket, request: string | Buffer): Promise<RawResponse> {
  const response = readResponse(socket);
  socket.write(request);
  return response;
}

/** Opens a plain TCP connection to the proxy. */
export async function proxySocket(proxyPort: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  return socket;
}
