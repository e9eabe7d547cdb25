// What the MCP revision stages share (docs/policy.md#mcp-protocol-revisions): the revision a request selected and
// how, the allowlist check, and the rejection an MCP request gets before policy is asked: a JSON body naming the
// error, the policy, the layer, the protocol, the method and the path, with `Connection: close`, under audit too.

import { FALLBACK_MCP_REVISION, type McpRevision } from '../jsonrpc/mcp-revisions.js';
import { type DenialError, denial } from './denials.js';
import type { ReasonCode } from './events.js';
import type { BodyHold } from './inspected-body.js';
import type { ChainRequest } from './request.js';
import { denied, type Refusal } from './stage.js';

/** The revision an MCP request is inspected under, recorded by the mcp-revision stage. */
export interface McpSelection {
  readonly revision: McpRevision;
  /** No `MCP-Protocol-Version` header: the fallback revision was selected. */
  readonly fallback: boolean;
  /** The endpoint's `mcp.versions` and policy key. */
  readonly hold: BodyHold;
  /** The allowlist waits for the body: it may be a legacy `initialize`, which is exempt. */
  readonly deferred: boolean;
}

/** 403 `mcp_protocol_version_not_allowed` unless `mcp.versions` lists the selected revision. */
export function checkAllowlist(r: ChainRequest, mcp: McpSelection): Refusal | undefined {
  const { revision, hold } = mcp;
  if (hold.mcpVersions.includes(revision)) return undefined;
  const why = mcp.fallback
    ? `the request has no MCP-Protocol-Version header, so it was read as the fallback revision ${FALLBACK_MCP_REVISION}, which`
    : `MCP-Protocol-Version ${revision}`;
  const detail = `${why} is not allowed by policy ${hold.policy} (mcp.versions: ${hold.mcpVersions.join(', ')})`;
  return mcpRejection(r, hold, { status: 403, error: 'mcp_protocol_version_not_allowed', reason: 'mcp-protocol-version-not-allowed', detail });
}

/** A refusal of an MCP request before policy: the body lists exactly the fields MCP clients of OpenShell read. */
export function mcpRejection(
  r: ChainRequest,
  hold: BodyHold,
  refused: { readonly status: number; readonly error: DenialError; readonly reason: ReasonCode; readonly detail: string; readonly allow?: string },
): Refusal {
  const { policy } = hold;
  const { status, error, reason, detail } = refused;
  const fields = { detail, policy, layer: 'l7', protocol: 'mcp', method: r.method, path: r.path ?? '/' };
  const made = denial(status, error, fields, `: ${error.replaceAll('_', ' ')}`, policy);
  return denied(refused.allow === undefined ? made : { ...made, allow: refused.allow }, reason, detail);
}
