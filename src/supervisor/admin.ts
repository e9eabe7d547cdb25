// The supervisor's admin HTTP listener (--admin-listen): /healthz, /readyz, GET /v1/sandboxes, PUT
// /v1/sandboxes/<id>/instances/<iid> (expect an instance), and relays into a sandbox, asked for either as
// POST /v1/sandboxes/<id>/relay?port=N with `Upgrade: boundary-relay` or as `CONNECT <id>:<port>` (what
// socat's PROXY address and ssh ProxyCommand speak). Parses requests; decides nothing.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RelayTarget } from '../control/messages.js';
import { isLoopbackHost } from '../control/relay.js';
import { type RelayStyle, relayErrorReply } from './relays.js';

export const ADMIN_MAX_CONNECTIONS = 256;
export const ADMIN_HEADERS_TIMEOUT_MS = 5_000;
export const ADMIN_REQUEST_TIMEOUT_MS = 10_000;
/** Optional CONNECT header choosing one instance of the sandbox (default: the most recently attached). */
export const RELAY_INSTANCE_HEADER = 'boundary-instance';

export interface SupervisorReadiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly [key: string]: unknown;
}

export interface AdminHandlers {
  sandboxes(): object;
  readiness(): SupervisorReadiness;
  expect(sandboxId: string, instanceId: string): { status: number; body: object };
  /** Takes over the caller's socket: answers 101 (upgrade) or 200 (CONNECT) when bridged, or an HTTP error. */
  relay(request: RelayRequest, client: Duplex, head: Buffer): void;
}

export interface RelayRequest {
  readonly sandboxId: string;
  /** undefined: the most recently attached instance. */
  readonly instanceId: string | undefined;
  readonly target: RelayTarget;
  readonly style: RelayStyle;
}

export interface SupervisorAdmin {
  start(): Promise<void>;
  close(): Promise<void>;
  address(): { host: string; port: number };
}

const RELAY_PATH = /^\/v1\/sandboxes\/([A-Za-z0-9._-]{1,128})\/relay$/;
const EXPECT_PATH = /^\/v1\/sandboxes\/([A-Za-z0-9._-]{1,128})\/instances\/([A-Za-z0-9][A-Za-z0-9._:-]{0,127})$/;
const CONNECT_TARGET = /^([A-Za-z0-9._-]{1,128}):([1-9][0-9]{0,4})$/;
const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

function parsePort(text: string | null): number | undefined {
  if (text === null || !/^[1-9][0-9]{0,4}$/.test(text)) return undefined;
  const port = Number(text);
  return port <= 65_535 ? port : undefined;
}

function parseInstance(text: string | null | undefined): Parsed<string | undefined> {
  if (text === null || text === undefined) return { ok: true, value: undefined };
  return INSTANCE_ID.test(text) ? { ok: true, value: text } : { ok: false, message: `not an instance id: ${text.slice(0, 128)}` };
}

/** `POST /v1/sandboxes/<id>/relay?port=N[&host=H][&instance=I]`. */
export function parseUpgradeRelay(sandboxId: string, query: URLSearchParams): Parsed<RelayRequest> {
  const port = parsePort(query.get('port'));
  const host = query.get('host') ?? '127.0.0.1';
  const instance = parseInstance(query.get('instance'));
  if (port === undefined || !isLoopbackHost(host)) return { ok: false, message: 'relay needs ?port=1-65535 and an optional loopback host' };
  if (!instance.ok) return instance;
  return { ok: true, value: { sandboxId, instanceId: instance.value, target: { host, port }, style: 'upgrade' } };
}

/** `CONNECT <sandbox-id>:<port>`, the port being the loopback port inside the sandbox (host 127.0.0.1). */
export function parseConnectRelay(authority: string, instanceHeader: string | string[] | undefined): Parsed<RelayRequest> {
  const match = CONNECT_TARGET.exec(authority);
  const port = parsePort(match?.[2] ?? null);
  if (match === null || port === undefined) return { ok: false, message: 'CONNECT needs <sandbox-id>:<port> with a port from 1 to 65535' };
  const instance = parseInstance(Array.isArray(instanceHeader) ? null : instanceHeader);
  if (!instance.ok || Array.isArray(instanceHeader)) return { ok: false, message: instance.ok ? `one ${RELAY_INSTANCE_HEADER} header at most` : instance.message };
  return { ok: true, value: { sandboxId: match[1] ?? '', instanceId: instance.value, target: { host: '127.0.0.1', port }, style: 'connect' } };
}

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

  function relay(style: RelayStyle, parsed: Parsed<RelayRequest>, socket: Duplex, head: Buffer): void {
    if (!parsed.ok) {
      socket.end(relayErrorReply(style, 400, 'bad-request', parsed.message));
      return;
    }
    try {
      handlers.relay(parsed.value, socket, head);
    } catch (err) {
      socket.end(relayErrorReply(style, 500, 'internal', (err as Error).message));
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
    relay('upgrade', parseUpgradeRelay(match[1] ?? '', url.searchParams), socket, head);
  }

  function onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    relay('connect', parseConnectRelay(req.url ?? '', req.headers[RELAY_INSTANCE_HEADER]), socket, head);
  }

  return {
    async start() {
      const srv = createServer({ headersTimeout: ADMIN_HEADERS_TIMEOUT_MS, requestTimeout: ADMIN_REQUEST_TIMEOUT_MS }, onRequest);
      srv.maxConnections = ADMIN_MAX_CONNECTIONS;
      srv.on('upgrade', onUpgrade);
      srv.on('connect', onConnect);
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
