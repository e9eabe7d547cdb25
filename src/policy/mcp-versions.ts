// `mcp.versions` (docs/policy.md#mcp-protocol-revisions): the MCP protocol revisions an endpoint lets a request
// select, read exactly (no trimming, no case folding) and stored sorted oldest first, so two spellings of one list
// give one policy hash. Left out, the pinned default applies.

import { DEFAULT_MCP_VERSIONS, isMcpRevision, MCP_REVISIONS, type McpRevision } from '../jsonrpc/mcp-revisions.js';
import { childPath, type Field, type ReadContext, readSeq, report, scalarValue, seqItems } from './yaml-source.js';

/** The revisions listed, sorted and frozen; the default when the key is absent. Problems are reported, never guessed around. */
export function readMcpVersions(ctx: ReadContext, field: Field | undefined, path: string): readonly McpRevision[] {
  if (field === undefined) return DEFAULT_MCP_VERSIONS;
  const seq = readSeq(ctx, field.value, path);
  if (seq === undefined) return DEFAULT_MCP_VERSIONS;
  const items = seqItems(seq);
  if (items.length === 0) {
    report(ctx, seq, path, 'POLICY_MCP_INVALID', 'the endpoint has an empty mcp.versions list; omit it to use the pinned default revision');
    return DEFAULT_MCP_VERSIONS;
  }
  const seen = new Set<McpRevision>();
  items.forEach((item, i) => {
    const at = childPath(path, i);
    const value = scalarValue(item);
    if (typeof value !== 'string') {
      report(ctx, item ?? seq, at, 'POLICY_TYPE', `versions[${i}] must be a string`);
      return;
    }
    if (!isMcpRevision(value)) {
      report(ctx, item, at, 'POLICY_MCP_INVALID',
        `unsupported MCP protocol version ${JSON.stringify(value)}; write one of ${MCP_REVISIONS.join(', ')} exactly, or omit versions for the default ${DEFAULT_MCP_VERSIONS.join(', ')}`);
      return;
    }
    if (seen.has(value)) report(ctx, item, at, 'POLICY_MCP_INVALID', `the endpoint has duplicate protocol version '${value}' in mcp.versions`);
    seen.add(value);
  });
  return Object.freeze(MCP_REVISIONS.filter((revision) => seen.has(revision)));
}
