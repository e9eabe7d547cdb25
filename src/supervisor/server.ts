// The supervisor's control listener: TLS 1.3 with a required client certificate from the control CA,
// HTTP/2, the peer's sandbox id taken from its URI SAN, and per-stream isolation (size limits,
// deadlines, try/catch) so one broken boundary never reaches another. Routes to handlers; holds no tables.

import {
  constants,
  createSecureServer,
  type Http2SecureServer,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  type AdmittedMessage,
  type AttachMessage,
  type ControlMessage,
  decodeMessage,
  type EventsMessage,
  encodeMessage,
  MAX_CONTROL_MESSAGE_BYTES,
  type RefusedMessage,
  type StatusMessage,
} from '../control/messages.js';
import { readBody } from '../control/ndjson.js';
import { describeError, SESSION_HEADER } from '../control/protocol.js';
import { BoundaryError } from '../shared/errors.js';
import type { ControlIdentityPems } from '../pki/identity.js';
import { certificateUris, parseSandboxSpiffeId } from '../pki/issue.js';
import type { Logger } from '../telemetry/logger.js';
import { type CertificateSummary, summarisePem } from '../pki/certificate-summary.js';
import { createRemoteBook, peerRefusalOf, rejectionOf } from './rejection.js';

const MAX_CONNECTIONS = 20_000;
const MAX_STREAMS_PER_SESSION = 128;
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
/** A session that has not attached by then is closed: it holds a socket and promises nothing. */
const ATTACH_WAIT_MS = 30_000;
const BODY_TIMEOUT_MS = 10_000;
const SESSION_PING_INTERVAL_MS = 30_000;
const SESSION_PING_TIMEOUT_MS = 10_000;
export const CLOSE_GRACE_MS = 1_000;

export interface Peer {
  /** From the client certificate's `spiffe://<td>/sandbox/<id>` URI SAN; undefined when absent. */
  readonly sandboxId: string | undefined;
  readonly trustDomain: string | undefined;
  readonly remote: string;
}

export interface ControlHandlers {
  attach(peer: Peer, session: ServerHttp2Session, message: AttachMessage): AdmittedMessage | RefusedMessage;
  /** Takes over the stream (responds, keeps it open) or returns a refusal. */
  watch(peer: Peer, session: ServerHttp2Session, sessionId: string, stream: ServerHttp2Stream): RefusedMessage | undefined;
  status(peer: Peer, sessionId: string, message: StatusMessage): RefusedMessage | undefined;
  events(peer: Peer, sessionId: string, message: EventsMessage): RefusedMessage | undefined;
  relay(peer: Peer, sessionId: string, relayId: string, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void;
  sessionClosed(session: ServerHttp2Session): void;
}

/** The supervisor's ca.pem (what client certificates must chain to), cert.pem and key.pem, as text. */
export type ServingPems = ControlIdentityPems;

/** What both supervisor listeners refuse below. */
const SERVING_MIN_TLS_VERSION = 'TLSv1.3';

/** The secure-context half of a listener's TLS options: what setSecureContext swaps. */
export function servingContext(tls: ServingPems) {
  return { ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: SERVING_MIN_TLS_VERSION } as const;
}

interface ControlServerOptions {
  readonly host: string;
  readonly port: number;
  /** Read once by start(); later versions arrive through setTls(). */
  readonly tls: () => ServingPems;
  /** When set, a certificate from another trust domain is refused like a missing identity. */
  readonly trustDomain?: string | undefined;
  readonly handlers: ControlHandlers;
  readonly logger: Logger;
  readonly attachWaitMs?: number;
  readonly handshakeTimeoutMs?: number | undefined;
}

interface ControlServer {
  start(): Promise<void>;
  close(): Promise<void>;
  address(): { host: string; port: number };
  sessionCount(): number;
  /** New connections handshake with `tls` from now on; sessions already open keep theirs. Throws on bad material. */
  setTls(tls: ServingPems): void;
}

const RELAY_PATH = /^\/v1\/relay\/([A-Za-z0-9][A-Za-z0-9._:-]{0,127})$/;

export function createControlServer(options: ControlServerOptions): ControlServer {
  const { handlers, logger } = options;
  const sessions = new Set<ServerHttp2Session>();
  // Raw connections too: a peer stuck before or inside the TLS handshake has no session to close.
  const connections = new Set<Socket>();
  const peers = new WeakMap<ServerHttp2Session, Peer>();
  const attachTimers = new WeakMap<ServerHttp2Session, NodeJS.Timeout>();
  let server: Http2SecureServer | undefined;
  let bound = { host: options.host, port: options.port };
  const remotes = createRemoteBook();
  // What this listener serves, for the log line of a client that refused it; follows setTls.
  let served: CertificateSummary | undefined;

  function peerOf(session: ServerHttp2Session): Peer {
    const known = peers.get(session);
    if (known !== undefined) return known;
    const socket = session.socket as TLSSocket;
    const remote = remotes.remoteOf(socket);
    let identity: { trustDomain: string; sandboxId: string } | undefined;
    try {
      // The leaf alone (getPeerCertificate(false)) costs less per attach than getPeerX509Certificate, which copies
      // the certificate into a new object; its subjectaltname is the same OpenSSL rendering as X509Certificate's.
      // An operator certificate (spiffe://<td>/operator/<name>) chains to the same CA but names no sandbox.
      const san = socket.getPeerCertificate(false).subjectaltname;
      for (const uri of certificateUris({ subjectAltName: san ?? '' } as X509Certificate)) identity ??= parseSandboxSpiffeId(uri);
    } catch {
      identity = undefined;
    }
    let refused: string | undefined;
    // The listener admits only verified certificates (admitConnection); this is the second line of defence.
    if (!socket.authorized) refused = 'the client certificate did not verify';
    else if (identity === undefined) refused = 'the client certificate names no spiffe://<trust-domain>/sandbox/<id> URI';
    else if (options.trustDomain !== undefined && identity.trustDomain !== options.trustDomain) {
      refused = `the client certificate's trust domain ${identity.trustDomain} is not ${options.trustDomain}`;
    }
    if (refused !== undefined) {
      identity = undefined;
      logger.warn({ ...rejectionOf(socket, remote), reason: refused }, 'control connection has no sandbox identity; every request on it is refused');
    }
    const peer = { sandboxId: identity?.sandboxId, trustDomain: identity?.trustDomain, remote };
    peers.set(session, peer);
    return peer;
  }

  function onSession(session: ServerHttp2Session): void {
    sessions.add(session);
    session.on('error', (err) => logger.debug({ err: describeError(err), remote: peerOf(session).remote }, 'control session error'));
    const attachTimer = setTimeout(() => {
      logger.warn({ remote: peerOf(session).remote }, `control session did not attach within ${options.attachWaitMs ?? ATTACH_WAIT_MS} ms; closed`);
      session.destroy();
    }, options.attachWaitMs ?? ATTACH_WAIT_MS);
    attachTimer.unref();
    const pinger = setInterval(() => pingOnce(session), SESSION_PING_INTERVAL_MS);
    pinger.unref();
    session.once('close', () => {
      clearTimeout(attachTimer);
      clearInterval(pinger);
      sessions.delete(session);
      try {
        handlers.sessionClosed(session);
      } catch (err) {
        logger.error({ err }, 'sessionClosed handler failed');
      }
    });
    attachTimers.set(session, attachTimer);
  }

  function pingOnce(session: ServerHttp2Session): void {
    if (session.destroyed) return;
    const timer = setTimeout(() => {
      logger.warn({ remote: peerOf(session).remote }, 'control session did not answer a ping; closed');
      session.destroy();
    }, SESSION_PING_TIMEOUT_MS);
    timer.unref();
    try {
      session.ping(() => clearTimeout(timer));
    } catch {
      clearTimeout(timer);
    }
  }

  async function onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Promise<void> {
    stream.on('error', (err) => logger.debug({ err: describeError(err) }, 'control stream error'));
    const session = stream.session as ServerHttp2Session | undefined;
    if (session === undefined) return;
    const peer = peerOf(session);
    const method = headers[':method'];
    const path = headers[':path'] ?? '';
    const sessionId = String(headers[SESSION_HEADER] ?? '');
    if (peer.sandboxId === undefined) {
      return refuse(stream, 403, 'no-sandbox-identity', 'the client certificate names no spiffe://<trust-domain>/sandbox/<id> URI', false);
    }
    if (method === 'POST' && path === '/v1/attach') {
      const message = await readMessage(stream, 'attach');
      if (message === undefined) return;
      const reply = handlers.attach(peer, session, message);
      if (reply.kind === 'admitted') clearTimeout(attachTimers.get(session));
      return send(stream, reply.kind === 'admitted' ? 200 : statusFor(reply), reply);
    }
    if (method === 'GET' && path === '/v1/watch') {
      const refusal = handlers.watch(peer, session, sessionId, stream);
      if (refusal !== undefined) send(stream, statusFor(refusal), refusal);
      return;
    }
    if (method === 'POST' && path === '/v1/status') {
      const message = await readMessage(stream, 'status');
      if (message === undefined) return;
      const refusal = handlers.status(peer, sessionId, message);
      return send(stream, refusal === undefined ? 200 : statusFor(refusal), refusal ?? { kind: 'ack' });
    }
    if (method === 'POST' && path === '/v1/events') {
      const message = await readMessage(stream, 'events');
      if (message === undefined) return;
      const refusal = handlers.events(peer, sessionId, message);
      return send(stream, refusal === undefined ? 200 : statusFor(refusal), refusal ?? { kind: 'ack' });
    }
    const relay = RELAY_PATH.exec(path);
    if (method === 'POST' && relay !== null) return handlers.relay(peer, sessionId, relay[1] ?? '', stream, headers);
    return refuse(stream, 404, 'bad-request', `no route ${String(method)} ${path}`, false);
  }

  async function readMessage<K extends 'attach' | 'status' | 'events'>(stream: ServerHttp2Stream, kind: K) {
    stream.setTimeout(BODY_TIMEOUT_MS, () => {
      refuse(stream, 408, 'bad-request', `body not received within ${BODY_TIMEOUT_MS} ms`, true);
      stream.close(constants.NGHTTP2_CANCEL);
    });
    try {
      const body = await readBody(stream, MAX_CONTROL_MESSAGE_BYTES);
      stream.setTimeout(0);
      return decodeMessage(body, [kind]);
    } catch (err) {
      stream.setTimeout(0);
      const tooLarge = err instanceof BoundaryError && err.code === 'MESSAGE_TOO_LARGE';
      logger.warn({ err: describeError(err), kind, remote: stream.session ? peerOf(stream.session as ServerHttp2Session).remote : '?' }, 'malformed control message refused');
      refuse(stream, tooLarge ? 413 : 400, tooLarge ? 'message-too-large' : 'bad-request', describeError(err), false);
      if (tooLarge) stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return undefined;
    }
  }

  /**
   * Node verifies a client certificate only after the handshake, and with rejectUnauthorized it destroys the
   * socket before anything can read what was presented. So the listener completes the handshake, and this
   * gate, put in front of HTTP/2's own listener (the only way into a session), logs and closes every
   * connection whose certificate did not verify against the control CA.
   */
  function gateConnections(srv: Http2SecureServer): void {
    const intoHttp2 = srv.listeners('secureConnection') as ((this: Http2SecureServer, socket: TLSSocket) => void)[];
    srv.removeAllListeners('secureConnection');
    srv.on('secureConnection', function admitConnection(socket: TLSSocket) {
      if (!socket.authorized) {
        logger.warn(rejectionOf(socket, remotes.remoteOf(socket)), 'control connection refused: the client certificate did not verify');
        socket.destroy();
        return;
      }
      for (const listener of intoHttp2) listener.call(srv, socket);
    });
  }

  return {
    async start() {
      const tls = options.tls();
      served = summarisePem(tls.certPem);
      const srv = createSecureServer({
        ...servingContext(tls),
        requestCert: true,
        // Refused in admitConnection instead, where the presented certificate can still be read and logged.
        rejectUnauthorized: false,
        allowHTTP1: false,
        handshakeTimeout: options.handshakeTimeoutMs ?? TLS_HANDSHAKE_TIMEOUT_MS,
        settings: { maxConcurrentStreams: MAX_STREAMS_PER_SESSION },
      });
      srv.maxConnections = MAX_CONNECTIONS;
      srv.on('connection', (socket: Socket) => {
        remotes.accepted(socket);
        connections.add(socket);
        socket.once('close', () => connections.delete(socket));
      });
      gateConnections(srv);
      srv.on('session', onSession);
      srv.on('stream', (stream, headers) => {
        onStream(stream, headers).catch((err) => {
          logger.error({ err }, 'control stream handler failed; the stream is reset, the supervisor carries on');
          if (!stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
        });
      });
      srv.on('tlsClientError', (err, socket) => {
        logger.warn({ ...rejectionOf(socket, remotes.remoteOf(socket), err), ...peerRefusalOf(err, served) }, 'control TLS handshake failed');
      });
      srv.on('sessionError', (err) => logger.debug({ err: describeError(err) }, 'control session error'));
      srv.on('unknownProtocol', (socket) => socket.destroy());
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(options.port, options.host, () => {
          srv.off('error', reject);
          resolve();
        });
      });
      srv.on('error', (err) => logger.error({ err }, 'control listener error'));
      const address = srv.address();
      if (address !== null && typeof address === 'object') bound = { host: address.address, port: address.port };
      server = srv;
    },
    async close() {
      const srv = server;
      if (srv === undefined) return;
      server = undefined;
      const closed = new Promise<void>((resolve) => srv.close(() => resolve()));
      for (const session of sessions) session.close();
      const grace = setTimeout(() => {
        for (const session of sessions) session.destroy();
        for (const socket of connections) socket.destroy();
      }, CLOSE_GRACE_MS);
      await closed;
      clearTimeout(grace);
    },
    address: () => bound,
    sessionCount: () => sessions.size,
    setTls(tls) {
      // requestCert, ALPN and the handshake timeout are the server's, not the context's: they stay as they are.
      server?.setSecureContext(servingContext(tls));
      served = summarisePem(tls.certPem);
    },
  };
}

function statusFor(refusal: RefusedMessage): number {
  switch (refusal.code) {
    case 'unknown-sandbox':
    case 'no-sandbox-identity':
    case 'identity-mismatch':
    case 'relay-target-not-allowed':
      return 403;
    case 'message-too-large':
      return 413;
    case 'unknown-session':
      return 409;
    case 'too-many-instances':
    case 'shutting-down':
    case 'policy-invalid':
      return 503;
    default:
      return 400;
  }
}

export function send(stream: ServerHttp2Stream, status: number, message: ControlMessage): void {
  if (stream.destroyed || stream.closed) return;
  try {
    if (!stream.headersSent) stream.respond({ ':status': status, 'content-type': 'application/x-ndjson' });
    stream.end(encodeMessage(message));
  } catch {
    // The peer reset the stream meanwhile: nothing left to tell it.
  }
}

export function refuse(stream: ServerHttp2Stream, status: number, code: RefusedMessage['code'], message: string, retryable: boolean): void {
  send(stream, status, { kind: 'refused', code, message: message.slice(0, 1_000), retryable });
}
