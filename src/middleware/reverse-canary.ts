// The built-in `boundary/reverse-canary` (docs/credentials.md#reverse-canary): a request whose target, headers or body
// carries the real value of a credential boundary holds, in any form the canary matcher knows, is refused unless that
// credential is bound to the request's destination. The matcher is built once per credential revision.

import { type CanaryHit, type CanaryMatcher, createCanaryMatcher, createCanaryStream } from '../credentials/canary.js';
import { scopeFor } from '../credentials/scope.js';
import type { CredentialSource } from '../credentials/source.js';
import type { BodyStream, EntryResult, MiddlewareImplementation, MiddlewareRequest, RequestView, TextResult } from './implementation.js';
import type { MiddlewareFinding } from './outcome.js';

/** Largest body or message the canary reads; a larger one fails the stage (on_error decides). */
export const MAX_CANARY_PAYLOAD_BYTES = 1024 * 1024;
/** The reason code of a refusal: fixed, never naming the credential. */
export const CREDENTIAL_VALUE_LEAK = 'credential_value_leak';
const EMPTY = Buffer.alloc(0);
/** The finding type; its subject is the credential's key names. */
export const CANARY_FINDING = 'reverse-canary.credential';

/** The head as one search text: the target and every header line. */
function headBytes(request: MiddlewareRequest): Buffer {
  let text = request.target;
  for (let i = 0; i < request.headers.length; i += 2) text += `\n${request.headers[i] ?? ''}: ${request.headers[i + 1] ?? ''}`;
  return Buffer.from(text, 'latin1');
}

export function createReverseCanary(source: CredentialSource): MiddlewareImplementation {
  let matcher: CanaryMatcher | undefined;

  /** The current revision's matcher: rebuilt on the first request after a credential reload, never per request. */
  function current(): CanaryMatcher {
    const set = source.current();
    if (matcher?.revision !== set.revision) matcher = createCanaryMatcher(set);
    return matcher;
  }

  /** Hits whose value no provider bound to this destination holds: there it would be injected anyway. */
  function unbound(hits: readonly CanaryHit[], request: MiddlewareRequest): CanaryHit[] {
    if (hits.length === 0) return [];
    const bound = scopeFor({ source, host: request.host, port: request.port, path: request.path, endpoint: request.endpoint }).secrets();
    return hits.filter((hit) => !bound.some((secret) => secret.equals(hit.secret)));
  }

  function findings(hits: readonly CanaryHit[]): MiddlewareFinding[] {
    return hits.map((hit) => ({ type: CANARY_FINDING, count: 1, subject: hit.keys.join(',') }));
  }

  function check(payload: Buffer, request: MiddlewareRequest, withHead: boolean): MiddlewareFinding[] {
    const m = current();
    if (m.empty) return [];
    const hits = new Map<string, CanaryHit>();
    for (const hit of [...(withHead ? m.find(headBytes(request)) : []), ...m.find(payload)]) hits.set(hit.keys.join(','), hit);
    return findings(unbound([...hits.values()], request));
  }

  function evaluateBody(body: Buffer, request: MiddlewareRequest): EntryResult {
    if (body.length > MAX_CANARY_PAYLOAD_BYTES) return { verdict: 'failed', failure: 'payload-too-large' };
    const found = check(body, request, true);
    return found.length === 0 ? { verdict: 'allow', body: undefined, findings: [] } : { verdict: 'deny', reasonCode: CREDENTIAL_VALUE_LEAK, findings: found };
  }

  /** A body past MAX_CANARY_PAYLOAD_BYTES: searched as it streams, so an upload is never refused for its size. */
  function streamBody(request: MiddlewareRequest): BodyStream {
    const stream = createCanaryStream(current());
    return {
      feed: (chunk) => findings(unbound(stream.feed(chunk), request)),
      release: () => stream.release(),
      flush: () => stream.flush(),
      reasonCode: CREDENTIAL_VALUE_LEAK,
    };
  }

  function evaluateText(text: string, request: MiddlewareRequest): TextResult {
    const bytes = Buffer.from(text, 'utf8');
    if (bytes.length > MAX_CANARY_PAYLOAD_BYTES) return { verdict: 'failed', failure: 'payload-too-large' };
    const found = check(bytes, request, false);
    return found.length === 0 ? { verdict: 'allow', text: undefined, findings: [] } : { verdict: 'deny', reasonCode: CREDENTIAL_VALUE_LEAK, findings: found };
  }

  return Object.freeze({
    bindings: new Set(['http-request', 'websocket-message'] as const),
    maxPayloadBytes: MAX_CANARY_PAYLOAD_BYTES,
    evaluateBody: (body: Buffer, view: RequestView) => evaluateBody(body, view.request),
    evaluateHead: (view: RequestView) => evaluateBody(EMPTY, view.request),
    streamBody: (view: RequestView) => streamBody(view.request),
    evaluateText: (text: string, view: RequestView) => evaluateText(text, view.request),
  });
}
