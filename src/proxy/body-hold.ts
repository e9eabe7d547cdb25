// docs/policy.md#graphql-inspection, docs/policy.md#json-rpc-and-mcp-inspection: a request a graphql, json-rpc or
// mcp endpoint selects is held until its body is read and parsed, then evaluated again with it; nothing reaches the
// upstream before that decision. A body policy cannot read at all (too large, compressed, multipart) is answered
// 400 on every route: `invalid_graphql_request`, or a JSON-RPC error for json-rpc and mcp.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TunnelScope, ProxyContext } from './context.js';
import { graphqlRejectedDenial, lingerAfterAnswer, sendDenial } from './deny.js';
import { type Outcome, settle } from './events.js';
import { type BodyHold, heldBodyHeadProblem, readHeldBody } from './inspected-body.js';
import { jsonRpcRejectedDenial } from './jsonrpc-denial.js';
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

/** Reads the body `hold` says how to, parses it by its protocol, and relays the evaluation made with it. */
export function holdInspectedBody(request: HoldingRequest, hold: BodyHold): void {
  const { req, res, o } = request;
  const refuse = (problem: string): void => {
    const graphql = hold.protocol === 'graphql';
    settle(o, 'deny', graphql ? 'graphql-rejected' : 'jsonrpc-rejected', problem, 400);
    lingerAfterAnswer(req, res);
    sendDenial(res, graphql ? graphqlRejectedDenial(problem) : jsonRpcRejectedDenial(problem));
    request.report();
  };
  // Decided from the head alone where it can be: a body that will be refused is never asked for (no 100 Continue).
  const early = heldBodyHeadProblem(req, hold);
  if (early !== undefined) {
    refuse(early);
    return;
  }
  if (request.expectContinue) {
    request.expectContinue = false;
    res.writeContinue();
  }
  readHeldBody(req, hold)
    .then(async (read) => {
      if (!read.ok) {
        refuse(read.problem);
        return;
      }
      request.body = once(read.body);
      request.relay(await evaluateRequest(request.ctx, req, request.scope, o, read.inspected));
    })
    .catch((err: unknown) => request.fail(err));
}

async function* once(body: Buffer): AsyncGenerator<Buffer> {
  yield body;
}
