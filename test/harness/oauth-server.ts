// A real OAuth 2.0 authorization server for token grant tests (oauth2-mock-server over HTTPS on loopback, its
// certificate from the test CA), recording every token request and answer, and origins that accept a request only
// with a bearer JWT that verifies against that server's signing keys.

import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, type JWTPayload, jwtVerify } from 'jose';
import { OAuth2Server } from 'oauth2-mock-server';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';

export interface TokenRequestSeen {
  readonly grantType: string;
  readonly authorization: string | undefined;
  readonly body: Readonly<Record<string, string>>;
}

export interface TokenServer {
  readonly server: OAuth2Server;
  port: number;
  readonly requests: TokenRequestSeen[];
  /** Every access and refresh token the server handed out, in order. */
  readonly issued: { access: string[]; refresh: string[] };
  /** expires_in of the next answers. */
  expiresIn: number;
  stop(): Promise<void>;
  /** Starts again on the same port (after stop()). */
  restart(): Promise<void>;
  verify(token: string): Promise<JWTPayload | undefined>;
  close(): Promise<void>;
}

export async function tokenServer(ca: CertificateAuthority, names: readonly string[]): Promise<TokenServer> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-oauth-'));
  const cert = await issueCertificate({ ca, kind: 'server', names: [...names], now: Date.now });
  await writeFile(join(dir, 'key.pem'), cert.keyPem);
  await writeFile(join(dir, 'cert.pem'), cert.certPem);
  const server = new OAuth2Server(join(dir, 'key.pem'), join(dir, 'cert.pem'));
  await server.issuer.keys.generate('RS256');
  let serial = 0;
  const state: TokenServer = {
    server,
    port: 0,
    requests: [],
    issued: { access: [], refresh: [] },
    expiresIn: 3_600,
    async stop() {
      await server.stop();
    },
    async restart() {
      await server.start(state.port, '127.0.0.1');
    },
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, createLocalJWKSet({ keys: server.issuer.keys.toJSON() } as never));
        return payload;
      } catch {
        return undefined;
      }
    },
    async close() {
      if (server.listening) await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  // A serial makes every token distinct even when two are signed in the same second.
  server.service.on('beforeTokenSigning', (token: { payload: Record<string, unknown> }) => {
    serial++;
    token.payload.jti = `t${serial}`;
  });
  server.service.on('beforeResponse', (response: { body: Record<string, unknown> }, req: IncomingMessage & { body: Record<string, string> }) => {
    state.requests.push({ grantType: req.body.grant_type ?? '', authorization: req.headers.authorization, body: { ...req.body } });
    response.body.expires_in = state.expiresIn;
    if (typeof response.body.access_token === 'string') state.issued.access.push(response.body.access_token);
    if (typeof response.body.refresh_token === 'string') state.issued.refresh.push(response.body.refresh_token);
  });
  await server.start(0, '127.0.0.1');
  state.port = server.address().port;
  return state;
}

export interface VerifyingOrigin {
  readonly port: number;
  /** Claims of each request's verified token (undefined: refused with 401). */
  readonly seen: { readonly path: string; readonly authorization: string | undefined; readonly claims: JWTPayload | undefined }[];
  /** Open /stream answers: write more to them, or end them. */
  readonly streams: ServerResponse[];
  close(): Promise<void>;
}

/**
 * An origin that answers 200 only with `Authorization: Bearer <JWT>` signed by `tokens`: `/echo` repeats the
 * Authorization header in its body (for the redaction check), `/stream` stays open for the test to write to.
 */
export async function verifyingOrigin(tokens: TokenServer, tls?: CertificateAuthority): Promise<VerifyingOrigin> {
  const seen: VerifyingOrigin['seen'] = [];
  const streams: ServerResponse[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    req.resume();
    req.once('end', async () => {
      const authorization = req.headers.authorization;
      const token = authorization?.startsWith('Bearer ') === true ? authorization.slice(7) : undefined;
      const claims = token === undefined ? undefined : await tokens.verify(token);
      seen.push({ path: req.url ?? '', authorization, claims });
      if (claims === undefined) {
        res.writeHead(401, { 'content-length': 0 }).end();
      } else if (req.url === '/stream') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('first\n');
        streams.push(res);
      } else {
        const body = req.url === '/echo' ? `you sent ${authorization}` : `ok ${String(claims.jti)}`;
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) }).end(body);
      }
    });
  };
  const cert = tls === undefined ? undefined : await issueCertificate({ ca: tls, kind: 'server', names: ['api.example.test', '127.0.0.1'], now: Date.now });
  const server = cert === undefined ? createHttpServer(handler) : createHttpsServer({ cert: cert.certPem, key: cert.keyPem }, handler);
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    seen,
    streams,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
