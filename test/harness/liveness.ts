// Shared parts of the proxy liveness tests (RX rows, docs/destinations.md#denial-responses): raw TCP origins
// (echo, silent, scripted), raw clients and echo round trips through a tunnel, the metrics scrape, and the L7
// and L4 policy snippets those suites are built from. Loopback only.
import { once } from 'node:events';
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { RunningBoundary } from './boundary.js';

/** No row may hang: each suite is cut off after this. */
export const SUITE_TIMEOUT_MS = 60_000;

export const NAMES = { 'raw.example.test': ['127.0.0.1'], 'boom.example.test': ['127.0.0.1'] } as const;

export const head = (lines: string): string => `${lines.replaceAll('\n', '\r\n')}\r\n\r\n`;

export async function metric(b: RunningBoundary, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
  for (const line of text.split('\n')) if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  return 0;
}

/** Values handed over as they come: `next()` resolves with the oldest one not yet taken. */
export function queue<T>(): { put(value: T): void; next(): Promise<T> } {
  const items: T[] = [];
  const waiters: ((value: T) => void)[] = [];
  return {
    put(value) {
      const waiter = waiters.shift();
      if (waiter === undefined) items.push(value);
      else waiter(value);
    },
    next() {
      const value = items.shift();
      return value === undefined ? new Promise((resolve) => waiters.push(resolve)) : Promise.resolve(value);
    },
  };
}

/** A raw TCP origin that hands every accepted socket to `onSocket` and to whoever awaits `next()`. */
export interface TcpOrigin {
  readonly port: number;
  next(): Promise<Socket>;
  close(): Promise<void>;
}

export async function tcpOrigin(onSocket: (socket: Socket) => void): Promise<TcpOrigin> {
  const sockets = new Set<Socket>();
  const accepted = queue<Socket>();
  const server: NetServer = createNetServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    onSocket(socket);
    accepted.put(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  return {
    port: address.port,
    next: () => accepted.next(),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}


export async function rawClient(proxyPort: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  return socket;
}

/** Writes `text` and waits for the echo of exactly that many bytes. */
export async function echoRoundTrip(socket: Socket, text: string): Promise<string> {
  const got: Buffer[] = [];
  let length = 0;
  const echoed = new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      got.push(chunk);
      length += chunk.length;
      if (length >= text.length) done();
    };
    const onClose = (): void => done(new Error('tunnel closed before the echo'));
    function done(err?: Error): void {
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.pause();
      if (err === undefined) resolve(Buffer.concat(got).toString('latin1'));
      else reject(err);
    }
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
  socket.write(text);
  return echoed;
}

export function echo(socket: Socket): void {
  socket.pipe(socket);
}

export const l7Policy = (host: string, ports: readonly number[]): string => `  l7:
    endpoints:
      - host: ${host}
        ports: [${ports.join(', ')}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
          - allow: { method: POST, path: "/upload/**" }
        deny_rules:
          - { method: "*", path: "/secret/**" }
    binaries: [{ path: "/**" }]
`;

export const l4Policy = (key: string, host: string, ports: readonly number[]): string => `  ${key}:
    endpoints:
      - { host: ${host}, ports: [${ports.join(', ')}] }
    binaries: [{ path: "/**" }]
`;
