// The supervisor's admin HTTP listener (--admin-listen): /healthz, /readyz, GET /v1/sandboxes, PUT
// /v1/sandboxes/<id>/instances/<iid> (expect an instance), and POST /v1/sandboxes/<id>/relay with
// `Upgrade: boundary-relay` bridging the caller's connection into the sandbox. Serves; decides nothing.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

export const ADMIN_MAX_CONNECTIONS = 256;
export const ADMIN_HEADERS_TIMEOUT_MS = 5_000;
export const ADMIN_REQUEST_TIMEOUT_MS = 10_000;

export interface SupervisorReadiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly [key: string]: unknown;
}

export interface AdminHandlers {
  sandboxes(): object;
  readiness(): SupervisorReadiness;
  expect(sandboxId: string, instanceId: string): { status: number; body: object };
  /** Takes over the upgraded socket: answers 101 when bridged, or an HTTP error. */
  relay(sandboxId: string, query: URLSearchParams, client: Duplex, head: Buffer): void;
}

export interface SupervisorAdmin {
  start(): Promise<void>;
  close(): Promise<void>;
  address(): { host: string; port: number };
}

const RELAY_PATH = /^\/v1\/sandboxes\/([A-Za-z0-9._-]{1,128})\/relay$/;
const EXPECT_PATH = /^\/v1\/sandboxes\/([A-Za-z0-9._-]{1,128})\/instances\/([A-Za-z0-9][A-Za-z0-9._:-]{0,127})$/;

export function createSupervisorAdmin(options: { host: string; port: number; handlers: AdminHandlers }): SupervisorAdmin {
  const { handlers } = options;
  let server: Server | undefined;
  let bound = { host: options.host, port: options.port };

  function json(res: ServerResponse, status: number, body: object): void {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    try {
      const url = new URL(req.url ?? '/', 'http://admin');
      if (req.method === 'GET' && url.pathname === '/healthz') {
        json(res, 200, { ok: true });
        return;
      }
      if (req.method === 'GET' && url.pathname === '/readyz') {
        const readiness = handlers.readiness();
        json(res, readiness.ready ? 200 : 503, readiness);
        return;
      }
      if (req.method === 'GET' && url.pathname === '/v1/sandboxes') {
        json(res, 200, handlers.sandboxes());
        return;
      }
      const expect = EXPECT_PATH.exec(url.pathname);
      if (req.method === 'PUT' && expect !== null) {
        const reply = handlers.expect(expect[1] ?? '', expect[2] ?? '');
        json(res, reply.status, reply.body);
        return;
      }
      if (RELAY_PATH.test(url.pathname)) {
        json(res, 426, { error: 'upgrade-required', message: 'send POST with Connection: Upgrade and Upgrade: boundary-relay' });
        return;
      }
      json(res, 404, { error: 'not-found', message: `no route ${req.method} ${url.pathname}` });
    } catch (err) {
      if (!res.headersSent) json(res, 500, { error: 'internal', message: (err as Error).message });
      else res.destroy();
    }
  }

  function onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const url = new URL(req.url ?? '/', 'http://admin');
    const match = RELAY_PATH.exec(url.pathname);
    if (req.method !== 'POST' || match === null) {
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    try {
      handlers.relay(match[1] ?? '', url.searchParams, socket, head);
    } catch (err) {
      const body = JSON.stringify({ error: 'internal', message: (err as Error).message });
      socket.end(`HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    }
  }

  return {
    async start() {
      const srv = createServer({ headersTimeout: ADMIN_HEADERS_TIMEOUT_MS, requestTimeout: ADMIN_REQUEST_TIMEOUT_MS }, onRequest);
      srv.maxConnections = ADMIN_MAX_CONNECTIONS;
      srv.on('upgrade', onUpgrade);
      srv.on('clientError', (_err, socket) => socket.destroy());
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(options.port, options.host, () => {
          srv.off('error', reject);
          resolve();
        });
      });
      const address = srv.address();
      if (address !== null && typeof address === 'object') bound = { host: address.address, port: address.port };
      server = srv;
    },
    async close() {
      const srv = server;
      if (srv === undefined) return;
      server = undefined;
      await new Promise<void>((resolve) => {
        srv.close(() => resolve());
        srv.closeAllConnections();
      });
    },
    address: () => bound,
  };
}
