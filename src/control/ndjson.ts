// NDJSON framing for control streams: split any byte stream into lines of at most
// MAX_CONTROL_MESSAGE_BYTES and decode each as a control message. Knows nothing of sockets or HTTP/2.

import { finished, Readable } from 'node:stream';
import { BoundaryError } from '../shared/errors.js';
import { decodeMessage, MAX_CONTROL_MESSAGE_BYTES, type MessageKind, type MessageOf } from './messages.js';

const NEWLINE = 0x0a;

interface DecodeOptions<K extends MessageKind> {
  readonly expect?: readonly K[];
  readonly maxBytes?: number;
}

/**
 * Yields each message of a newline-delimited stream. Blank lines are keep-alives and are skipped.
 * A line longer than the limit fails with MESSAGE_TOO_LARGE before it is buffered whole; bytes left
 * without a final newline when the stream ends fail with CONTROL_MESSAGE_INVALID (truncated).
 */
export async function* decodeMessages<K extends MessageKind = MessageKind>(
  source: AsyncIterable<Uint8Array | string>,
  options: DecodeOptions<K> = {},
): AsyncGenerator<MessageOf<K>, void, undefined> {
  const maxBytes = options.maxBytes ?? MAX_CONTROL_MESSAGE_BYTES;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of source) {
    let bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let newline = bytes.indexOf(NEWLINE);
    while (newline !== -1) {
      const line = Buffer.concat([...pending, bytes.subarray(0, newline)]);
      pending = [];
      pendingBytes = 0;
      bytes = bytes.subarray(newline + 1);
      newline = bytes.indexOf(NEWLINE);
      if (line.byteLength > maxBytes) throw tooLarge(line.byteLength, maxBytes);
      if (isBlank(line)) continue;
      yield decodeMessage(line, options.expect);
    }
    if (bytes.byteLength > 0) {
      pendingBytes += bytes.byteLength;
      if (pendingBytes > maxBytes) throw tooLarge(pendingBytes, maxBytes);
      pending.push(bytes);
    }
  }
  if (pendingBytes > 0 && !isBlank(Buffer.concat(pending))) {
    throw new BoundaryError('CONTROL_MESSAGE_INVALID', `stream ended inside a message (${pendingBytes} bytes without a newline)`);
  }
}

/** Reads a whole body (one message) with a size limit, then decodes it. */
export async function readMessageBody<K extends MessageKind = MessageKind>(
  source: AsyncIterable<Uint8Array | string>,
  options: DecodeOptions<K> = {},
): Promise<MessageOf<K>> {
  const body = await readBody(source, options.maxBytes ?? MAX_CONTROL_MESSAGE_BYTES);
  return decodeMessage(body, options.expect);
}

/** Collects a body up to `maxBytes`; MESSAGE_TOO_LARGE as soon as it goes past. */
export function readBody(source: AsyncIterable<Uint8Array | string>, maxBytes: number): Promise<Buffer> {
  return source instanceof Readable ? readStreamBody(source, maxBytes) : readIterableBody(source, maxBytes);
}

async function readIterableBody(source: AsyncIterable<Uint8Array | string>, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of source) {
    const bytes = toBuffer(chunk);
    total += bytes.byteLength;
    if (total > maxBytes) throw tooLarge(total, maxBytes);
    chunks.push(bytes);
  }
  return Buffer.concat(chunks);
}

// A node stream (every HTTP/2 body) is read through its events: its async iterator costs a generator and
// promises per chunk, and each attach reads four bodies across both ends. Same outcomes as the iterator: the
// body at 'end', the stream's own error (or premature close) from finished(), and a stream cut off past the
// limit is destroyed with an AbortError, as the iterator's early return does.
function readStreamBody(stream: Readable, maxBytes: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const onData = (chunk: Uint8Array | string): void => {
      const bytes = toBuffer(chunk);
      total += bytes.byteLength;
      if (total > maxBytes) {
        settled = true;
        stream.off('data', onData);
        reject(tooLarge(total, maxBytes));
        // finished() still listens, so the AbortError this destroy emits is taken, not thrown.
        if (!stream.destroyed) stream.destroy(abortError());
        return;
      }
      chunks.push(bytes);
    };
    const cleanup = finished(stream, { writable: false }, (err) => {
      stream.off('data', onData);
      cleanup();
      if (settled) return;
      settled = true;
      if (err) reject(err);
      else resolve(Buffer.concat(chunks));
    });
    stream.on('data', onData);
  });
}

function toBuffer(chunk: Uint8Array | string): Buffer {
  return typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** What node's stream iterator destroys a stream with when its reader stops early. */
function abortError(): Error {
  return Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });
}

function isBlank(line: Buffer): boolean {
  for (const byte of line) if (byte !== 0x20 && byte !== 0x0d && byte !== 0x09) return false;
  return true;
}

function tooLarge(bytes: number, maxBytes: number): BoundaryError {
  return new BoundaryError('MESSAGE_TOO_LARGE', `control message of at least ${bytes} bytes exceeds ${maxBytes}`);
}
