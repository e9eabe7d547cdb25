// Origins that echo a request's Authorization into their answer, for the echoed-credential tests: HTTP/1.1 and
// HTTP/2, cleartext and TLS, with Content-Length or without (chunked, or DATA frames alone), in two writes split
// where the test says, the second only once the test releases it (so the two arrive in separate reads); plus an
// answer gzip-encoded whatever was asked, and an event stream.

import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttp2Server, createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { gzipSync } from 'node:zlib';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { originServer, listenTracked } from './servers.js';

/** What every echo answer starts with: the client releases the second write once it has read this much. */
export const ECHO_PREFIX = '{"echo":"';

export interface EchoSeen {
  readonly path: string;
  readonly authorization: string;
  readonly acceptEncoding: string | undefined;
}

export interface EchoOrigin {
  readonly port: number;
  readonly seen: EchoSeen[];
  /** Lets the answer waiting on its second write send it (or the next answer that will wait). */
  release(): void;
  close(): Promise<void>;
}

type Request = IncomingMessage | Http2ServerRequest;
type Response = ServerResponse | Http2ServerResponse;

/**
 * `/echo?split=K&framing=length|stream`: `{"echo":"<authorization>"}`, its first write ending K characters into
 * the echoed value. `/gzip`: the echo gzip-encoded. `/sse`: an event, then (released) an event carrying the value.
 */
function handler(seen: EchoSeen[], gate: () => Promise<void>) {
  return function echo(req: Request, res: Response): void {
    const url = new URL(req.url ?? '/', 'http://origin');
    const authorization = String(req.headers.authorization ?? '');
    seen.push({ path: url.pathname, authorization, acceptEncoding: req.headers['accept-encoding'] as string | undefined });
    const body = `${ECHO_PREFIX}${authorization}"}`;
    // The two response types write alike; TypeScript cannot call a union of their overloads.
    const write = (chunk: string): void => void (res as ServerResponse).write(chunk);
    void (async () => {
      if (url.pathname === '/gzip') {
        const zipped = gzipSync(body);
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': String(zipped.length) });
        res.end(zipped);
        return;
      }
      if (url.pathname === '/sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        write('data: one\n\n');
        await gate();
        res.end(`data: ${authorization}\n\n`);
        return;
      }
      const split = url.searchParams.get('split');
      const length = url.searchParams.get('framing') !== 'stream';
      res.writeHead(200, { 'content-type': 'application/json', ...(length ? { 'content-length': String(Buffer.byteLength(body)) } : {}) });
      if (split === null) {
        res.end(body);
        return;
      }
      const at = ECHO_PREFIX.length + Number(split);
      write(body.slice(0, at));
      await gate();
      res.end(body.slice(at));
    })();
  };
}

async function listen(kind: 'h1' | 'h1-tls' | 'h2' | 'h2-tls', ca: CertificateAuthority, names: readonly string[]): Promise<EchoOrigin> {
  const seen: EchoSeen[] = [];
  let credits = 0;
  const waiting: (() => void)[] = [];
  const gate = (): Promise<void> => {
    if (credits > 0) {
      credits -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
  const handle = handler(seen, gate);
  const cert = kind.endsWith('-tls') ? await issueCertificate({ ca, kind: 'server', names, now: Date.now }) : undefined;
  const server =
    kind === 'h1'
      ? createHttpServer(handle)
      : kind === 'h1-tls'
        ? await originServer(handle, { ca, names })
        : kind === 'h2'
          ? createHttp2Server(handle)
          : createSecureServer({ cert: cert?.certPem, key: cert?.keyPem, ALPNProtocols: ['h2'] }, handle);
  const tracked = await listenTracked(server);
  return {
    port: tracked.port,
    seen,
    release() {
      const next = waiting.shift();
      if (next === undefined) credits += 1;
      else next();
    },
    close: () => tracked.close(),
  };
}

/** The four echo origins: HTTP/1.1 and HTTP/2, each cleartext and TLS (certificates for `names` from `ca`). */
export async function echoOrigins(ca: CertificateAuthority, names: readonly string[]): Promise<Record<'h1' | 'h1-tls' | 'h2' | 'h2-tls', EchoOrigin>> {
  const [h1, h1Tls, h2, h2Tls] = await Promise.all([listen('h1', ca, names), listen('h1-tls', ca, names), listen('h2', ca, names), listen('h2-tls', ca, names)]);
  return { h1, 'h1-tls': h1Tls, h2, 'h2-tls': h2Tls };
}
