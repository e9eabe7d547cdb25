// What an allowed request sends upstream, for HTTP/1.1 (forward.ts) and HTTP/2 streams (h2-stream.ts) alike: the
// rewritten head (credential substitution, a signing endpoint's own signature dropped first) and, where the body must
// be read before the head leaves (issue 15, docs/credentials.md#streaming-bodies), the promise of that body.

import type { IncomingHttpHeaders } from 'node:http';
import type { RewriteRefusal } from '../credentials/outcome.js';
import { hostHeader, upstreamRequestHeaders } from '../http1/headers.js';
import type { Endpoint } from '../policy/types.js';
import type { ProxyContext } from './context.js';
import { type BodyResult, checkedBody, credentialHead, rewrittenBody, routeHasCredentials, type UpstreamHead } from './credential-injection.js';
import type { RelayEvaluation } from './l7.js';
import { type SignedResult, signedRequest, withoutAwsAuth } from './sigv4-request.js';

export type PreparedHead = { readonly ok: true; readonly head: UpstreamHead; readonly signing: Endpoint | undefined } | RewriteRefusal;

/**
 * docs/destinations.md#inside-an-inspected-tunnel: the endpoint-scoped resolver and the rewrite come last, after the
 * allow; nothing is awaited between them and the upstream write unless the body must be read first.
 */
export function prepareHead(
  ctx: ProxyContext,
  evaluation: RelayEvaluation,
  req: { readonly method: string; readonly httpVersion: string; readonly rawHeaders: readonly string[] },
): PreparedHead {
  const { host, port, target, tls, decision } = evaluation;
  const { method } = req;
  const upstream = upstreamRequestHeaders(req.rawHeaders, { host: hostHeader(host, port, tls), httpVersion: req.httpVersion });
  // A signing endpoint: the workload's own (placeholder-key) signature goes before the rewrite sees it.
  const signing = decision.endpoint?.credentialSigning === undefined ? undefined : decision.endpoint;
  const prepared = credentialHead({
    source: ctx.credentials,
    host,
    port,
    method,
    target,
    headers: signing === undefined ? upstream : withoutAwsAuth(upstream),
    endpoint: decision.endpoint,
  });
  return prepared.ok ? { ok: true, head: prepared.head, signing } : prepared;
}

/**
 * Issue 15: where a body could meet credentials it is held and decided before the head leaves (signed, rewritten, or
 * checked up to MAX_BODY_CHECK_BYTES); elsewhere (undefined) it streams, released by the marker scanner. `streamed`
 * bodies (gRPC and Connect streaming) are never held for the check: a streaming call would wait on it forever.
 */
export function heldBody(
  ctx: ProxyContext,
  input: {
    readonly evaluation: RelayEvaluation;
    readonly prepared: Extract<PreparedHead, { ok: true }>;
    /** The request head; `body` is this very object while the body was not read yet. */
    readonly req: { readonly headers: IncomingHttpHeaders } & AsyncIterable<Buffer>;
    readonly body: AsyncIterable<Buffer>;
    readonly method: string;
    readonly hasBody: boolean;
    readonly streamed: boolean;
  },
): Promise<BodyResult | SignedResult> | undefined {
  const { host, port, tls, decision } = input.evaluation;
  const { head, signing } = input.prepared;
  const { req, body, hasBody } = input;
  if (signing !== undefined) return signedRequest({ req, body, head, endpoint: signing, host, port, tls, method: input.method, hasBody });
  if (!hasBody) return undefined;
  if (decision.endpoint?.requestBodyCredentialRewrite === true) return rewrittenBody(body, head);
  // A held GraphQL body goes as the bytes read, with a Content-Length (a chunked one is re-framed).
  if (body !== req || (!input.streamed && routeHasCredentials(ctx.credentials, decision, host, port))) return checkedBody(body, head);
  return undefined;
}
