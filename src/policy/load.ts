// loadPolicyFile(path): read one policy file and parse it; the only policy code that touches the filesystem.
// Unreadable files fail POLICY_UNREADABLE with the cause; parse problems carry the file as their source.

import { readFile } from 'node:fs/promises';
import { BoundaryError } from '../errors.js';
import { parsePolicy } from './parse.js';
import type { Policy } from './types.js';

/** Largest policy file we read; a policy is hand-written configuration, not data. */
export const MAX_POLICY_FILE_BYTES = 8 * 1024 * 1024;

/** `parse` defaults to parsePolicy; the boundary passes policy/texts.ts's, which also keeps the text. */
export async function loadPolicyFile(path: string, parse: (text: string, options: { source: string }) => Policy = parsePolicy): Promise<Policy> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    const reason = err instanceof Error && 'code' in err ? String(err.code) : String(err);
    throw new BoundaryError('POLICY_UNREADABLE', `cannot read policy ${path}: ${reason}`, { cause: err });
  }
  if (bytes.length > MAX_POLICY_FILE_BYTES) {
    throw new BoundaryError('POLICY_UNREADABLE', `policy ${path} is ${bytes.length} bytes; the limit is ${MAX_POLICY_FILE_BYTES}`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (err) {
    throw new BoundaryError('POLICY_UNREADABLE', `policy ${path} is not UTF-8 text`, { cause: err });
  }
  return parse(text, { source: path });
}
