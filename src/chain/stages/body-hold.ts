// Stage `body-hold`: a request a graphql, json-rpc or mcp endpoint selects is held until its body is read and parsed
// (docs/policy.md#graphql-inspection, #json-rpc-and-mcp-inspection); nothing reaches the upstream before the decision
// made with it. What is read without a body (a GraphQL GET, an MCP receive stream or session end) is read here too.
// A body policy cannot read at all (too large, compressed, multipart) is refused 400 in either protocol's terms.

import { graphqlRejectedDenial } from '../../proxy/deny.js';
import { type BodyHold, bodyHold, heldBodyHeadProblem, readHeldBody, withoutBody } from '../../proxy/inspected-body.js';
import { jsonRpcRejectedDenial } from '../../proxy/jsonrpc-denial.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, type Refusal, type Stage } from '../stage.js';

function unreadable(hold: BodyHold, problem: string): Refusal {
  const graphql = hold.protocol === 'graphql';
  return denied(graphql ? graphqlRejectedDenial(problem) : jsonRpcRejectedDenial(problem), graphql ? 'graphql-rejected' : 'jsonrpc-rejected', problem);
}

async function* once(body: Buffer): AsyncGenerator<Buffer> {
  yield body;
}

export function createBodyHoldStage(): Stage<ChainRequest> {
  return {
    name: 'body-hold',
    run(r) {
      if (!r.inspected) return CONTINUE;
      const hold = bodyHold(r.l4!.endpoints, r.path as string);
      if (hold === undefined) return CONTINUE;
      const framing = r.framing!;
      const shape = { method: r.method, query: r.query, accept: r.wire.headers.accept, hasBody: framing.hasBody, upgrade: framing.upgrade !== undefined };
      const bodiless = withoutBody(hold, shape);
      if (bodiless !== 'hold') {
        r.read = bodiless;
        return CONTINUE;
      }
      // Decided from the head alone where it can be: a body that will be refused is never asked for (no 100 Continue).
      const early = heldBodyHeadProblem(r.wire, hold);
      if (early !== undefined) return unreadable(hold, early);
      r.hold = hold;
      r.hooks.continueBody();
      return readHeldBody(r.body, hold).then((read) => {
        if (!read.ok) return unreadable(hold, read.problem);
        r.body = once(read.body);
        r.read = read.inspected;
        return CONTINUE;
      });
    },
  };
}
