// Stage `mcp-request`: an MCP request's held body against its revision (docs/policy.md#mcp-protocol-revisions),
// before policy and under audit too: the revision allowlist where it waited for the body (a legacy `initialize` is
// exempt), a body that is not a request of that revision (400 `invalid_mcp_request`), and under the sessionless
// revision the `Mcp-Method` and `Mcp-Name` headers against the body (400 `invalid_mcp_request_metadata`).

import { readMirroredHeaders } from '../../jsonrpc/mcp-headers.js';
import type { McpSingle } from '../../jsonrpc/mcp-message.js';
import { SESSIONLESS_MCP_REVISION } from '../../jsonrpc/mcp-revisions.js';
import { redactPlaceholders } from '../../credentials/placeholder.js';
import { checkAllowlist, mcpRejection } from '../mcp-revision.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Stage } from '../stage.js';

/** Why the mirrored headers do not say what the body says, or undefined. */
function metadataProblem(rawHeaders: readonly string[], single: McpSingle): string | undefined {
  const headers = readMirroredHeaders(rawHeaders);
  if (!headers.ok) return headers.problem;
  if (headers.method === undefined && single.request) return 'the Mcp-Method header is missing';
  if (headers.method !== undefined && headers.method !== single.method) return "Mcp-Method differs from the body's method";
  if (!single.named) return undefined;
  if (headers.name === undefined) return `the Mcp-Name header is missing (${single.method} names its ${single.method === 'resources/read' ? 'uri' : 'name'} there)`;
  return headers.name === single.name ? undefined : `Mcp-Name differs from the body's ${single.method === 'resources/read' ? 'params.uri' : 'params.name'}`;
}

export function createMcpRequestStage(): Stage<ChainRequest> {
  return {
    name: 'mcp-request',
    run(r) {
      const mcp = r.mcp;
      if (mcp === undefined) return CONTINUE;
      const body = r.mcpBody;
      // Set on every run: a body a middleware replaced is read again, and may no longer be the exempt initialize.
      r.mcpBootstrap = mcp.deferred && body?.bootstrap === true;
      if (mcp.deferred) {
        if (!r.mcpBootstrap) {
          const refused = checkAllowlist(r, mcp);
          if (refused !== undefined) return refused;
        }
      }
      if (body === undefined) return CONTINUE;
      if (!body.ok) {
        // The problem may name a key the client chose: placeholders are shown as `[CREDENTIAL]`, as everywhere else.
        const detail = `MCP request rejected under revision ${mcp.revision}: ${redactPlaceholders(body.problem)}`;
        const reason = body.duplicateKey ? 'json-duplicate-key' : 'mcp-request-invalid';
        return mcpRejection(r, mcp.hold, { status: 400, error: 'invalid_mcp_request', reason, detail });
      }
      if (mcp.revision !== SESSIONLESS_MCP_REVISION || body.single === undefined) return CONTINUE;
      const problem = metadataProblem(r.wire.rawHeaders, body.single);
      if (problem === undefined) return CONTINUE;
      const detail = `MCP ${mcp.revision} request headers do not match its body: ${problem}`;
      return mcpRejection(r, mcp.hold, { status: 400, error: 'invalid_mcp_request_metadata', reason: 'mcp-request-metadata-invalid', detail });
    },
  };
}
