// The way back (docs/architecture.md#the-request-chain): the stages an allowed request's answer passes between the
// upstream and the adapter, listed once. Each wraps the handler the upstream client calls; it may also ask the upstream
// for an answer it can read (no content coding). In order from the upstream: the tools/list filter, then secret
// redaction (after the filter re-encoded its JSON), then external response middlewares (which so never see a bound
// secret), then the adapter, which only writes bytes.

import { createBodyRedactor } from '../credentials/body-redact.js';
import type { CredentialScope } from '../credentials/scope.js';
import type { H1Handler } from '../http1/h1-client.js';
import type { MiddlewareRegistry } from '../middleware/registry.js';
import type { AuditSink } from '../telemetry/event.js';
import { redactResponseHeaders } from './credential-injection.js';
import { unreadableResponseDenial } from './denials.js';
import { requestOutcome } from './event.js';
import { findingEvent } from './events.js';
import { middlewareResponseHandler, responseEntries } from './middleware-response.js';
import type { ChainRequest } from './request.js';
import { filteringHandler, header, identityEncoding, toolsListPlan } from './tools-list-filter.js';

/** A response handler, with the trailers an HTTP/2 upstream may send. */
export type ResponseHandler = H1Handler & { onTrailers?(trailers: string[]): void };

interface Wrapped {
  readonly handler: ResponseHandler;
  /** The upstream must answer without a content coding. */
  readonly identityEncoding?: boolean;
}

interface ResponseStage {
  readonly name: string;
  /** The handler the answer reaches before `next`, or undefined when this request does not need the stage. */
  wrap(r: ChainRequest, next: ResponseHandler, abort: (err: Error) => void): Wrapped | undefined;
}

export interface ResponseChain {
  /** The handler to give the upstream client for `r`'s answer to reach `adapter`, and the upstream request's headers. */
  handler(r: ChainRequest, adapter: ResponseHandler, headers: string[], abort: (err: Error) => void): { readonly handler: ResponseHandler; readonly headers: string[] };
}

const ECHO_DETAIL = 'the origin echoed a credential bound to this endpoint; it was masked in the answer';

/** The content coding (or gRPC message coding) of an answer, or undefined for an unencoded one. */
function codingOf(headers: readonly string[]): string | undefined {
  for (const name of ['content-encoding', 'grpc-encoding']) {
    const value = header(headers, name)?.trim().toLowerCase();
    if (value !== undefined && value !== '' && value !== 'identity') return value;
  }
  return undefined;
}

/**
 * docs/credentials.md#echoed-secrets: an answer to a request whose endpoint has credentials bound reaches the workload
 * with every bound secret masked, in its headers, trailers and body (byte for byte, so Content-Length and trailers
 * stay right); such a request asks for an unencoded answer, and an answer in a coding anyway becomes a 502. One
 * finding per answer, the first time a form is masked.
 */
function redactionStage(sink: AuditSink): ResponseStage {
  return {
    name: 'redaction',
    wrap(r, next, abort) {
      const scope: CredentialScope | undefined = r.head?.scope;
      if (scope === undefined || scope.boundKeys.length === 0) return undefined;
      const redactor = createBodyRedactor(scope.secrets().map((secret) => secret.reveal()));
      let replaced = false;
      let reported = false;
      const noticed = (): void => {
        if (reported || redactor.redactions === 0) return;
        reported = true;
        sink.emit(findingEvent({ ...requestOutcome(r), detail: ECHO_DETAIL }, 'credential-echoed'));
      };
      const handler: ResponseHandler = {
        onHead(status, headers, body, complete) {
          const coding = codingOf(headers);
          if (coding !== undefined && !(complete && (body === undefined || body.length === 0))) {
            replaced = true;
            r.credentialResponse = 'unreadable-coding';
            const denial = unreadableResponseDenial(coding);
            const text = Buffer.from(JSON.stringify(denial.body));
            next.onHead(denial.status, ['content-type', 'application/json', 'content-length', String(text.length)], text, true);
            if (!complete) abort(new Error('answer in a content coding on a credentialed route'));
            return;
          }
          redactResponseHeaders(headers, scope);
          if (body === undefined) {
            next.onHead(status, headers, undefined, complete);
            return;
          }
          const out = complete ? Buffer.concat([redactor.push(body), redactor.end()]) : redactor.push(body);
          noticed();
          next.onHead(status, headers, out.length === 0 && !complete ? undefined : out, complete);
        },
        onData(chunk) {
          if (replaced) return;
          const out = redactor.push(chunk);
          noticed();
          if (out.length > 0) next.onData(out);
        },
        onEnd() {
          if (replaced) return;
          const rest = redactor.end();
          noticed();
          if (rest.length > 0) next.onData(rest);
          next.onEnd();
        },
        onError(err) {
          if (!replaced) next.onError(err);
        },
      };
      if (next.onTrailers !== undefined) {
        const onTrailers = next.onTrailers.bind(next);
        handler.onTrailers = (trailers) => {
          if (!replaced) onTrailers(redactResponseHeaders(trailers, scope));
        };
      }
      return { handler, identityEncoding: true };
    },
  };
}

/** docs/policy.md#filtering-toolslist: answers list only the tools policy would let the client call. */
const toolsListStage: ResponseStage = {
  name: 'tools-list-filter',
  wrap(r, next) {
    const plan = toolsListPlan(r.policy!, r.decision!, { host: r.host as string, port: r.port as number, path: r.path ?? '/', method: r.method });
    if (plan === undefined) return undefined;
    r.toolsList = plan;
    const handler: ResponseHandler = filteringHandler(next, plan);
    if (next.onTrailers !== undefined) handler.onTrailers = next.onTrailers.bind(next);
    return { handler, identityEncoding: true };
  },
};

/** docs/policy.md#responses: answers held until every response-bound middleware entry selecting the host decided. */
function middlewareStage(registry: MiddlewareRegistry): ResponseStage {
  return {
    name: 'middleware-response',
    wrap(r, next, abort) {
      const entries = responseEntries(r, registry);
      if (entries.length === 0) return undefined;
      return { handler: middlewareResponseHandler(r, entries, registry, next, abort), identityEncoding: true };
    },
  };
}

export function createResponseChain(deps: { readonly sink: AuditSink; readonly middleware?: MiddlewareRegistry }): ResponseChain {
  /** Nearest the adapter first: the answer runs through them in reverse. */
  const stages: readonly ResponseStage[] = [
    ...(deps.middleware === undefined ? [] : [middlewareStage(deps.middleware)]),
    redactionStage(deps.sink),
    toolsListStage,
  ];
  return {
    handler(r, adapter, headers, abort) {
      let handler: ResponseHandler = adapter;
      let identity = false;
      for (const stage of stages) {
        const wrapped = stage.wrap(r, handler, abort);
        if (wrapped === undefined) continue;
        handler = wrapped.handler;
        identity ||= wrapped.identityEncoding === true;
      }
      return { handler, headers: identity ? identityEncoding(headers) : headers };
    },
  };
}
