// HTTP/2 frames as bytes (RFC 9113 §4, §6): the 9-octet header, the frame types and flags the upstream client
// speaks, the SETTINGS it reads, and a reader that cuts a byte stream into frames without copying whole frames
// that arrived in one chunk. Pure codec: no sockets, no stream state.

export const FRAME_HEADER_BYTES = 9;
/** RFC 9113 §4.2: the smallest SETTINGS_MAX_FRAME_SIZE, which boundary keeps for frames it receives and sends. */
export const H2_FRAME_BYTES = 16_384;
/** RFC 9113 §5.1.1, §6.9.1: stream ids and flow-control windows are 31-bit. */
export const H2_MAX_31_BIT = 0x7fff_ffff;
/** RFC 9113 §6.5.2: the initial stream window when SETTINGS_INITIAL_WINDOW_SIZE was not sent. */
export const H2_DEFAULT_WINDOW = 65_535;

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

/** RFC 9113 §7 error codes (node:http2's NGHTTP2_* constants carry the same numbers). */
export const H2Error = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** One frame: `payload` is a view into the received bytes, valid until the handler returns. */
export type FrameHandler = (type: number, flags: number, streamId: number, payload: Buffer) => void;

/** Writes a frame's 9-octet header at `at` of `out`, for a payload of `length` octets. */
export function writeFrameHeader(out: Buffer, at: number, length: number, type: number, flags: number, streamId: number): void {
  out[at] = (length >>> 16) & 0xff;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(streamId, at + 5);
}

/** A frame with its header, payload copied after it: one allocation, one write. */
export function frame(type: number, flags: number, streamId: number, payload?: Buffer, from = 0, to = payload?.length ?? 0): Buffer {
  const length = to - from;
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + length);
  writeFrameHeader(out, 0, length, type, flags, streamId);
  if (payload !== undefined && length > 0) payload.copy(out, FRAME_HEADER_BYTES, from, to);
  return out;
}

/** A frame whose payload is one 32-bit value (RST_STREAM's code, WINDOW_UPDATE's increment). */
export function frame32(type: number, streamId: number, value: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  out[0] = 0;
  out[1] = 0;
  out[2] = 4;
  out[3] = type;
  out[4] = 0;
  out.writeUInt32BE(streamId, 5);
  out.writeUInt32BE(value >>> 0, FRAME_HEADER_BYTES);
  return out;
}

export function settingsFrame(entries: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.allocUnsafe(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, payload);
}

/** GOAWAY with the last stream id, the error code and optional debug data (RFC 9113 §6.8). */
export function goawayFrame(lastStreamId: number, code: number, debug?: Buffer): Buffer {
  const payload = Buffer.allocUnsafe(8 + (debug?.length ?? 0));
  payload.writeUInt32BE(lastStreamId, 0);
  payload.writeUInt32BE(code, 4);
  debug?.copy(payload, 8);
  return frame(FrameType.GOAWAY, 0, 0, payload);
}

/** What a peer's SETTINGS change for boundary's end; absent fields keep their value. */
export interface PeerSettings {
  maxStreams?: number;
  initialWindow?: number;
  /** SETTINGS_HEADER_TABLE_SIZE was sent: the peer's decoder wants a table size update (RFC 9113 §4.3.1). */
  headerTable?: boolean;
}

/**
 * Reads a peer's SETTINGS payload (RFC 9113 §6.5.2), or the connection error it is as [code, message]. A server may
 * not turn push on; a client may send 0 or 1 (boundary never pushes either way). MAX_FRAME_SIZE (checked for range)
 * and MAX_HEADER_LIST_SIZE change nothing: boundary's frames stay at the 16,384-octet minimum. HEADER_TABLE_SIZE
 * only asks for a table size update: boundary's encoder never indexes, so its table is always empty. A client's MAX_CONCURRENT_STREAMS limits pushes, which boundary never sends.
 */
export function readPeerSettings(payload: Buffer, peer: 'client' | 'server'): PeerSettings | [code: number, message: string] {
  if (payload.length % 6 !== 0) return [H2Error.FRAME_SIZE_ERROR, 'SETTINGS of the wrong size'];
  const out: PeerSettings = {};
  for (let at = 0; at < payload.length; at += 6) {
    const value = payload.readUInt32BE(at + 2);
    switch (payload.readUInt16BE(at)) {
      case Setting.HEADER_TABLE_SIZE:
        out.headerTable = true;
        break;
      case Setting.ENABLE_PUSH:
        if (value > 1 || (peer === 'server' && value !== 0)) return [H2Error.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${value} from a ${peer}`];
        break;
      case Setting.MAX_CONCURRENT_STREAMS:
        if (peer === 'server') out.maxStreams = value;
        break;
      case Setting.INITIAL_WINDOW_SIZE:
        if (value > H2_MAX_31_BIT) return [H2Error.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1'];
        out.initialWindow = value;
        break;
      case Setting.MAX_FRAME_SIZE:
        if (value < H2_FRAME_BYTES || value > 0xff_ffff) return [H2Error.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range'];
        break;
      default:
        break;
    }
  }
  return out;
}

/** A DATA or HEADERS payload without its padding and priority fields (RFC 9113 §6.1, §6.2), or the connection error it is. */
export function unpad(flags: number, payload: Buffer, priority: boolean): Buffer | [code: number, message: string] {
  let from = 0;
  let to = payload.length;
  if ((flags & Flag.PADDED) !== 0) {
    if (payload.length < 1) return [H2Error.FRAME_SIZE_ERROR, 'a padded frame without its pad length'];
    to -= payload[0]!;
    from = 1;
  }
  if (priority) from += 5;
  if (to < from) return [H2Error.PROTOCOL_ERROR, 'padding longer than the frame'];
  // Most frames carry neither: the payload itself, not a new view of all of it.
  return from === 0 && to === payload.length ? payload : payload.subarray(from, to);
}

/**
 * Cuts received bytes into frames. A frame longer than `maxPayload` is reported once through `onOversize` (a
 * FRAME_SIZE_ERROR for the connection) and nothing after it is read. Frames that arrive whole inside one chunk are
 * handed over as views; only a frame split across chunks is copied together.
 */
export class FrameReader {
  private pending: Buffer | undefined = undefined;
  private stopped = false;
  private readonly maxPayload: number;
  private readonly onFrame: FrameHandler;
  private readonly onOversize: (length: number) => void;

  constructor(maxPayload: number, onFrame: FrameHandler, onOversize: (length: number) => void) {
    this.maxPayload = maxPayload;
    this.onFrame = onFrame;
    this.onOversize = onOversize;
  }

  /** Stops reading: later bytes are dropped (the connection is closing). */
  stop(): void {
    this.stopped = true;
    this.pending = undefined;
  }

  push(chunk: Buffer): void {
    let data = chunk;
    if (this.pending !== undefined) {
      data = Buffer.concat([this.pending, chunk]);
      this.pending = undefined;
    }
    let at = 0;
    while (!this.stopped && data.length - at >= FRAME_HEADER_BYTES) {
      const length = (data[at]! << 16) | (data[at + 1]! << 8) | data[at + 2]!;
      if (length > this.maxPayload) {
        this.stopped = true;
        this.onOversize(length);
        return;
      }
      const end = at + FRAME_HEADER_BYTES + length;
      if (end > data.length) break;
      const streamId = data.readUInt32BE(at + 5) & H2_MAX_31_BIT;
      this.onFrame(data[at + 3]!, data[at + 4]!, streamId, data.subarray(at + FRAME_HEADER_BYTES, end));
      at = end;
    }
    if (!this.stopped && at < data.length) this.pending = Buffer.from(data.subarray(at));
  }
}
