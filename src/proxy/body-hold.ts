// docs/policy.md#graphql-inspection, docs/policy.md#json-rpc-and-mcp-inspection: a request a graphql, json-rpc or
// mcp endpoint selects is held until its body is read and parsed, then evaluated again with it; nothing reaches the
// upstream before that decision. A body policy cannot read at all (too large, compressed, multipart) is answered
// 400 on every route and in either HTTP version: `invalid_graphql_request`, or a JSON-RPC error for json-rpc and mcp.

import type { IncomingHttpHeaders } from 'node:http';
import type { TunnelTarget, ProxyContext } from './context.js';
import { type Denial, graphqlRejectedDenial } from './deny.js';
import { type Outcome, settle } from './events.js';
import { type BodyHold, heldBodyHeadProblem, type RequestShape, readHeldBody } from './inspected-body.js';
import { jsonRpcRejectedDenial } from './jsonrpc-denial.js';
import { type Evaluation, evaluateRequest, type RequestView } from './l7.js';

/** The request whose body is held: an HTTP/1.1 IncomingMessage, or an HTTP/2 stream and its head (h2-stream.ts). */
export type HeldRequest = RequestView & AsyncIterable<Buffer> & { readonly headers: IncomingHttpHeaders };

/** What of a request holding its body needs (forward.ts ForwardedRequest, h2-stream.ts H2ProxyStream). */
export interface HoldingRequest {
  readonly ctx: ProxyContext;
  readonly req: HeldRequest;
  readonly o: Outcome;
  readonly scope: TunnelTarget | undefined;
  body: AsyncIterable<Buffer>;
  relay(evaluation: Evaluation): void;
  /** Answers a refusal while the body may still be arriving, in the request's own protocol. */
  refuseHeld(denial: Denial): void;
  /** The body is about to be read: an HTTP/1.1 client waiting for `100 Continue` gets it now. */
  continueBody(): void;
  fail(err: unknown): void;
  report(): void;
}

/** Reads the body `hold` says how to, parses it by its protocol (with the head it came with), and relays the evaluation made with it. */
export function holdInspectedBody(request: HoldingRequest, hold: BodyHold & { readonly shape: RequestShape }): void {
  const { req, o } = request;
  const refuse = (problem: string): void => {
    const graphql = hold.protocol === 'graphql';
    settle(o, 'deny', graphql ? 'graphql-rejected' : 'jsonrpc-rejected', problem, 400);
    request.refuseHeld(graphql ? graphqlRejectedDenial(problem) : jsonRpcRejectedDenial(problem));
    request.report();
  };
  // Decided from the head alone where it can be: a body that will be refused is never asked for (no 100 Continue).
  const early = heldBodyHeadProblem(req, hold);
  if (early !== undefined) {
    refuse(early);
    return;
  }
  request.continueBody();
  readHeldBody(req, hold, hold.shape)
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
