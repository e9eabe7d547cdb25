// The body of a request a graphql, json-rpc or mcp endpoint selects (docs/policy.md#graphql-inspection,
// docs/policy.md#json-rpc-and-mcp-inspection): held whole, up to the endpoint's limit, and parsed per protocol
// before anything is decided or sent upstream. What is read without a body (a GraphQL GET, an MCP receive
// stream or session end) is read here too.

import type { IncomingHttpHeaders } from 'node:http';
import { type GraphqlAmbiguity, type GraphqlRead, graphqlFromHead, graphqlFromPost } from '../graphql/http-request.js';
import type { DuplicateKeyRefusal } from '../json/strict-json.js';
import { type McpRead, readMcpBody } from '../jsonrpc/mcp-message.js';
import { DEFAULT_MCP_VERSIONS, type McpRevision } from '../jsonrpc/mcp-revisions.js';
import { parseJsonRpcBody } from '../jsonrpc/message.js';
import type { GraphqlRequest } from '../policy/graphql-match.js';
import type { JsonRpcRequest } from '../policy/jsonrpc-match.js';
import type { Endpoint } from '../policy/types.js';
import { readPrefix } from './credential-injection.js';

/** The protocols whose requests policy reads from their bodies. */
const INSPECTED_BODY_PROTOCOLS = ['graphql', 'json-rpc', 'mcp'] as const;
export type InspectedProtocol = (typeof INSPECTED_BODY_PROTOCOLS)[number];

/** How a held body is read: which protocol's parser, up to how many bytes, and MCP's tool-name rule and revisions. */
export interface BodyHold {
  readonly protocol: InspectedProtocol;
  readonly limit: number;
  readonly strictToolNames: boolean;
  /** MCP: the revisions `mcp.versions` allows (tied MCP endpoints agree on them: the ambiguity check). */
  readonly mcpVersions: readonly McpRevision[];
  /** MCP: the policy key of the endpoint, named in a revision refusal. */
  readonly policy: string;
}

/** What policy is handed of a held (or bodiless) request: the intent field of its protocol. */
export type InspectedBody = { readonly graphql: GraphqlRequest } | { readonly jsonRpc: JsonRpcRequest };

/** A request boundary and the origin could read differently: refused 400 before policy, under audit too. */
export type InspectionRefusal = GraphqlAmbiguity | DuplicateKeyRefusal;

/**
 * What reading a request gave: the intent field for policy, a refusal in the answer form of its protocol, or an
 * MCP body read under its revision (the mcp-request stage answers what it refuses, after the revision allowlist).
 */
export type Inspected =
  | InspectedBody
  | { readonly refused: InspectionRefusal; readonly protocol: InspectedProtocol }
  | { readonly mcp: McpRead };

export type HeldBody =
  | { readonly ok: true; readonly body: Buffer; readonly inspected: Inspected }
  /** Not inspectable at all (too large, compressed, multipart): refused before policy is asked. */
  | { readonly ok: false; readonly problem: string };

export const INSPECTED_PROTOCOL_NAMES: Readonly<Record<InspectedProtocol, string>> = { graphql: 'GraphQL', 'json-rpc': 'JSON-RPC', mcp: 'MCP' };

/**
 * How to hold the body when decide() will select a graphql, json-rpc or mcp endpoint for `path` (the most
 * specific inspected selectors, as decide.ts selectByPath), else undefined: a REST upload beside a catch-all
 * inspected endpoint is never held. Among tied endpoints the smallest limit (a body one of them could not
 * inspect is not sent) and the strict tool-name rule if any has it.
 */
export function bodyHold(endpoints: readonly Endpoint[], path: string): BodyHold | undefined {
  let best = -1;
  let hold: BodyHold | undefined;
  for (const e of endpoints) {
    if (!e.inspected || !e.selectsPath(path) || e.selectorSpecificity < best) continue;
    if (e.selectorSpecificity > best) {
      best = e.selectorSpecificity;
      hold = undefined;
    }
    const protocol = e.protocol;
    if (protocol !== 'graphql' && protocol !== 'json-rpc' && protocol !== 'mcp') continue;
    const limit = protocol === 'graphql' ? e.options.graphqlMaxBodyBytes : e.options.jsonRpcMaxBodyBytes;
    const strict = protocol === 'mcp' && e.options.mcpStrictToolNames;
    const versions = protocol === 'mcp' ? e.options.mcpVersions : DEFAULT_MCP_VERSIONS;
    // Tied inspected selectors share a protocol (the ambiguity check); GraphQL's is kept should they not.
    if (hold === undefined || protocol === 'graphql') {
      hold = { protocol, limit: Math.min(limit, hold?.limit ?? limit), strictToolNames: strict, mcpVersions: versions, policy: e.policy };
    } else hold = { ...hold, limit: Math.min(hold.limit, limit), strictToolNames: hold.strictToolNames || strict };
  }
  return hold;
}

/** The request line and head facts that say whether a body must be held. */
export interface RequestShape {
  readonly method: string;
  /** Raw query string (GraphQL URL parameters). */
  readonly query: string;
  readonly accept: string | undefined;
  readonly contentType: string | undefined;
  readonly hasBody: boolean;
}

/**
 * What policy reads of a request without holding its body, or `hold` when the body must be read first.
 * GraphQL: a GET, or a POST without a body, is read from the URL; a POST's JSON body is held; any other method
 * is unreadable (OpenShell); graphql/http-request.ts refuses what servers read two ways. JSON-RPC and MCP: a
 * bodiless GET asking for `text/event-stream` is the receive stream, an MCP bodiless DELETE ends the session;
 * anything else is held, and an empty body is then invalid JSON. An upgrade never gets here (stages/l7-upgrade.ts).
 */
export function withoutBody(hold: BodyHold, shape: RequestShape): Inspected | 'hold' {
  const { method } = shape;
  if (hold.protocol === 'graphql') {
    const read = graphqlFromHead(shape);
    return read === 'hold' ? read : fromGraphql(read);
  }
  if (!shape.hasBody && method === 'GET' && acceptsEventStream(shape.accept)) return { jsonRpc: { kind: 'receive-stream' } };
  if (!shape.hasBody && method === 'DELETE' && hold.protocol === 'mcp') return { jsonRpc: { kind: 'session-end' } };
  return 'hold';
}

/** `Accept` lists text/event-stream: media types compared case-insensitively, parameters ignored. */
function acceptsEventStream(accept: string | undefined): boolean {
  return accept?.split(',').some((range) => range.split(';')[0]?.trim().toLowerCase() === 'text/event-stream') === true;
}

/** What the head alone refuses: a body boundary could not inspect (compressed, multipart, declared too large). */
export function heldBodyHeadProblem(req: { readonly headers: IncomingHttpHeaders }, hold: BodyHold): string | undefined {
  const name = INSPECTED_PROTOCOL_NAMES[hold.protocol];
  const encoding = (req.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (encoding !== '' && encoding !== 'identity') return `${name} request content-encoding "${encoding}" is not supported`;
  if ((req.headers['content-type'] ?? '').trim().toLowerCase().startsWith('multipart/')) return `${name} multipart requests are not supported`;
  if (Number(req.headers['content-length'] ?? 0) > hold.limit) return tooLarge(hold);
  return undefined;
}

/**
 * Reads and parses a body whose head heldBodyHeadProblem() passed; a chunked body is cut off past the limit. An MCP
 * body is read under `mcpRevision`, the revision the request selected.
 */
export async function readHeldBody(req: AsyncIterable<Buffer>, hold: BodyHold, shape: RequestShape, mcpRevision: McpRevision | undefined): Promise<HeldBody> {
  const { prefix, complete } = await readPrefix(req, hold.limit);
  if (!complete) return { ok: false, problem: tooLarge(hold) };
  return { ok: true, body: prefix, inspected: parseHeldBody(prefix, hold, shape, mcpRevision) };
}

/** One body, parsed by its protocol's reader (GraphQL's with the URL beside it): where each protocol's parser is chosen. */
export function parseHeldBody(body: Buffer, hold: BodyHold, shape: RequestShape, mcpRevision: McpRevision | undefined): Inspected {
  if (hold.protocol === 'graphql') return fromGraphql(graphqlFromPost(shape, body));
  if (hold.protocol === 'mcp') {
    if (mcpRevision === undefined) throw new Error('an MCP body is read only after its revision was selected');
    return { mcp: readMcpBody(body, { revision: mcpRevision, strictToolNames: hold.strictToolNames }) };
  }
  const read = parseJsonRpcBody(body);
  return 'refused' in read ? { refused: read.refused, protocol: hold.protocol } : { jsonRpc: read };
}

function fromGraphql(read: GraphqlRead): Inspected {
  return 'refused' in read ? { refused: read.refused, protocol: 'graphql' } : read;
}

function tooLarge(hold: BodyHold): string {
  return `${INSPECTED_PROTOCOL_NAMES[hold.protocol]} request body exceeds ${hold.limit} byte inspection limit`;
}
