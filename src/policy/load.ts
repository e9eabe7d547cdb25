// loadPolicyFile(path): read one policy file and parse it; the only policy code that touches the filesystem.
// Unreadable files (and anything but a regular file: a FIFO or device could block or never end) fail
// POLICY_UNREADABLE with the cause; parse problems carry the file as their source.

import { constants, type FileHandle, open } from 'node:fs/promises';
import { BoundaryError } from '../shared/errors.js';
import { bytesLimitIssue, MAX_POLICY_BYTES } from './limits.js';
import { parsePolicy } from './parse.js';
import type { Policy } from './types.js';

/** Parses one policy text; a reload passes policy/parse-off-thread.ts's, which keeps the event loop free. */
export type PolicyParser = (text: string, options: { source: string }) => Policy | Promise<Policy>;

function unreadable(path: string, reason: string, cause?: unknown): BoundaryError {
  return new BoundaryError('POLICY_UNREADABLE', `cannot read policy ${path}: ${reason}`, cause === undefined ? {} : { cause });
}

/** At most MAX_POLICY_BYTES + 1 bytes of a regular file (one byte over is enough to refuse it), and its size. */
async function readBounded(path: string): Promise<{ bytes: Buffer; size: number }> {
  let handle: FileHandle;
  try {
    // Non-blocking: opening a FIFO must not wait for a writer before fstat can refuse it.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw unreadable(path, err instanceof Error && 'code' in err ? String(err.code) : String(err), err);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw unreadable(path, 'not a regular file');
    const buffer = Buffer.alloc(Math.min(stat.size, MAX_POLICY_BYTES) + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      length += bytesRead;
      if (bytesRead === 0 || length === buffer.length) break;
    }
    return { bytes: buffer.subarray(0, length), size: Math.max(stat.size, length) };
  } catch (err) {
    if (err instanceof BoundaryError) throw err;
    throw unreadable(path, err instanceof Error && 'code' in err ? String(err.code) : String(err), err);
  } finally {
    await handle.close();
  }
}

/** `parse` defaults to parsePolicy; the boundary passes policy/texts.ts's, which also keeps the text. */
export async function loadPolicyFile(path: string, parse: PolicyParser = parsePolicy): Promise<Policy> {
  const { bytes, size } = await readBounded(path);
  // The same limit parsePolicy applies, refused before decoding: the text is never built.
  const tooLarge = bytesLimitIssue(size, path);
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
