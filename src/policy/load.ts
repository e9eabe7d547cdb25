// loadPolicyFile(path): read one policy file and parse it; the only policy code that touches the filesystem.
// Unreadable files fail POLICY_UNREADABLE with the cause; parse problems carry the file as their source.

import { readFile } from 'node:fs/promises';
import { BoundaryError } from '../shared/errors.js';
import { bytesLimitIssue } from './limits.js';
import { parsePolicy } from './parse.js';
import type { Policy } from './types.js';

/** Parses one policy text; a reload passes policy/parse-off-thread.ts's, which keeps the event loop free. */
export type PolicyParser = (text: string, options: { source: string }) => Policy | Promise<Policy>;

/** `parse` defaults to parsePolicy; the boundary passes policy/texts.ts's, which also keeps the text. */
export async function loadPolicyFile(path: string, parse: PolicyParser = parsePolicy): Promise<Policy> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    const reason = err instanceof Error && 'code' in err ? String(err.code) : String(err);
    throw new BoundaryError('POLICY_UNREADABLE', `cannot read policy ${path}: ${reason}`, { cause: err });
  }
  // The same limit parsePolicy applies, refused before decoding: the text is never built.
  const tooLarge = bytesLimitIssue(bytes.length, path);
  if (tooLarge !== undefined) {
    throw new BoundaryError('POLICY_INVALID', `policy ${path} is invalid (1 problem):\n  ${tooLarge.message} (${tooLarge.code})`, { issues: [tooLarge] });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (err) {
    throw new BoundaryError('POLICY_UNREADABLE', `policy ${path} is not UTF-8 text`, { cause: err });
  }
  return await parse(text, { source: path });
}
