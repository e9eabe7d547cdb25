// Echoed secrets in response bodies (docs/credentials.md#echoed-secrets): the answer to a request whose endpoint has
// credentials bound streams through credentials/body-redact.ts on its way to the workload, for HTTP/1.1 and HTTP/2
// alike, and such a request asks the origin for an unencoded answer; an answer in a coding anyway is replaced by a 502.
// Every other answer is relayed untouched, at no cost.

import { createBodyRedactor } from '../credentials/body-redact.js';
import type { CredentialScope } from '../credentials/scope.js';
import type { H1Handler } from '../http1/h1-client.js';
import type { H2Handler } from '../http2/h2-client.js';
import { unreadableResponseDenial } from './deny.js';
import { findingEvent, type Outcome } from './events.js';
import type { ProxyContext } from './context.js';
import { header } from './tools-list-filter.js';

const ECHO_DETAIL = 'the origin echoed a credential bound to this endpoint; it was masked in the answer';

/** Whether the answer to a request with this scope is redacted: some credential is bound to its endpoint. */
export function redactsResponse(scope: CredentialScope): boolean {
  return scope.boundKeys.length > 0;
}

/** The content coding (or gRPC message coding) of an answer, or undefined for an unencoded one. */
function codingOf(headers: readonly string[]): string | undefined {
  for (const name of ['content-encoding', 'grpc-encoding']) {
    const value = header(headers, name)?.trim().toLowerCase();
    if (value !== undefined && value !== '' && value !== 'identity') return value;
  }
  return undefined;
}

/**
 * `inner` with the answer's body redacted of the secrets bound in `scope`. Redaction keeps every length, so the
 * origin's Content-Length and the trailers pass unchanged. `abort` ends the upstream exchange of a replaced answer.
 */
export function redactingHandler(
  inner: H1Handler & Partial<Pick<H2Handler, 'onTrailers'>>,
  input: { readonly ctx: ProxyContext; readonly o: Outcome; readonly scope: CredentialScope; readonly abort: (err: Error) => void },
): H2Handler {
  const redactor = createBodyRedactor(input.scope.secrets().map((secret) => secret.reveal()));
  let replaced = false;
  let reported = false;
  // One finding per answer, the first time a form is masked.
  const noticed = (): void => {
    if (reported || redactor.redactions === 0) return;
    reported = true;
    input.ctx.sink.emit(findingEvent({ ...input.o, detail: ECHO_DETAIL }, 'credential-echoed'));
  };
  return {
    onHead(status, headers, body, complete) {
      const coding = codingOf(headers);
      if (coding !== undefined && !(complete && (body === undefined || body.length === 0))) {
        replaced = true;
        const denial = unreadableResponseDenial(coding);
        const text = Buffer.from(JSON.stringify(denial.body));
        input.o.extra = { ...input.o.extra, credential_response: 'unreadable-coding' };
        inner.onHead(denial.status, ['content-type', 'application/json', 'content-length', String(text.length)], text, true);
        if (!complete) input.abort(new Error('answer in a content coding on a credentialed route'));
        return;
      }
      if (body === undefined) {
        inner.onHead(status, headers, undefined, complete);
        return;
      }
      const out = complete ? Buffer.concat([redactor.push(body), redactor.end()]) : redactor.push(body);
      noticed();
      inner.onHead(status, headers, out.length === 0 && !complete ? undefined : out, complete);
    },
    onData(chunk) {
      if (replaced) return;
      const out = redactor.push(chunk);
      noticed();
      if (out.length > 0) inner.onData(out);
    },
    onTrailers(trailers) {
      if (!replaced) inner.onTrailers?.(trailers);
    },
    onEnd() {
      if (replaced) return;
      const rest = redactor.end();
      noticed();
      if (rest.length > 0) inner.onData(rest);
      inner.onEnd();
    },
    onError(err) {
      if (!replaced) inner.onError(err);
    },
  };
}
