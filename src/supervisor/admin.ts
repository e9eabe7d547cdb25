// The supervisor's admin HTTP listener (--admin-listen): /healthz, /readyz, GET /v1/sandboxes, GET
// /v1/sandboxes/<id>/denials (recent denials its boundaries forwarded), PUT
// /v1/sandboxes/<id>/instances/<iid> (expect an instance), and relays into a sandbox, asked for either as
// POST /v1/sandboxes/<id>/relay?port=N with `Upgrade: boundary-relay` or as `CONNECT <id>:<port>` (what
// socat's PROXY address and ssh ProxyCommand speak). Every route, relays included, first needs an operator
// (admin-auth.ts); over TLS when configured. Parses requests; decides nothing.

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../shared/node-http.js';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import type { RelayTarget } from '../control/messages.js';
import { isLoopbackHost } from '../control/protocol.js';
import type { Logger } from '../telemetry/logger.js';
import { ADMIN_AUTH_REALM, type AdminAuth, type AdminAuthResult, type AdminCallStyle } from './admin-auth.js';
import { LAST_PARAMETER_RULE, parseLastParameter } from '../telemetry/denials.js';
import { type RelayStyle, relayErrorReply } from './relays.js';
import { type ServingPems, servingContext } from './server.js';

export const ADMIN_MAX_CONNECTIONS = 256;
export const ADMIN_HEADERS_TIMEOUT_MS = 5_000;
export const ADMIN_REQUEST_TIMEOUT_MS = 10_000;
const ADMIN_TLS_HANDSHAKE_TIMEOUT_MS = 5_000;
/** Optional CONNECT header choosing one instance of the sandbox (default: the most recently attached). */
const RELAY_INSTANCE_HEADER = 'boundary-instance';

export interface SupervisorReadiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly [key: string]: unknown;
}

interface AdminHandlers {
  sandboxes(): Promise<object>;
  readiness(): SupervisorReadiness;
  /** The sandbox's newest `last` denials (capped by the handler), or 404 for a sandbox never seen. */
  denials(sandboxId: string, last: number): { status: number; body: object };
  /** Answers once the expectation is durable in the store. */
  expect(sandboxId: string, instanceId: string): Promise<{ status: number; body: object }>;
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
  /** With TLS on, new connections handshake with `tls` from now on; a no-op for plain HTTP. Throws on bad material. */
  setTls(tls: ServingPems): void;
}

const DENIALS_PATH = /^\/v1\/sandboxes\/([A-Za-z0-9._-]{1,128})\/denials$/;
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
function parseUpgradeRelay(sandboxId: string, query: URLSearchParams): Parsed<RelayRequest> {
  const port = parsePort(query.get('port'));
  const host = query.get('host') ?? '127.0.0.1';
  const instance = parseInstance(query.get('instance'));
  if (port === undefined || !isLoopbackHost(host)) return { ok: false, message: 'relay needs ?port=1-65535 and an optional loopback host' };
  if (!instance.ok) return instance;
  return { ok: true, value: { sandboxId, instanceId: instance.value, target: { host, port }, style: 'upgrade' } };
}

/** `CONNECT <sandbox-id>:<port>`, the port being the loopback port inside the sandbox (host 127.0.0.1). */
function parseConnectRelay(authority: string, instanceHeader: string | string[] | undefined): Parsed<RelayRequest> {
  const match = CONNECT_TARGET.exec(authority);
  const port = parsePort(match?.[2] ?? null);
  if (match === null || port === undefined) return { ok: false, message: 'CONNECT needs <sandbox-id>:<port> with a port from 1 to 65535' };
  const instance = parseInstance(Array.isArray(instanceHeader) ? null : instanceHeader);
  if (!instance.ok || Array.isArray(instanceHeader)) return { ok: false, message: instance.ok ? `one ${RELAY_INSTANCE_HEADER} header at most` : instance.message };
  return { ok: true, value: { sandboxId: match[1] ?? '', instanceId: instance.value, target: { host: '127.0.0.1', port }, style: 'connect' } };
}

interface SupervisorAdminOptions {
  readonly host: string;
  readonly port: number;
  readonly handlers: AdminHandlers;
  /** Started by the caller (it reads the token file once). */
  readonly auth: AdminAuth;
  /** HTTPS with the supervisor's serving certificate; client certificates are requested and checked against ca. */
  readonly tls?: ServingPems | undefined;
  readonly logger: Logger;
}

/** The challenge that goes with a refusal: 401 names Bearer, 407 (CONNECT) also Basic, which socat sends. */
function challenge(status: number): Record<string, string> {
  if (status === 401) return { 'www-authenticate': `Bearer realm="${ADMIN_AUTH_REALM}"` };
  if (status === 407) return { 'proxy-authenticate': `Bearer realm="${ADMIN_AUTH_REALM}", Basic realm="${ADMIN_AUTH_REALM}"` };
  return {};
}

export function createSupervisorAdmin(options: SupervisorAdminOptions): SupervisorAdmin {
  const { handlers, auth, logger } = options;
  let server: Server | HttpsServer | undefined;
  let bound = { host: options.host, port: options.port };

  function json(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  /** Resolves with the operator, or undefined once `refuse` has answered the caller. */
  async function operatorOf(req: IncomingMessage, style: AdminCallStyle, refuse: (result: AdminAuthResult & { ok: false }) => void) {
    const result = await auth.authenticate(req, style);
    if (result.ok) return result.operator;
    logger.info({ remote: req.socket.remoteAddress, method: req.method, status: result.status, error: result.error }, 'admin request refused');
    refuse(result);
    return undefined;
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const operator = await operatorOf(req, 'request', (r) => json(res, r.status, { error: r.error, message: r.message }, challenge(r.status)));
    if (operator === undefined) return;
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
      json(res, 200, await handlers.sandboxes());
      return;
    }
    const denials = DENIALS_PATH.exec(url.pathname);
    if (req.method === 'GET' && denials !== null) {
      const last = parseLastParameter(url.searchParams.getAll('last'));
      if (last === undefined) {
        json(res, 400, { error: 'ADMIN_REQUEST_INVALID', parameter: 'last', message: LAST_PARAMETER_RULE });
        return;
      }
      const reply = handlers.denials(denials[1] ?? '', last);
      json(res, reply.status, reply.body);
      return;
    }
    const expect = EXPECT_PATH.exec(url.pathname);
    if (req.method === 'PUT' && expect !== null) {
      const reply = await handlers.expect(expect[1] ?? '', expect[2] ?? '');
      logger.info({ operator, sandboxId: expect[1], instanceId: expect[2], status: reply.status }, 'instance expected by an operator');
      json(res, reply.status, reply.body);
      return;
    }
    if (RELAY_PATH.test(url.pathname)) {
      json(res, 426, { error: 'upgrade-required', message: 'send POST with Connection: Upgrade and Upgrade: boundary-relay' });
      return;
    }
    json(res, 404, { error: 'not-found', message: `no route ${req.method} ${url.pathname}` });
  }

  function relay(operator: string, style: RelayStyle, parsed: Parsed<RelayRequest>, socket: Duplex, head: Buffer): void {
    if (!parsed.ok) {
      socket.end(relayErrorReply(style, 400, 'bad-request', parsed.message));
      return;
    }
    const { sandboxId, instanceId, target } = parsed.value;
    logger.info({ operator, sandboxId, instanceId, target, style }, 'relay requested by an operator');
    handlers.relay(parsed.value, socket, head);
  }

  async function onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const operator = await operatorOf(req, 'request', (r) => socket.end(relayErrorReply('upgrade', r.status, r.error, r.message, challenge(r.status))));
    if (operator === undefined) return;
    const url = new URL(req.url ?? '/', 'http://admin');
    const match = RELAY_PATH.exec(url.pathname);
    if (req.method !== 'POST' || match === null) {
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    relay(operator, 'upgrade', parseUpgradeRelay(match[1] ?? '', url.searchParams), socket, head);
  }

  async function onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const operator = await operatorOf(req, 'connect', (r) => socket.end(relayErrorReply('connect', r.status, r.error, r.message, challenge(r.status))));
    if (operator === undefined) return;
    relay(operator, 'connect', parseConnectRelay(req.url ?? '', req.headers[RELAY_INSTANCE_HEADER]), socket, head);
  }

  function serveRequest(req: IncomingMessage, res: ServerResponse): void {
    onRequest(req, res).catch((err: unknown) => {
      if (!res.headersSent) json(res, 500, { error: 'internal', message: (err as Error).message });
      else res.destroy();
    });
  }

  // The socket waits paused while authentication reads the token file; nothing it sent is lost.
  function serveSocket(style: RelayStyle, handler: typeof onUpgrade) {
    return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
      socket.on('error', () => socket.destroy());
      handler(req, socket, head).catch((err: unknown) => socket.end(relayErrorReply(style, 500, 'internal', (err as Error).message)));
    };
  }

  function createListener(): Server | HttpsServer {
    const limits = { headersTimeout: ADMIN_HEADERS_TIMEOUT_MS, requestTimeout: ADMIN_REQUEST_TIMEOUT_MS };
    if (options.tls === undefined) return createServer(limits, serveRequest);
    // rejectUnauthorized is off so that a caller without a certificate can still use a token and a caller
    // with a bad one gets a 403 it can read; admin-auth.ts accepts only verified operator certificates.
    return createHttpsServer(
      {
        ...limits,
        ...servingContext(options.tls),
        requestCert: true,
        rejectUnauthorized: false,
        handshakeTimeout: ADMIN_TLS_HANDSHAKE_TIMEOUT_MS,
      },
      serveRequest,
    );
  }

  return {
    async start() {
      const srv = createListener();
      srv.maxConnections = ADMIN_MAX_CONNECTIONS;
      srv.on('upgrade', serveSocket('upgrade', onUpgrade));
      srv.on('connect', serveSocket('connect', onConnect));
      srv.on('clientError', (_err, socket) => socket.destroy());
      srv.on('tlsClientError', (err) => logger.debug({ err: err.message }, 'admin TLS handshake failed'));
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
    setTls(tls) {
      if (server !== undefined && 'setSecureContext' in server) server.setSecureContext(servingContext(tls));
    },
  };
}
