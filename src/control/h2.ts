// HTTP/2 client helpers for the control channel: one bounded request/response with a deadline, and
// the status of a long-lived response. Know nothing of the protocol's messages beyond byte limits.

import { type ClientHttp2Session, type ClientHttp2Stream, constants } from 'node:http2';
import { BoundaryError } from '../shared/errors.js';
import { ControlFailure } from './dial.js';
import { describeError } from './protocol.js';
import { MAX_CONTROL_MESSAGE_BYTES } from './messages.js';
import { readBody } from './ndjson.js';

/** An HTTP/2 framing or session error (itself or as the cause of a ControlFailure). */
export function isHttp2ProtocolError(err: unknown): boolean {
  const inner = err instanceof ControlFailure ? err.cause : err;
  const code = String((inner as NodeJS.ErrnoException | undefined)?.code ?? '');
  return code.startsWith('ERR_HTTP2_') && code !== 'ERR_HTTP2_STREAM_CANCEL' && code !== 'ERR_HTTP2_GOAWAY_SESSION';
}

/** Sends one request and collects the whole response body (bounded) with a deadline. */
export function request(
  session: ClientHttp2Session,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs: number,
): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    let stream: ClientHttp2Stream;
    try {
      stream = session.request({ 'content-type': 'application/x-ndjson', ...headers }, { endStream: body === undefined });
    } catch (err) {
      reject(new ControlFailure('http2', `${headers[':path']}: ${describeError(err)}`, { cause: err }));
      return;
    }
    stream.setTimeout(timeoutMs, () => {
      stream.close(constants.NGHTTP2_CANCEL);
      reject(new ControlFailure('http2', `${headers[':path']}: no answer within ${timeoutMs} ms`));
    });
    let status = 0;
    stream.once('response', (h) => {
      status = Number(h[':status']);
    });
    readBody(stream, MAX_CONTROL_MESSAGE_BYTES).then(
      (buf) => {
        if (status === 0) reject(new ControlFailure('http2', `${headers[':path']}: the stream closed before any response`));
        else resolve({ status, body: buf });
      },
      (err) => reject(err instanceof BoundaryError ? err : new ControlFailure('http2', `${headers[':path']}: ${describeError(err)}`, { cause: err })),
    );
    if (body !== undefined) stream.end(body);
  });
}

export function responseStatus(stream: ClientHttp2Stream, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new ControlFailure('http2', `watch: no answer within ${timeoutMs} ms`)), timeoutMs);
    stream.once('response', (h) => {
      clearTimeout(timer);
      resolve(Number(h[':status']));
    });
    stream.once('error', (err) => {
      clearTimeout(timer);
      reject(new ControlFailure('http2', `watch: ${describeError(err)}`, { cause: err }));
    });
    stream.once('close', () => {
      clearTimeout(timer);
      reject(new ControlFailure('http2', 'watch stream closed before it was answered'));
    });
  });
}
