// Stage `mcp-revision`: the MCP protocol revision a request on an mcp endpoint is read under
// (docs/policy.md#mcp-protocol-revisions), before its body is held and before policy, under audit too: the
// `MCP-Protocol-Version` header (refused when repeated, empty, hop-by-hop or unknown; absent, the fallback revision),
// then the endpoint's `mcp.versions` unless the body could be an exempt legacy `initialize` (checked once it is
// read, by the mcp-request stage), then POST only under the sessionless revision.

import { redactPlaceholders } from '../../credentials/placeholder.js';
import { readProtocolVersionHeader, shownHeaderValue } from '../../jsonrpc/mcp-headers.js';
import { FALLBACK_MCP_REVISION, MCP_REVISIONS, SESSIONLESS_MCP_REVISION } from '../../jsonrpc/mcp-revisions.js';
import { bodyHold } from '../inspected-body.js';
import { checkAllowlist, mcpRejection } from '../mcp-revision.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Stage } from '../stage.js';

export function createMcpRevisionStage(): Stage<ChainRequest> {
  return {
    name: 'mcp-revision',
    run(r) {
      if (!r.inspected) return CONTINUE;
      const hold = bodyHold(r.l4!.endpoints, r.path as string);
      if (hold?.protocol !== 'mcp') return CONTINUE;
      const header = readProtocolVersionHeader(r.wire.rawHeaders);
      if (header.kind === 'invalid') {
        return mcpRejection(r, hold, { status: 400, error: 'invalid_mcp_protocol_version_header', reason: 'mcp-protocol-version-header-invalid', detail: header.problem });
      }
      if (header.kind === 'unsupported') {
        // The value is the client's: a placeholder in it is shown as `[CREDENTIAL]`, as everywhere else.
        const detail = `MCP-Protocol-Version "${shownHeaderValue(redactPlaceholders(header.value))}" is not a revision boundary supports (${MCP_REVISIONS.join(', ')})`;
        return mcpRejection(r, hold, { status: 400, error: 'unsupported_mcp_protocol_version', reason: 'mcp-protocol-version-unsupported', detail });
      }
      const revision = header.kind === 'revision' ? header.revision : FALLBACK_MCP_REVISION;
      const onlySessionless = hold.mcpVersions.length === 1 && hold.mcpVersions[0] === SESSIONLESS_MCP_REVISION;
      const hasBody = r.framing!.hasBody || r.bodyFollows;
      // Only a body can be the exempt initialize, and never one sent as, or only allowed as, the sessionless revision.
      const deferred = hasBody && revision !== SESSIONLESS_MCP_REVISION && !onlySessionless;
      const mcp = { revision, fallback: header.kind === 'absent', hold, deferred };
      r.mcp = mcp;
      if (!deferred) {
        const refused = checkAllowlist(r, mcp);
        if (refused !== undefined) return refused;
      }
      if (revision === SESSIONLESS_MCP_REVISION && r.method !== 'POST') {
        const detail = `MCP ${revision} is sessionless: every message is a POST (no GET stream, no DELETE)`;
        return mcpRejection(r, hold, { status: 405, error: 'mcp_http_method_not_allowed', reason: 'mcp-http-method-not-allowed', detail, allow: 'POST' });
      }
      return CONTINUE;
    },
  };
}
