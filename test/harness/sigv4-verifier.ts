// A SigV4-checking S3 on loopback for signing tests: s3rver stores the objects, and a front in front of it
// verifies every signature with `aws4` (an implementation independent of @smithy/signature-v4) and the body
// hash, because s3rver itself checks only that the access key exists ("Signature version 4 calculation is
// unimplemented" in its authentication middleware). Plus an AWS SDK request handler that sends through boundary
// as a forward proxy. Loopback only.

import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, request as httpRequest } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { HttpResponse, type HttpRequest } from '@smithy/protocol-http';
import aws4 from 'aws4';
import S3rver from 's3rver';

/** s3rver's built-in account: the only keys it knows. */
export const S3RVER_KEYS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;
export const BUCKET = 'bucket';

const AUTHORIZATION = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;

export type Verdict = 'valid' | 'no-signature' | 'unknown-key' | 'bad-signature' | 'body-hash-mismatch';

export interface VerifiedRequest {
  readonly method: string;
  readonly url: string;
  readonly verdict: Verdict;
  /** x-amz-content-sha256 as received. */
  readonly contentSha256: string | undefined;
  readonly bodySha256: string;
  readonly signedHeaders: readonly string[];
  readonly region: string | undefined;
  readonly sessionToken: string | undefined;
}

function one(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** Checks one request's SigV4 signature against `keys`, recomputed by aws4 over the headers it says it signed. */
export function verifySigV4(req: IncomingMessage, body: Buffer, keys: { accessKeyId: string; secretAccessKey: string }): Omit<VerifiedRequest, 'method' | 'url'> {
  const bodySha256 = createHash('sha256').update(body).digest('hex');
  const contentSha256 = one(req.headers, 'x-amz-content-sha256');
  const base = { contentSha256, bodySha256, sessionToken: one(req.headers, 'x-amz-security-token') };
  const match = AUTHORIZATION.exec(one(req.headers, 'authorization') ?? '');
  if (match === null) return { ...base, verdict: 'no-signature', signedHeaders: [], region: undefined };
  const [, accessKeyId, , region, service, signedList = '', signature] = match;
  const signedHeaders = signedList.split(';');
  const result = { ...base, signedHeaders, region };
  if (accessKeyId !== keys.accessKeyId) return { ...result, verdict: 'unknown-key' };
  if (contentSha256 !== 'UNSIGNED-PAYLOAD' && !contentSha256?.startsWith('STREAMING-') && contentSha256 !== bodySha256) {
    return { ...result, verdict: 'body-hash-mismatch' };
  }
  const headers: Record<string, string> = {};
  for (const name of signedHeaders) headers[name] = one(req.headers, name) ?? '';
  const recomputed = aws4.sign(
    { host: one(req.headers, 'host') ?? '', method: req.method ?? 'GET', path: req.url ?? '/', service: service ?? '', region: region ?? '', headers },
    keys,
  );
  const expected = String(recomputed.headers?.Authorization ?? recomputed.headers?.authorization ?? '');
  const ok = expected.endsWith(`SignedHeaders=${signedList}, Signature=${signature}`);
  return { ...result, verdict: ok ? 'valid' : 'bad-signature' };
}

export interface VerifyingS3 {
  /** The front's port: the only address a client (or boundary) talks to. */
  readonly port: number;
  /** s3rver's own port, for the test that shows it accepts a wrong signature. */
  readonly s3rverPort: number;
  readonly seen: VerifiedRequest[];
  close(): Promise<void>;
}

/**
 * s3rver with one bucket, fronted by the aws4 verifier; a request that fails verification gets 403 and never
 * reaches s3rver. With `tls` the front speaks HTTPS with that certificate (s3rver behind it stays plain).
 */
export async function verifyingS3(options: { tls?: { certPem: string; keyPem: string } } = {}): Promise<VerifyingS3> {
  const keys = S3RVER_KEYS;
  const dir = await mkdtemp(join(tmpdir(), 'boundary-s3rver-'));
  const s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: BUCKET, configs: [] }] });
  const address = (await s3.run()) as { port: number };
  const seen: VerifiedRequest[] = [];
  const sockets = new Set<Socket>();
  const handler: RequestListener = async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const checked = verifySigV4(req, body, keys);
    seen.push({ method: req.method ?? '', url: req.url ?? '', ...checked });
    if (checked.verdict !== 'valid') {
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>${checked.verdict}</Message></Error>`);
      return;
    }
    // s3rver takes a Host it does not know for a virtual-host bucket name: give it its own address.
    const headers = { ...req.headers, host: `127.0.0.1:${address.port}` };
    const upstream = httpRequest({ host: '127.0.0.1', port: address.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    upstream.end(body);
  };
  const front =
    options.tls === undefined ? createServer(handler) : createHttpsServer({ cert: options.tls.certPem, key: options.tls.keyPem, ALPNProtocols: ['http/1.1'] }, handler);
  front.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  front.listen(0, '127.0.0.1');
  await once(front, 'listening');
  return {
    port: (front.address() as { port: number }).port,
    s3rverPort: address.port,
    seen,
    async close() {
      for (const s of sockets) s.destroy();
      front.close();
      await s3.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function queryString(query: HttpRequest['query']): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(query)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      parts.push(v === null ? encodeURIComponent(name) : `${encodeURIComponent(name)}=${encodeURIComponent(v)}`);
    }
  }
  return parts.length === 0 ? '' : `?${parts.join('&')}`;
}

/** An AWS SDK request handler that sends every request in absolute form to boundary's proxy port. */
export function forwardProxyHandler(proxyPort: number) {
  return {
    metadata: { handlerProtocol: 'http/1.1' },
    updateHttpClientConfig: () => undefined,
    httpHandlerConfigs: () => ({}),
    handle(request: HttpRequest): Promise<{ response: HttpResponse }> {
      return new Promise((resolve, reject) => {
        const port = request.port === undefined ? '' : `:${request.port}`;
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port: proxyPort,
            method: request.method,
            path: `http://${request.hostname}${port}${request.path}${queryString(request.query)}`,
            headers: request.headers,
            agent: false,
          },
          (res) => {
            const headers: Record<string, string> = {};
            for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) headers[name] = String(value);
            resolve({ response: new HttpResponse({ statusCode: res.statusCode ?? 0, headers, body: res }) });
          },
        );
        req.on('error', reject);
        const body: unknown = request.body;
        if (body instanceof Readable) body.pipe(req);
        else req.end(body as string | Buffer | Uint8Array | undefined);
      });
    },
  };
}
