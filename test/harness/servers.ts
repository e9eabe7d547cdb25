// Loopback origins for proxy tests: a TCP echo server, an HTTP origin that answers every request with a
// JSON echo of what it received, and the same over TLS with a certificate from the test CA.

import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';

export interface SeenRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly rawHeaders: readonly string[];
  readonly body: string;
}

export interface Origin {
  readonly port: number;
  /** Every request the origin received, in order. */
  readonly seen: SeenRequest[];
  close(): Promise<void>;
}

/** Answers `{method, url, headers, rawHeaders, body}` as JSON, plus a header only boundary may send (CR-03). */
function echoHandler(seen: SeenRequest[]) {
  return function echo(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record: SeenRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      seen.push(record);
      const body = JSON.stringify(record);
      res.writeHead(200, { 'content-type': 'application/json', 'x-boundary-spoofed': 'from-upstream', 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    });
  };
}

/** A WebSocket-ish upgrade: answers 101 and echoes bytes afterwards. */
function upgradeEcho(req: IncomingMessage, socket: Socket, head: Buffer): void {
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${req.headers.upgrade ?? ''}\r\nconnection: upgrade\r\nx-boundary-spoofed: yes\r\n\r\n`);
  if (head.length > 0) socket.write(head);
  socket.pipe(socket);
}

/** What a protocol origin (GraphQL, JSON-RPC, MCP) saw of one request. */
export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/** Reads the request's whole body, records the request in `seen`, then hands the body on. */
export function recordRequest(req: IncomingMessage, seen: RecordedRequest[], then: (body: string) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    then(body);
  });
}

/** An HTTP/1.1 origin server: cleartext, or TLS with a leaf for `names` (default api.example.test, 127.0.0.1) from `ca`. */
export async function originServer(
  handler: RequestListener,
  tls?: { readonly ca: CertificateAuthority; readonly names?: readonly string[]; readonly now?: () => number },
): Promise<Server> {
  if (tls === undefined) return createHttpServer(handler);
  const cert = await issueCertificate({ ca: tls.ca, kind: 'server', names: tls.names ?? ['api.example.test', '127.0.0.1'], now: tls.now ?? Date.now });
  return createHttpsServer({ cert: cert.certPem, key: cert.keyPem, ALPNProtocols: ['http/1.1'] }, handler);
}

/** Listens on 127.0.0.1 port 0 and tracks the sockets, so close() ends kept-alive connections too (HTTP/1.1, TLS or HTTP/2 servers). */
export async function listenTracked(server: NetServer): Promise<{ readonly port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  return {
    port: address.port,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function listen(server: Server, seen: SeenRequest[]): Promise<Origin> {
  server.on('upgrade', upgradeEcho);
  return { seen, ...(await listenTracked(server)) };
}

export function httpOrigin(): Promise<Origin> {
  const seen: SeenRequest[] = [];
  return listen(createHttpServer(echoHandler(seen)), seen);
}

/** TLS origin whose certificate names `names` (default api.example.test and 127.0.0.1), signed by `ca`. */
export async function tlsOrigin(options: { ca: CertificateAuthority; names?: readonly string[]; now?: () => number }): Promise<Origin> {
  const seen: SeenRequest[] = [];
  return listen(await originServer(echoHandler(seen), options), seen);
}

export interface EchoServer {
  readonly port: number;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** Raw TCP echo on loopback. */
export async function echoServer(): Promise<EchoServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createNetServer({ allowHalfOpen: true }, (s) => {
    accepted++;
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
    s.pipe(s);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('echo server did not bind');
  return {
    port: address.port,
    connections: () => accepted,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
