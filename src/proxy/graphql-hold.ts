// docs/policy.md#graphql-inspection: a POST a GraphQL endpoint selects is held until its body is read and parsed,
// then evaluated again with it; nothing reaches the upstream before that decision. A body policy cannot read at
// all (too large, compressed, multipart) is answered 400 `invalid_graphql_request` on every route.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TunnelScope, ProxyContext } from './context.js';
import { graphqlRejectedDenial, lingerAfterAnswer, sendDenial } from './deny.js';
import { type Outcome, settle } from './events.js';
import { graphqlHeadProblem, readGraphqlBody } from './graphql-body.js';
import { type Evaluation, evaluateRequest } from './l7.js';

/** What of a forwarded request holding its body needs (forward.ts ForwardedRequest). */
export interface HoldingRequest {
  readonly ctx: ProxyContext;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly o: Outcome;
  readonly scope: TunnelScope | undefined;
  expectContinue: boolean;
  body: AsyncIterable<Buffer>;
  relay(evaluation: Evaluation): void;
  fail(err: unknown): void;
  report(): void;
}

export function holdGraphqlBody(request: HoldingRequest, limit: number): void {
  const { req, res, o } = request;
  const refuse = (problem: string): void => {
    settle(o, 'deny', 'graphql-rejected', problem, 400);
    lingerAfterAnswer(req, res);
    sendDenial(res, graphqlRejectedDenial(problem));
    request.report();
  };
  // Decided from the head alone where it can be: a body that will be refused is never asked for (no 100 Continue).
  const early = graphqlHeadProblem(req, limit);
  if (early !== undefined) {
    refuse(early);
    return;
  }
  if (request.expectContinue) {
    request.expectContinue = false;
    res.writeContinue();
  }
  readGraphqlBody(req, limit)
    .then(async (read) => {
      if (!read.ok) {
        refuse(read.problem);
        return;
      }
      request.body = once(read.body);
      request.relay(await evaluateRequest(request.ctx, req, request.scope, o, read.request));
    })
    .catch((err: unknown) => request.fail(err));
}

async function* once(body: Buffer): AsyncGenerator<Buffer> {
  yield body;
}
