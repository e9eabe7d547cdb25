// SigV4 on the forwarding path: drops the workload's own AWS signature headers, picks the payload mode, holds the
// body when its hash is signed (MAX_SIGNED_BODY_BYTES), and re-signs with the endpoint's provider keys after the
// allow and the placeholder rewrite (docs/credentials.md#sigv4-signing). Never logs a key.

import type { IncomingHttpHeaders } from 'node:http';
import { type RewriteRefusal, refuse } from '../credentials/outcome.js';
import { bufferHasMarker } from '../credentials/scan.js';
import { AWS_AUTH_HEADERS, MAX_SIGNED_BODY_BYTES, type PayloadMode, payloadMode, signRequest } from '../credentials/sigv4.js';
import type { Endpoint } from '../policy/types.js';
import { MARKER_IN_BODY, readPrefix, scannedBody, staleRevision, type UpstreamHead } from './credential-injection.js';

/** The flat header list without the workload's Authorization / X-Amz-Date / X-Amz-Security-Token / X-Amz-Content-Sha256. */
export function withoutAwsAuth(flat: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if (AWS_AUTH_HEADERS.has((flat[i] ?? '').toLowerCase())) continue;
    out.push(flat[i] ?? '', flat[i + 1] ?? '');
  }
  return out;
}

function rawHeader(req: { readonly headers: IncomingHttpHeaders }, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export type SignedResult =
  | {
      readonly ok: true;
      readonly body: Buffer | AsyncIterable<Buffer> | null;
      readonly headers: string[];
      /** For the decision event: what was signed how; never a key or signature. */
      readonly signed: { readonly service: string; readonly region: string; readonly mode: PayloadMode };
    }
  | RewriteRefusal;

/** Signs one request on a credential_signing endpoint; the body is held only in sign_body mode. */
export async function signedRequest(input: {
  /** The request's head (an IncomingMessage, or an HTTP/2 stream's view): its headers pick the payload mode. */
  readonly req: { readonly headers: IncomingHttpHeaders } & AsyncIterable<Buffer>;
  /** What goes upstream as the body: the request itself, or a body an inspector already held (GraphQL). */
  readonly body: AsyncIterable<Buffer>;
  readonly head: UpstreamHead;
  readonly endpoint: Endpoint;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  readonly method: string;
  readonly hasBody: boolean;
}): Promise<SignedResult> {
  const { req, head, endpoint } = input;
  const mode = payloadMode({
    signing: endpoint.credentialSigning ?? 'sigv4',
    clientHash: rawHeader(req, 'x-amz-content-sha256'),
    hasContentLength: rawHeader(req, 'content-length') !== undefined,
  });
  if (typeof mode !== 'string') return mode;
  let body: Buffer | AsyncIterable<Buffer> | null = null;
  if (mode === 'sign_body' && input.hasBody) {
    // A body held by an inspector is whole already; a chunked one still streaming has no length to sign.
    if (input.body === req && rawHeader(req, 'content-length') === undefined) {
      return refuse('signing-mode-unsupported', 'a signed body needs Content-Length; set credential_signing: sigv4:no_body for chunked uploads');
    }
    const held = await readPrefix(input.body, MAX_SIGNED_BODY_BYTES);
    if (!held.complete) return refuse('signing-body-too-large', `a signed body is limited to ${MAX_SIGNED_BODY_BYTES} bytes; use sigv4:no_body`);
    if (bufferHasMarker(held.prefix)) return MARKER_IN_BODY;
    body = held.prefix;
  } else if (input.hasBody) {
    body = scannedBody(input.body);
  }
  const stale = staleRevision(head);
  if (stale !== undefined) return stale;
  const signed = await signRequest({
    scope: head.scope,
    service: endpoint.signingService ?? '',
    region: endpoint.signingRegion,
    host: input.host,
    port: input.port,
    tls: input.tls,
    method: input.method,
    target: head.target,
    headers: head.headers,
    mode,
    body: Buffer.isBuffer(body) ? body : undefined,
  });
  if (!signed.ok) return signed;
  return { ok: true, body, headers: signed.headers, signed: { service: endpoint.signingService ?? '', region: signed.region, mode } };
}
