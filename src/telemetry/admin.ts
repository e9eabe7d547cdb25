// The admin listener: /healthz, /readyz, /metrics and the routes it is handed over node:http, bounded in time and size; CONNECT and
// Upgrade are refused. Serves only what it is handed (a Registry, a readiness function); never the global
// default registry. The supervisor runs one too, as its credential-free metrics listener.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from '../shared/node-http.js';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Registry } from 'prom-client';
import type { Logger } from './logger.js';

export const ADMIN_HEADERS_TIMEOUT_MS = 5_000;
export const ADMIN_REQUEST_TIMEOUT_MS = 10_000;
const ADMIN_KEEP_ALIVE_TIMEOUT_MS = 5_000;
const ADMIN_MAX_HEADER_BYTES = 8_192;
export const ADMIN_MAX_CONNECTIONS = 64;
const ADMIN_PATHS = ['/healthz', '/readyz', '/metrics'] as const;

export interface Readiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly [key: string]: unknown;
}

/** A JSON answer of an extra admin route: `body` is sent as JSON with `status`. */
export interface AdminAnswer {
  readonly status: number;
  readonly body: unknown;
}

/** Who asked: the peer address of the connection, for routes that answer only some callers. */
export interface AdminCaller {
  readonly address: string | undefined;
}

/** An extra GET/HEAD route on the admin listener (boundary's /v1/explain and /v1/denials). */
export interface AdminRoute {
  readonly path: string;
  answer(query: URLSearchParams, caller: AdminCaller): AdminAnswer | Promise<AdminAnswer>;
}

export interface AdminServer {
  start(): Promise<void>;
  /**
   * From now on /readyz answers 503 `closing` while everything else keeps serving. The root calls this
   * when its own close begins, drains the other parts, and closes the admin server last.
   */
  markClosing(): void;
  /** Idempotent. Marks closing, stops listening, and lets in-flight requests finish on closing connections. */
  close(): Promise<void>;
  /** The drain deadline passed (boundary-shutdown.ts SHUTDOWN_DRAIN_MS): stop listening and destroy every connection. */
  forceClose(): void;
  /** The bound address (the real port when started on port 0). */
  address(): { host: string; port: number };
}

export function createAdminServer(options: {
  host: string;
  port: number;
  registry: Registry;
  readiness: () => Readiness;
  logger: Logger;
  /** Names the listener in its log lines (default `admin`). */
  label?: string;
  /** Routes served beside the built-in three; a path may be registered once. */
  routes?: readonly AdminRoute[];
}): AdminServer {
  const { registry, readiness, logger } = options;
  const routes = new Map<string, AdminRoute>();
  for (const route of options.routes ?? []) {
    if ((ADMIN_PATHS as readonly string[]).includes(route.path) || routes.has(route.path)) throw new RangeError(`admin route ${route.path} is registered twice`);
    routes.set(route.path, route);
  }
  const label = options.label ?? 'admin';
  let closing = false;
  let closed: Promise<void> | undefined;

  function close(): Promise<void> {
    closing = true;
    closed ??= new Promise<void>((resolve) => {
      if (!server.listening) {
        resolve();
        return;
      }
      server.close(() => resolve());
      // Scrapers keep connections alive; admin requests are short, so idle ones can go at once.
      server.closeIdleConnections();
    });
    return closed;
  }

  const server = createServer(
    {
      headersTimeout: ADMIN_HEADERS_TIMEOUT_MS,
      requestTimeout: ADMIN_REQUEST_TIMEOUT_MS,
      keepAliveTimeout: ADMIN_KEEP_ALIVE_TIMEOUT_MS,
      maxHeaderSize: ADMIN_MAX_HEADER_BYTES,
    },
    function serveAdmin(req, res) {
      handle(req, res).catch((err: unknown) => {
        logger.warn({ err, path: pathOf(req) }, `${label} request failed`);
        if (!res.headersSent) send(res, req, 500, 'application/json', JSON.stringify({ error: 'internal' }), closing);
        else res.destroy();
      });
    },
  );
  server.maxConnections = ADMIN_MAX_CONNECTIONS;
  // Without these listeners node drops a CONNECT silently and serves an Upgrade as a plain request.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => refuseSocket(socket, 'HTTP/1.1 405 Method Not Allowed', 'method-not-allowed'));
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => refuseSocket(socket, 'HTTP/1.1 400 Bad Request', 'upgrade-not-supported'));

  function currentReadiness(): Readiness {
    if (closing) return { ready: false, reasons: ['closing'] };
    try {
      return readiness();
    } catch (err) {
      logger.warn({ err }, 'readiness check threw');
      return { ready: false, reasons: ['readiness-check-failed'] };
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = pathOf(req);
    const route = routes.get(path);
    if (route === undefined && !(ADMIN_PATHS as readonly string[]).includes(path)) {
      send(res, req, 404, 'application/json', JSON.stringify({ error: 'not-found' }), closing);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      send(res, req, 405, 'application/json', JSON.stringify({ error: 'method-not-allowed' }), closing);
      return;
    }
    if (route !== undefined) {
      const target = req.url ?? '';
      const q = target.indexOf('?');
      const query = new URLSearchParams(q < 0 ? '' : target.slice(q + 1).replace(/#.*$/s, ''));
      const answer = await route.answer(query, { address: req.socket.remoteAddress });
      send(res, req, answer.status, 'application/json', JSON.stringify(answer.body), closing);
    } else if (path === '/healthz') {
      send(res, req, 200, 'application/json', JSON.stringify({ status: 'ok' }), closing);
    } else if (path === '/readyz') {
      const state = currentReadiness();
      send(res, req, state.ready ? 200 : 503, 'application/json', JSON.stringify(state), closing);
    } else {
      send(res, req, 200, registry.contentType, await registry.metrics(), closing);
    }
  }

  return {
    start(): Promise<void> {
      return new Promise((resolve, reject) => {
        const onError = (err: Error): void => reject(err);
        server.once('error', onError);
        server.listen(options.port, options.host, () => {
          server.off('error', onError);
          server.on('error', (err) => logger.error({ err }, `${label} listener error`));
          const { host, port } = bound();
          logger.info({ [label]: { host, port } }, `${label} listening`);
          resolve();
        });
      });
    },
    markClosing(): void {
      closing = true;
    },
    close,
    forceClose(): void {
      void close();
      server.closeAllConnections();
    },
    address: bound,
  };

  function bound(): { host: string; port: number } {
    const address = server.address() as AddressInfo | null;
    return address === null ? { host: options.host, port: options.port } : { host: address.address, port: address.port };
  }
}

function refuseSocket(socket: Duplex, statusLine: string, error: string): void {
  socket.on('error', () => socket.destroy());
  const body = JSON.stringify({ error });
  socket.end(`${statusLine}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

function pathOf(req: IncomingMessage): string {
  const target = req.url ?? '/';
  const cut = target.search(/[?#]/);
  return cut === -1 ? target : target.slice(0, cut);
}

function send(res: ServerResponse, req: IncomingMessage, status: number, contentType: string, body: string, last: boolean): void {
  // Once closing, every answer ends its connection, so close() never waits out a keep-alive timeout.
  res.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...(last ? { connection: 'close' } : {}),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
