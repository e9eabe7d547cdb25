// Client helpers for proxy tests: forward requests in absolute form, CONNECT tunnels, TLS over a tunnel,
// requests over an existing socket, and raw byte exchanges for malformed input. Loopback only.

import { once } from 'node:events';
import { type IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

export const CLIENT_TIMEOUT_MS = 5_000;

export interface ClientResponse {
  readonly status: number;
  /** The status line's reason phrase, where the client kept it. */
  readonly statusMessage?: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export function json(response: ClientResponse): Record<string, unknown> {
  return JSON.parse(response.body) as Record<string, unknown>;
}

/** One request through `socket` (or a fresh connection to the proxy), absolute or origin form. */
export function sendRequest(options: {
  readonly proxyPort?: number;
  readonly socket?: Socket;
  readonly method?: string;
  readonly path: string;
  readonly headers?: Record<string, string | string[]>;
  readonly body?: string;
}): Promise<ClientResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: options.proxyPort ?? 0,
      method: options.method ?? 'GET',
      path: options.path,
      headers: options.headers,
      // Node uses createConnection only when no agent is given.
      ...(options.socket === undefined ? { agent: false } : { createConnection: () => options.socket as Socket }),
      timeout: CLIENT_TIMEOUT_MS,
    });
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    // A tunnel socket comes paused (readHead); the client's listeners are attached by now.
    req.on('socket', (socket) => socket.resume());
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.end(options.body);
  });
}

/** Reads bytes until the end of a response head; returns the head and whatever followed it. */
export function readHead(socket: Socket): Promise<{ head: string; status: number; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => done(new Error('no response head')), CLIENT_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = buffered.toString('latin1', 0, end);
        done(undefined, { head, status: Number(head.split(' ')[1]), rest: buffered.subarray(end + 4) });
      }
    };
    const onClose = (): void => done(new Error(`closed before a response head (${buffered.length} bytes)`));
    function done(err?: Error, value?: { head: string; status: number; rest: Buffer }): void {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.pause();
      if (err !== undefined) reject(err);
      else if (value !== undefined) resolve(value);
    }
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
}

/** Sends `CONNECT authority`; resolves with the response status, head, body bytes after it, and the socket. */
export async function openTunnel(proxyPort: number, authority: string, extraHead = ''): Promise<{ status: number; head: string; rest: Buffer; socket: Socket }> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${extraHead}\r\n`);
  const { head, status, rest } = await readHead(socket);
  if (status === 200 && rest.length > 0) socket.unshift(rest);
  return { status, head, rest: status === 200 ? Buffer.alloc(0) : rest, socket };
}

/** Reads until the peer closes; for responses with no length (or denials). */
export async function readAll(socket: Socket, initial: Buffer = Buffer.alloc(0)): Promise<string> {
  const chunks: Buffer[] = [initial];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.resume();
  await Promise.race([once(socket, 'close'), once(socket, 'end')]);
  return Buffer.concat(chunks).toString('latin1');
}

/** TLS client over an established tunnel, trusting `ca`. */
export async function tlsOverTunnel(socket: Socket, options: { servername?: string; ca: string }): Promise<TLSSocket> {
  const tlsSocket = tlsConnect({
    socket,
    ca: options.ca,
    ALPNProtocols: ['http/1.1'],
    ...(options.servername === undefined ? { checkServerIdentity: () => undefined } : { servername: options.servername }),
  });
  await once(tlsSocket, 'secureConnect');
  return tlsSocket;
}

/** Writes raw bytes to the proxy and reads until it closes the connection (or the timeout). */
export async function rawExchange(proxyPort: number, data: string | Buffer): Promise<string> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(data);
  const timer = setTimeout(() => socket.destroy(), CLIENT_TIMEOUT_MS);
  const text = await readAll(socket);
  clearTimeout(timer);
  return text;
}

/** Status code of the first response in a raw exchange, or 0 when none. */
export function statusOf(raw: string): number {
  const match = /^HTTP\/1\.1 (\d{3})/.exec(raw);
  return match === null ? 0 : Number(match[1]);
}
