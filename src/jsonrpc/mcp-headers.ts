// The MCP request headers boundary reads (docs/policy.md#mcp-protocol-revisions): `MCP-Protocol-Version`, which
// selects the revision a request is inspected under, and the sessionless revision's `Mcp-Method` and `Mcp-Name`,
// which mirror the body and must say the same. Each must appear at most once and never be named in `Connection`
// (a hop could drop it, and the origin would read another request). Pure: raw header lists in, values out.

import { isMcpRevision, type McpRevision } from './mcp-revisions.js';

const PROTOCOL_VERSION = 'mcp-protocol-version';
const METHOD = 'mcp-method';
const NAME = 'mcp-name';
const CONNECTION = 'connection';
/** A header value shown in a detail is cut to this many characters, control characters as `?`: the client picks it. */
const MAX_SHOWN_VALUE_CHARS = 64;

/** Field values: SP and HTAB around them are not part of the value. */
const OWS = /^[ \t]+|[ \t]+$/g;
/** Printable ASCII, SP and HTAB allowed inside. */
const PRINTABLE = /^[\x20-\x7e\t]*$/;
/** `=?base64?<standard base64>?=`, prefix and suffix case-sensitive: a non-ASCII name, UTF-8 encoded. */
const ENCODED = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;

export type ProtocolVersionHeader =
  | { readonly kind: 'absent' }
  | { readonly kind: 'revision'; readonly revision: McpRevision }
  /** Repeated, empty, or named in Connection. */
  | { readonly kind: 'invalid'; readonly problem: string }
  /** Present once but not a revision boundary knows, exactly as written. */
  | { readonly kind: 'unsupported'; readonly value: string };

/** One header's values and whether a Connection header names it. */
function occurrences(rawHeaders: readonly string[], name: string): { values: string[]; hopByHop: boolean } {
  const values: string[] = [];
  let hopByHop = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const raw = rawHeaders[i] as string;
    // Every request's head is scanned: a name of another length is neither, and is never lower-cased.
    if (raw.length !== name.length && raw.length !== CONNECTION.length) continue;
    const field = raw.toLowerCase();
    const value = rawHeaders[i + 1] as string;
    if (field === name) values.push(value.replace(OWS, ''));
    else if (field === CONNECTION && value.split(',').some((token) => token.trim().toLowerCase() === name)) hopByHop = true;
  }
  return { values, hopByHop };
}

/** `MCP-Protocol-Version`: absent, one known revision, or why it cannot select one. */
export function readProtocolVersionHeader(rawHeaders: readonly string[]): ProtocolVersionHeader {
  const { values, hopByHop } = occurrences(rawHeaders, PROTOCOL_VERSION);
  if (hopByHop) return { kind: 'invalid', problem: 'MCP-Protocol-Version is named in a Connection header' };
  if (values.length === 0) return { kind: 'absent' };
  if (values.length > 1) return { kind: 'invalid', problem: 'MCP-Protocol-Version appears more than once' };
  const value = values[0] as string;
  if (value === '') return { kind: 'invalid', problem: 'MCP-Protocol-Version is empty' };
  return isMcpRevision(value) ? { kind: 'revision', revision: value } : { kind: 'unsupported', value };
}

/** What the sessionless revision's mirrored headers say, or why they cannot be read. */
export type MirroredHeaders =
  | { readonly ok: true; readonly method: string | undefined; readonly name: string | undefined }
  | { readonly ok: false; readonly problem: string };

/** `Mcp-Method` and `Mcp-Name` (decoded), each at most once, printable, not hop-by-hop. */
export function readMirroredHeaders(rawHeaders: readonly string[]): MirroredHeaders {
  const method = single(rawHeaders, METHOD, 'Mcp-Method');
  if (!method.ok) return method;
  const name = single(rawHeaders, NAME, 'Mcp-Name');
  if (!name.ok) return name;
  if (name.value === undefined) return { ok: true, method: method.value, name: undefined };
  const decoded = decodeName(name.value);
  return decoded === undefined ? { ok: false, problem: 'Mcp-Name is not valid =?base64?...?= of UTF-8 text' } : { ok: true, method: method.value, name: decoded };
}

function single(rawHeaders: readonly string[], field: string, shown: string): { ok: true; value: string | undefined } | { ok: false; problem: string } {
  const { values, hopByHop } = occurrences(rawHeaders, field);
  if (hopByHop) return { ok: false, problem: `${shown} is named in a Connection header` };
  if (values.length > 1) return { ok: false, problem: `${shown} appears more than once` };
  const value = values[0];
  if (value !== undefined && !PRINTABLE.test(value)) return { ok: false, problem: `${shown} holds characters other than printable ASCII` };
  return { ok: true, value };
}

/** A plain name as written, or the UTF-8 text an encoded one carries; undefined when the encoding is broken. */
function decodeName(value: string): string | undefined {
  const encoded = ENCODED.exec(value);
  if (encoded === null) return value.startsWith('=?base64?') ? undefined : value;
  const base64 = encoded[1] as string;
  if (base64.length % 4 !== 0) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(base64, 'base64'));
  } catch {
    return undefined;
  }
}

/** A header value as shown in a detail. */
export function shownHeaderValue(value: string): string {
  const printable = value.replace(/[^\x20-\x7e]/g, '?');
  return printable.length <= MAX_SHOWN_VALUE_CHARS ? printable : `${printable.slice(0, MAX_SHOWN_VALUE_CHARS - 3)}...`;
}
