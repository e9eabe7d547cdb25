// Classifies the first bytes a client sends inside a CONNECT tunnel: TLS ClientHello, HTTP/1 request,
// HTTP/2 preface or unknown. Reads at most SNIFF_MAX_BYTES, then puts every byte back on the socket.

import type { Socket } from 'node:net';

/** docs/destinations.md#limits: 24 bytes are enough to tell TLS, HTTP/1 and the h2 preface apart. */
const SNIFF_MAX_BYTES = 24;
/** An inspected route carries only client-first protocols; a client silent this long is closed. */
const SNIFF_TIMEOUT_MS = 10_000;

const SNIFF_KINDS = ['tls', 'http', 'h2', 'unknown', 'timeout', 'closed'] as const;
type SniffKind = (typeof SNIFF_KINDS)[number];

const METHODS = ['GET ', 'POST ', 'PUT ', 'DELETE ', 'HEAD ', 'OPTIONS ', 'PATCH ', 'TRACE '] as const;
const H2_PREFACE = 'PRI * HTTP/2.0';

/** `undefined` means: a prefix of something known, read more. Pure. */
function classifyPrefix(bytes: Buffer): SniffKind | undefined {
  if (bytes.length === 0) return undefined;
  // TLS record: handshake (22), legacy version major 3.
  if (bytes[0] === 0x16) {
    if (bytes.length < 2) return undefined;
    return bytes[1] === 0x03 ? 'tls' : 'unknown';
  }
  const text = bytes.toString('latin1', 0, Math.min(bytes.length, SNIFF_MAX_BYTES));
  let prefix = false;
  for (const candidate of [H2_PREFACE, ...METHODS]) {
    if (text.startsWith(candidate)) return candidate === H2_PREFACE ? 'h2' : 'http';
    if (candidate.startsWith(text)) prefix = true;
  }
  if (prefix && bytes.length < SNIFF_MAX_BYTES) return undefined;
  return 'unknown';
}

/** Waits for enough bytes to classify; the bytes are unshifted back and the socket left paused. */
export function sniff(socket: Socket, head: Buffer, timeoutMs = SNIFF_TIMEOUT_MS): Promise<SniffKind> {
  return new Promise((resolve) => {
    let buffered = head;
    let done = false;
    const finish = (kind: SniffKind): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      socket.removeListener('close', onEnd);
      socket.pause();
      if (buffered.length > 0) socket.unshift(buffered);
      resolve(kind);
    };
    const onData = (chunk: Buffer): void => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const kind = classifyPrefix(buffered);
      if (kind !== undefined) finish(kind);
    };
    const onEnd = (): void => finish('closed');
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    const initial = classifyPrefix(buffered);
    if (initial !== undefined) {
      finish(initial);
      return;
    }
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    socket.resume();
  });
}
