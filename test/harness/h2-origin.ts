// Loopback HTTP/2 origins for the HTTP/2 proxy tests: TLS with ALPN h2, or cleartext by
// prior knowledge. Every request is answered with a JSON echo of what arrived (protocol, method, path, headers, body)
// and, when the request asks with `x-want-trailers`, trailers.

import {
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from 'node:http2';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { listenTracked } from './servers.js';

export interface H2Seen {
  readonly httpVersion: string;
  readonly method: string;
  readonly path: string;
  readonly authority: string | undefined;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
  readonly trailers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface H2Origin {
  readonly port: number;
  readonly seen: H2Seen[];
  /** HTTP/2 sessions the origin accepted (HTTP/1.1 connections are not counted). */
  sessions(): number;
  close(): Promise<void>;
}

function echo(seen: H2Seen[]) {
  return function handle(req: Http2ServerRequest, res: Http2ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record: H2Seen = {
        httpVersion: req.httpVersion,
        method: req.method,
        path: req.url,
        authority: req.authority,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        trailers: req.trailers,
      };
      seen.push(record);
      const body = JSON.stringify(record);
      const wantTrailers = req.headers['x-want-trailers'] !== undefined;
      res.writeHead(200, { 'content-type': 'application/json', ...(wantTrailers ? {} : { 'content-length': Buffer.byteLength(body) }) });
      if (wantTrailers) res.addTrailers({ 'x-origin-trailer': 'done', 'x-echo-auth': String(req.headers.authorization ?? '') });
      if (req.method === 'HEAD') res.end();
      else res.end(body);
    });
  };
}

async function listen(server: Http2Server | Http2SecureServer, seen: H2Seen[]): Promise<H2Origin> {
  const sessions = new Set<ServerHttp2Session>();
  let accepted = 0;
  server.on('session', (s: ServerHttp2Session) => {
    accepted++;
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
  });
  const tracked = await listenTracked(server);
  return {
    port: tracked.port,
    seen,
    sessions: () => accepted,
    close() {
      for (const s of sessions) s.destroy();
      return tracked.close();
    },
  };
}

/** TLS HTTP/2 origin (ALPN h2 only; names default api.example.test and 127.0.0.1). */
export async function h2TlsOrigin(options: { ca: CertificateAuthority; names?: readonly string[] }): Promise<H2Origin> {
  const seen: H2Seen[] = [];
  const cert = await issueCertificate({ ca: options.ca, kind: 'server', names: options.names ?? ['api.example.test', '127.0.0.1'], now: Date.now });
  const server = createSecureServer(
    { cert: cert.certPem, key: cert.keyPem, ALPNProtocols: ['h2'] },
    echo(seen),
  );
  return listen(server, seen);
}

/** Cleartext HTTP/2 origin: prior knowledge only. */
export function h2cOrigin(): Promise<H2Origin> {
  const seen: H2Seen[] = [];
  return listen(createServer(echo(seen)), seen);
}
