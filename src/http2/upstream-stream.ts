// One request's stream on an upstream HTTP/2 connection: the record h2-session.ts keeps per stream (state, windows,
// queued body, what the response has said so far), the events it reports to its call (h2-call.ts), and the error a
// reset stream fails with. Plain data and forwarding methods; the rules live in h2-session.ts.

import { BoundaryError } from '../shared/errors.js';
import { H2_DEFAULT_WINDOW, H2Error } from './frames.js';
import { readResponseFields, type ResponseFields } from './response-head.js';
import { H2_UPSTREAM_MAX_HEADER_LIST_BYTES } from './header-blocks.js';

/** What a stream reports to its call. Every method is called at most in the order listed. */
export interface StreamEvents {
  head(fields: ResponseFields, endStream: boolean): void;
  data(chunk: Buffer): void;
  trailers(headers: string[]): void;
  end(): void;
  /** The stream failed: reset by the origin, malformed, or the connection went; nothing follows. */
  failed(err: Error): void;
  /** A body write that returned false may go on (or the stream is gone: the writer finds state 'gone'). */
  writable(): void;
}

/** The connection a stream lives on, as the stream calls it (h2-session.ts's H2Session). */
export interface StreamOwner {
  readonly peerInitialWindow: number;
  writeBody(stream: UpstreamStream, chunk: Buffer): boolean;
  endBody(stream: UpstreamStream, trailers: string[] | null): void;
  consumed(stream: UpstreamStream, n: number): void;
  reset(stream: UpstreamStream, code: number): void;
  hold(stream: UpstreamStream, held: boolean): void;
}

/** A decoded header block that is no response head or trailers: an informational head, or the stream error it is. */
export type BlockProblem = { readonly kind: 'informational' } | { readonly kind: 'error'; readonly code: number; readonly message: string };

const INFORMATIONAL: BlockProblem = { kind: 'informational' };

function streamError(code: number, message: string): BlockProblem {
  return { kind: 'error', code, message };
}

/** The origin reset the stream (or the session ended under it) before the response ended. */
export class UpstreamResetError extends BoundaryError {
  readonly rstCode: number;
  constructor(rstCode: number, message: string, options?: ErrorOptions) {
    super('UPSTREAM_CLOSED', message, options);
    this.rstCode = rstCode;
  }
}

export class UpstreamStream {
  id = 0;
  /** waiting: for a slot under the origin's limit; open: HEADERS sent; gone: reset, failed or both sides ended. */
  state: 'waiting' | 'open' | 'gone' = 'waiting';
  sendWindow: number;
  recvWindow = H2_DEFAULT_WINDOW;
  /** Received octets handed on (or padding) and not yet given back to the origin as stream window. */
  unacked = 0;
  localEnded = false;
  remoteEnded = false;
  gotHead = false;
  /** The response's Content-Length, -1 when absent or when it describes no body (HEAD, 204, 304). */
  contentLength = -1;
  received = 0;
  /** Request body octets waiting for window, and their total. */
  readonly queue: Buffer[] = [];
  queued = 0;
  /** END_STREAM waits behind the queue: trailers (a list) or an empty DATA (null). */
  ending: string[] | null | undefined = undefined;
  /** A write returned false: events.writable() is owed. */
  blocked = false;
  /** Its consumer paused it (a client that does not read): counted by the session while the stream is open. */
  held = false;

  readonly owner: StreamOwner;
  readonly fields: readonly string[];
  readonly endStream: boolean;
  /** HEAD: a Content-Length in the answer describes no body. */
  readonly headRequest: boolean;
  readonly events: StreamEvents;

  constructor(owner: StreamOwner, fields: readonly string[], endStream: boolean, headRequest: boolean, events: StreamEvents) {
    this.owner = owner;
    this.fields = fields;
    this.endStream = endStream;
    this.headRequest = headRequest;
    this.events = events;
    this.sendWindow = owner.peerInitialWindow;
  }

  /**
   * Reads a decoded header block (undefined: past H2_UPSTREAM_MAX_HEADER_LIST_BYTES) as the response head, trailers
   * (status 0), an informational head (dropped: 1xx other than 101, RFC 9113 §8.1) or the stream error it is, per what
   * the stream saw before. The list becomes the fields' headers.
   */
  readBlock(list: string[] | undefined, endStream: boolean): ResponseFields | BlockProblem {
    if (this.remoteEnded) return streamError(H2Error.STREAM_CLOSED, 'HEADERS after END_STREAM');
    if (list === undefined) return streamError(H2Error.PROTOCOL_ERROR, `a header list past ${H2_UPSTREAM_MAX_HEADER_LIST_BYTES} bytes`);
    const trailers = this.gotHead;
    if (trailers && !endStream) return streamError(H2Error.PROTOCOL_ERROR, 'trailers without END_STREAM');
    const fields = readResponseFields(list, trailers);
    if (typeof fields === 'string') return streamError(H2Error.PROTOCOL_ERROR, `a malformed response (${fields})`);
    if (trailers) {
      if (this.lengthMismatch(this.received, true)) return streamError(H2Error.PROTOCOL_ERROR, 'a body that disagrees with its content-length');
      return fields;
    }
    if (fields.status < 200) {
      if (fields.status === 101 || endStream) return streamError(H2Error.PROTOCOL_ERROR, 'a malformed informational response');
      return INFORMATIONAL;
    }
    this.gotHead = true;
    this.contentLength = fields.status === 204 || fields.status === 304 ? -1 : fields.contentLength;
    if (endStream && this.lengthMismatch(0, true)) return streamError(H2Error.PROTOCOL_ERROR, 'a body that disagrees with its content-length');
    return fields;
  }

  /**
   * Counts a DATA frame of `length` octets (`dataLength` without padding) against the stream, or says why it is a
   * stream error (then nothing is counted).
   */
  readData(length: number, dataLength: number, end: boolean): [code: number, message: string] | undefined {
    if (this.remoteEnded) return [H2Error.STREAM_CLOSED, 'DATA after END_STREAM'];
    if (!this.gotHead) return [H2Error.PROTOCOL_ERROR, 'DATA before the response head'];
    if (this.recvWindow < length) return [H2Error.FLOW_CONTROL_ERROR, 'DATA past the stream window'];
    const received = this.received + dataLength;
    if (this.lengthMismatch(received, end)) return [H2Error.PROTOCOL_ERROR, 'a body that disagrees with its content-length'];
    this.recvWindow -= length;
    this.received = received;
    return undefined;
  }

  /** The body so far (`end`: the whole body) disagrees with the response's Content-Length. */
  private lengthMismatch(received: number, end: boolean): boolean {
    return this.contentLength >= 0 && !this.headRequest && (received > this.contentLength || (end && received !== this.contentLength));
  }

  /** Queues body octets; false asks the writer to wait for events.writable(). */
  write(chunk: Buffer): boolean {
    return this.owner.writeBody(this, chunk);
  }

  /** Ends the request body, with trailers when given. */
  end(trailers?: readonly string[]): void {
    this.owner.endBody(this, trailers === undefined ? null : [...trailers]);
  }

  /** `n` received octets were handed on: the origin may send that much more. */
  consumed(n: number): void {
    this.owner.consumed(this, n);
  }

  /** The consumer paused (true) or resumed (false) reading what the stream receives. */
  hold(held: boolean): void {
    this.owner.hold(this, held);
  }

  /** The proxy no longer wants the stream (RST_STREAM CANCEL). */
  cancel(): void {
    this.owner.reset(this, H2Error.CANCEL);
  }
}
