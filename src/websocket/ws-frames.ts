// RFC 6455 framing for the inspected WebSocket relay: an incremental parser of client (masked) frames that
// reassembles text messages, and the frame/close encoders. Server frames are followed by frame-boundary.ts,
// message deadlines by assembly-timer.ts. Pure of sockets, timers and policy.

import { createByteQueue } from './byte-queue.js';

/** docs/destinations.md#websocket-relay: one frame's payload may not exceed this (client frames; 1009 beyond). */
export const MAX_FRAME_PAYLOAD_BYTES = 16 * 1024 * 1024;
/** docs/destinations.md#websocket-relay: data frames (first + continuations) in one message. */
export const MAX_MESSAGE_FRAGMENTS = 4_096;
/** A text message is buffered whole to be decided and rewritten: bounded like one frame. */
const MAX_TEXT_MESSAGE_BYTES = 16 * 1024 * 1024;
/** RFC 6455 §5.5: control frames carry at most this much and are never fragmented. */
const MAX_CONTROL_PAYLOAD_BYTES = 125;
/** Close reasons we write are cut to this (the close payload holds the 2-byte code too). */
export const MAX_CLOSE_REASON_BYTES = 123;

export const OPCODES = { continuation: 0x0, text: 0x1, binary: 0x2, close: 0x8, ping: 0x9, pong: 0xa } as const;

/** Close codes boundary sends (RFC 6455 §7.4.1; docs/destinations.md#denial-responses for 1008 and 1012). */
export const CLOSE_CODES = {
  goingAway: 1001,
  protocolError: 1002,
  invalidPayload: 1007,
  policyViolation: 1008,
  messageTooBig: 1009,
  internalError: 1011,
  serviceRestart: 1012,
} as const;
export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];

interface Frame {
  readonly fin: boolean;
  readonly opcode: number;
  /** Unmasked payload. */
  readonly payload: Buffer;
  /** The frame exactly as received (header, mask key and masked payload). */
  readonly raw: Buffer;
}

export type ClientEvent =
  /** ping, pong or close: pass on as received. */
  | { readonly kind: 'control'; readonly frame: Frame }
  /** One frame of a binary message (first or continuation); never buffered beyond the frame. */
  | { readonly kind: 'binary'; readonly frame: Frame }
  /** A non-final frame of a text message: held until the message is complete. */
  | { readonly kind: 'text-fragment'; readonly frame: Frame }
  /** A complete text message (valid UTF-8) and the raw frames that carried it, in order. */
  | { readonly kind: 'text'; readonly text: string; readonly frames: readonly Buffer[] };

interface FrameError {
  readonly code: CloseCode;
  readonly message: string;
}

interface ClientParseResult {
  readonly events: ClientEvent[];
  /** Set once the stream is malformed or over a limit; the parser then accepts nothing more. */
  readonly error?: FrameError;
}

interface ClientFrameParser {
  push(chunk: Buffer): ClientParseResult;
  /** True while a fragmented message has started and not finished. */
  inMessage(): boolean;
}

function isControl(opcode: number): boolean {
  return (opcode & 0x8) !== 0;
}

function validCloseCode(code: number): boolean {
  if (code >= 3000 && code <= 4999) return true;
  return code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006;
}

function unmask(payload: Buffer, key: Buffer): Buffer {
  const out = Buffer.allocUnsafe(payload.length);
  for (let i = 0; i < payload.length; i++) out[i] = (payload[i] as number) ^ (key[i & 3] as number);
  return out;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decodeUtf8(bytes: Buffer): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

interface Header {
  readonly fin: boolean;
  readonly opcode: number;
  readonly headerBytes: number;
  readonly length: number;
}

/** Parses a client frame header from `buf`; undefined when more bytes are needed. */
function readClientHeader(buf: Buffer): Header | FrameError | undefined {
  if (buf.length < 2) return undefined;
  const b0 = buf[0] as number;
  const b1 = buf[1] as number;
  const fin = (b0 & 0x80) !== 0;
  const opcode = b0 & 0x0f;
  // No extension is ever negotiated on an inspected relay (the offer is stripped), so RSV bits are errors.
  if ((b0 & 0x70) !== 0) return { code: CLOSE_CODES.protocolError, message: 'reserved bits set without an extension' };
  if (opcode > 0x2 && opcode < 0x8) return { code: CLOSE_CODES.protocolError, message: `reserved opcode ${opcode}` };
  if (opcode > 0xa) return { code: CLOSE_CODES.protocolError, message: `reserved opcode ${opcode}` };
  if ((b1 & 0x80) === 0) return { code: CLOSE_CODES.protocolError, message: 'client frame is not masked' };
  const len7 = b1 & 0x7f;
  const extra = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
  const headerBytes = 2 + extra + 4;
  if (buf.length < 2 + extra) return undefined;
  let length = len7;
  if (len7 === 126) {
    length = buf.readUInt16BE(2);
    if (length < 126) return { code: CLOSE_CODES.protocolError, message: 'length not minimally encoded' };
  } else if (len7 === 127) {
    const big = buf.readBigUInt64BE(2);
    if (big >> 63n !== 0n) return { code: CLOSE_CODES.protocolError, message: '64-bit length has its top bit set' };
    if (big < 65_536n) return { code: CLOSE_CODES.protocolError, message: 'length not minimally encoded' };
    if (big > BigInt(MAX_FRAME_PAYLOAD_BYTES)) return { code: CLOSE_CODES.messageTooBig, message: `frame over ${MAX_FRAME_PAYLOAD_BYTES} bytes` };
    length = Number(big);
  }
  if (isControl(opcode)) {
    if (!fin) return { code: CLOSE_CODES.protocolError, message: 'fragmented control frame' };
    if (length > MAX_CONTROL_PAYLOAD_BYTES) return { code: CLOSE_CODES.protocolError, message: 'control frame payload over 125 bytes' };
  }
  if (length > MAX_FRAME_PAYLOAD_BYTES) return { code: CLOSE_CODES.messageTooBig, message: `frame over ${MAX_FRAME_PAYLOAD_BYTES} bytes` };
  return { fin, opcode, headerBytes, length };
}

/**
 * Parses client→server frames: masked, FIN/continuation, control frames between fragments, 16/64-bit
 * lengths, the limits above. Text messages are reassembled and UTF-8 checked; binary frames are yielded one
 * by one. Every input byte ends up in exactly one event's raw frame, or the parser reports an error.
 */
export function createClientFrameParser(): ClientFrameParser {
  const queue = createByteQueue();
  let failed: FrameError | undefined;
  // The message in progress: its data opcode, fragments so far, and (text) its payload pieces and raw frames.
  let messageOpcode: number | undefined;
  let fragments = 0;
  let textBytes = 0;
  let textParts: Buffer[] = [];
  let textRaw: Buffer[] = [];

  function fail(error: FrameError, events: ClientEvent[]): ClientParseResult {
    failed = error;
    return { events, error };
  }

  function onData(header: Header, frame: Frame, events: ClientEvent[]): FrameError | undefined {
    if (header.opcode === OPCODES.continuation) {
      if (messageOpcode === undefined) return { code: CLOSE_CODES.protocolError, message: 'continuation frame outside a message' };
    } else {
      if (messageOpcode !== undefined) return { code: CLOSE_CODES.protocolError, message: 'new data frame inside a fragmented message' };
      messageOpcode = header.opcode;
      fragments = 0;
    }
    fragments++;
    if (fragments > MAX_MESSAGE_FRAGMENTS) return { code: CLOSE_CODES.messageTooBig, message: `message over ${MAX_MESSAGE_FRAGMENTS} fragments` };
    const opcode = messageOpcode;
    if (header.fin) messageOpcode = undefined;
    if (opcode === OPCODES.binary) {
      events.push({ kind: 'binary', frame });
      return undefined;
    }
    textParts.push(frame.payload);
    textRaw.push(frame.raw);
    if (!header.fin) {
      events.push({ kind: 'text-fragment', frame });
      return undefined;
    }
    const bytes = Buffer.concat(textParts, textBytes);
    const frames = textRaw;
    textParts = [];
    textRaw = [];
    textBytes = 0;
    const text = decodeUtf8(bytes);
    if (text === undefined) return { code: CLOSE_CODES.invalidPayload, message: 'text message is not valid UTF-8' };
    events.push({ kind: 'text', text, frames });
    return undefined;
  }

  function checkClose(payload: Buffer): FrameError | undefined {
    if (payload.length === 0) return undefined;
    if (payload.length === 1) return { code: CLOSE_CODES.protocolError, message: 'close payload of one byte' };
    if (!validCloseCode(payload.readUInt16BE(0))) return { code: CLOSE_CODES.protocolError, message: 'invalid close code' };
    if (decodeUtf8(payload.subarray(2)) === undefined) return { code: CLOSE_CODES.invalidPayload, message: 'close reason is not valid UTF-8' };
    return undefined;
  }

  return {
    inMessage: () => messageOpcode !== undefined,
    push(chunk) {
      const events: ClientEvent[] = [];
      if (failed !== undefined) return { events, error: failed };
      queue.push(chunk);
      // Each pass consumes one whole frame; the loop ends when the queue holds less than one.
      for (;;) {
        const header = readClientHeader(queue.peek(14));
        if (header === undefined) return { events };
        if ('code' in header) return fail(header, events);
        // A text message is buffered whole: refuse it at the header that would take it over the limit.
        if (header.opcode === OPCODES.text || (header.opcode === OPCODES.continuation && messageOpcode === OPCODES.text)) {
          if (textBytes + header.length > MAX_TEXT_MESSAGE_BYTES) {
            return fail({ code: CLOSE_CODES.messageTooBig, message: `text message over ${MAX_TEXT_MESSAGE_BYTES} bytes` }, events);
          }
        }
        const total = header.headerBytes + header.length;
        if (queue.size() < total) return { events };
        const raw = queue.take(total);
        const key = raw.subarray(header.headerBytes - 4, header.headerBytes);
        const payload = unmask(raw.subarray(header.headerBytes), key);
        const frame: Frame = { fin: header.fin, opcode: header.opcode, payload, raw };
        if (isControl(header.opcode)) {
          const bad = header.opcode === OPCODES.close ? checkClose(payload) : undefined;
          if (bad !== undefined) return fail(bad, events);
          events.push({ kind: 'control', frame });
          continue;
        }
        if (header.opcode === OPCODES.text || (header.opcode === OPCODES.continuation && messageOpcode === OPCODES.text)) {
          textBytes += header.length;
        }
        const bad = onData(header, frame, events);
        if (bad !== undefined) return fail(bad, events);
      }
    },
  };
}

/** Encodes one frame; with `maskKey` (4 bytes) it is masked, as a client must. */
export function encodeFrame(frame: { readonly fin?: boolean; readonly opcode: number; readonly payload: Buffer; readonly maskKey?: Buffer }): Buffer {
  const { payload, maskKey } = frame;
  const length = payload.length;
  const extra = length < 126 ? 0 : length < 65_536 ? 2 : 8;
  const maskBytes = maskKey === undefined ? 0 : 4;
  const out = Buffer.allocUnsafe(2 + extra + maskBytes + length);
  out[0] = (frame.fin === false ? 0 : 0x80) | (frame.opcode & 0x0f);
  const maskBit = maskKey === undefined ? 0 : 0x80;
  if (extra === 0) out[1] = maskBit | length;
  else if (extra === 2) {
    out[1] = maskBit | 126;
    out.writeUInt16BE(length, 2);
  } else {
    out[1] = maskBit | 127;
    out.writeBigUInt64BE(BigInt(length), 2);
  }
  const start = 2 + extra + maskBytes;
  if (maskKey === undefined) payload.copy(out, start);
  else {
    maskKey.copy(out, 2 + extra, 0, 4);
    for (let i = 0; i < length; i++) out[start + i] = (payload[i] as number) ^ (maskKey[i & 3] as number);
  }
  return out;
}

/** A close frame with `code` and a reason cut to MAX_CLOSE_REASON_BYTES (never mid-character). */
export function encodeClose(code: number, reason = '', maskKey?: Buffer): Buffer {
  let text = Buffer.from(reason, 'utf8');
  if (text.length > MAX_CLOSE_REASON_BYTES) {
    let end = MAX_CLOSE_REASON_BYTES;
    while (end > 0 && ((text[end] as number) & 0xc0) === 0x80) end--;
    text = text.subarray(0, end);
  }
  const payload = Buffer.allocUnsafe(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  return encodeFrame({ opcode: OPCODES.close, payload, ...(maskKey === undefined ? {} : { maskKey }) });
}

/** Reads the code and reason of a close frame's (unmasked) payload. */
export function decodeClose(payload: Buffer): { readonly code: number | undefined; readonly reason: string } {
  if (payload.length < 2) return { code: undefined, reason: '' };
  return { code: payload.readUInt16BE(0), reason: payload.toString('utf8', 2) };
}
