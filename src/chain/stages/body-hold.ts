// Stage `body-hold`: a request a graphql, json-rpc or mcp endpoint selects is held until its body is read and parsed
// (docs/policy.md#graphql-inspection, #json-rpc-and-mcp-inspection); nothing reaches the upstream before the decision
// made with it. What is read without a body (GraphQL URL parameters, an MCP receive stream or session end) is read
// here too. A body policy cannot read at all (too large, compressed, multipart) is refused 400 in either protocol's
// terms, and so is one the origin could read otherwise than boundary (docs/policy.md#one-reading), under audit too.
// An MCP body is read under the revision the mcp-revision stage selected.

import { graphqlRejectedDenial, inspectionRefusalDenial, inspectionRefusalDetail } from '../denials.js';
import { type BodyHold, bodyHold, heldBodyHeadProblem, type Inspected, readHeldBody, withoutBody } from '../inspected-body.js';
import { jsonRpcRefusalDenial, jsonRpcRejectedDenial } from '../jsonrpc-denial.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, type Refusal, type Stage } from '../stage.js';

function unreadable(hold: BodyHold, problem: string): Refusal {
  const graphql = hold.protocol === 'graphql';
  return denied(graphql ? graphqlRejectedDenial(problem) : jsonRpcRejectedDenial(problem), graphql ? 'graphql-rejected' : 'jsonrpc-rejected', problem);
}

/**
 * What was read becomes the request's inspected body, or its refusal when the origin could read it two ways. An MCP
 * body is recorded as its revision read it: the mcp-request stage answers what it refuses, after the allowlist.
 */
function readAs(r: ChainRequest, read: Inspected): Refusal | undefined {
  if ('mcp' in read) {
    r.mcpBody = read.mcp;
    if (read.mcp.ok) r.read = { jsonRpc: read.mcp.request };
    return CONTINUE;
  }
  if (!('refused' in read)) {
    r.read = read;
    return CONTINUE;
  }
  const { refused } = read;
  const denial = read.protocol === 'graphql' ? inspectionRefusalDenial(refused) : jsonRpcRefusalDenial(refused);
  return denied(denial, refused.reason, inspectionRefusalDetail(refused));
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
      const { headers } = r.wire;
      const shape = {
        method: r.method,
        query: r.query,
        accept: headers.accept,
        contentType: headers['content-type'],
        // HTTP/2: a HEADERS frame that did not end the stream has a body, whether or not Content-Length says so.
        hasBody: framing.hasBody || r.bodyFollows,
      };
      const bodiless = withoutBody(hold, shape);
      if (bodiless !== 'hold') return readAs(r, bodiless);
      // Decided from the head alone where it can be: a body that will be refused is never asked for (no 100 Continue).
      const early = heldBodyHeadProblem(r.wire, hold);
      if (early !== undefined) return unreadable(hold, early);
      r.hold = hold;
      r.hooks.continueBody();
      return readHeldBody(r.body, hold, shape, r.mcp?.revision).then((read) => {
        if (!read.ok) return unreadable(hold, read.problem);
        r.body = once(read.body);
        return readAs(r, read.inspected);
      });
    },
  };
}
