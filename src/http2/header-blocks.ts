// Header blocks from a peer (RFC 9113 §4.3, §6.2, §6.10), an origin or a workload: a HEADERS fragment and its
// CONTINUATION frames joined, bounded in frames and octets, then HPACK-decoded with the connection's one decoder.
// Every block is decoded, even for a stream already gone, so the dynamic table stays in step with the peer's encoder.

import { H2Error } from './frames.js';
import { HpackDecoder } from './hpack.js';

/** Response header list (and trailers) from an origin beyond this resets the stream; advertised in SETTINGS. */
export const H2_UPSTREAM_MAX_HEADER_LIST_BYTES = 65_536;
/** Compressed header block (HEADERS plus CONTINUATION) beyond this closes the connection: HPACK cannot skip it. */
export const H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES = 2 * H2_UPSTREAM_MAX_HEADER_LIST_BYTES;
/** CONTINUATION frames after one HEADERS frame (the CONTINUATION flood, CVE-2024-27316 and kin). */
export const H2_UPSTREAM_MAX_CONTINUATION_FRAMES = 16;

/** One end's bounds on the header blocks it receives. */
export interface HeaderBlockLimits {
  /** The decoded list (RFC 9113 §6.5.2's count: octets of names and values, 32 more per field). */
  readonly listBytes: number;
  /** The compressed block: past it the connection closes, since HPACK cannot skip a block. */
  readonly blockBytes: number;
  readonly continuations: number;
}

export const UPSTREAM_HEADER_LIMITS: HeaderBlockLimits = {
  listBytes: H2_UPSTREAM_MAX_HEADER_LIST_BYTES,
  blockBytes: H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES,
  continuations: H2_UPSTREAM_MAX_CONTINUATION_FRAMES,
};

export interface HeaderBlockSink {
  /** A whole block: the decoded list, or undefined when it was past the list limit. */
  block(id: number, endStream: boolean, list: string[] | undefined): undefined;
  /** A connection error (RFC 9113 §5.4.1). */
  error(code: number, message: string): undefined;
}

export class HeaderBlocks {
  private readonly decoder = new HpackDecoder();
  private readonly sink: HeaderBlockSink;
  private readonly limits: HeaderBlockLimits;
  /** The open block: its stream, fragments, octets and CONTINUATION count. */
  private id = 0;
  private endStream = false;
  private parts: Buffer[] = [];
  private bytes = 0;
  private frames = 0;

  constructor(sink: HeaderBlockSink, limits: HeaderBlockLimits) {
    this.sink = sink;
    this.limits = limits;
  }

  /** A block is open: only its CONTINUATION frames may come next. */
  get open(): boolean {
    return this.id !== 0;
  }

  headers(id: number, endStream: boolean, endHeaders: boolean, fragment: Buffer): undefined {
    if (endHeaders) {
      this.decode(id, endStream, fragment);
      return;
    }
    this.id = id;
    this.endStream = endStream;
    // Frames are views into received chunks, which are never reused: no copy is needed to keep one.
    this.parts = [fragment];
    this.bytes = fragment.length;
    this.frames = 0;
  }

  continuation(id: number, endHeaders: boolean, payload: Buffer): undefined {
    if (this.id === 0 || this.id !== id) return this.sink.error(H2Error.PROTOCOL_ERROR, 'CONTINUATION without its HEADERS');
    this.frames++;
    this.bytes += payload.length;
    if (this.frames > this.limits.continuations || this.bytes > this.limits.blockBytes) {
      return this.sink.error(H2Error.ENHANCE_YOUR_CALM, 'a header block past its CONTINUATION or size limit');
    }
    this.parts.push(payload);
    if (!endHeaders) return;
    const block = Buffer.concat(this.parts);
    this.id = 0;
    this.parts = [];
    this.decode(id, this.endStream, block);
  }

  private decode(id: number, endStream: boolean, block: Buffer): undefined {
    let list: string[] | undefined;
    try {
      list = this.decoder.decode(block, this.limits.listBytes);
    } catch {
      return this.sink.error(H2Error.COMPRESSION_ERROR, 'a header block HPACK cannot decode');
    }
    this.sink.block(id, endStream, list);
  }
}
