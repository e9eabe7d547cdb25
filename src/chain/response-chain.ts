// The way back (docs/architecture.md#response-stages): the stages an allowed request's answer passes between the
// upstream and the adapter, listed once. Each wraps the handler the upstream client calls; it may also ask the
// upstream for an answer it can read (no compression). In order from the upstream: secret redaction, then the
// tools/list filter, then the adapter, which only writes bytes.

import type { H1Handler } from '../http1/h1-client.js';
import { redactResponseHeaders } from './credential-injection.js';
import { filteringHandler, identityEncoding, toolsListPlan } from './tools-list-filter.js';
import type { ChainRequest } from './request.js';

/** A response handler, with the trailers an HTTP/2 upstream may send. */
export type ResponseHandler = H1Handler & { onTrailers?(trailers: string[]): void };

interface ResponseStage {
  readonly name: string;
  /** The handler the answer reaches before `next`, or undefined when this request does not need the stage. */
  wrap(r: ChainRequest, next: ResponseHandler): { readonly handler: ResponseHandler; readonly identityEncoding?: boolean } | undefined;
}

/** CR-23: an upstream echoing a bound secret in a header or trailer gets it redacted before the workload sees it. */
const redaction: ResponseStage = {
  name: 'redaction',
  wrap(r, next) {
    const scope = r.head?.scope;
    if (scope === undefined || scope.boundKeys.length === 0) return undefined;
    const handler: ResponseHandler = {
      onHead: (status, headers, body, complete) => next.onHead(status, redactResponseHeaders(headers, scope), body, complete),
      onData: (chunk) => next.onData(chunk),
      onEnd: () => next.onEnd(),
      onError: (err) => next.onError(err),
    };
    if (next.onTrailers !== undefined) {
      const onTrailers = next.onTrailers.bind(next);
      handler.onTrailers = (trailers) => onTrailers(redactResponseHeaders(trailers, scope));
    }
    return { handler };
  },
};

/** docs/policy.md#filtering-toolslist: answers list only the tools policy would let the client call. */
const toolsList: ResponseStage = {
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

/** Nearest the adapter first: the answer runs through them in reverse. */
const RESPONSE_STAGES: readonly ResponseStage[] = [toolsList, redaction];

/** The handler to give the upstream client for `r`'s answer to reach `adapter`, and the upstream request's headers. */
export function responseHandler<H extends ResponseHandler>(r: ChainRequest, adapter: H, headers: string[]): { readonly handler: ResponseHandler; readonly headers: string[] } {
  let handler: ResponseHandler = adapter;
  let upstream = headers;
  for (const stage of RESPONSE_STAGES) {
    const wrapped = stage.wrap(r, handler);
    if (wrapped === undefined) continue;
    handler = wrapped.handler;
    if (wrapped.identityEncoding === true) upstream = identityEncoding(upstream);
  }
  return { handler, headers: upstream };
}
