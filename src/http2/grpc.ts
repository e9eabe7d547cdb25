// gRPC as the proxy meets it on HTTP/2 streams: what marks a call, a refusal in gRPC's own trailers-only form
// (grpc-status from the HTTP status, as gRPC maps them; grpc-message percent-encoded), and the length-prefixed
// message framing gRPC and Connect streaming share, so each message can be released whole. Pure.


/** gRPC status codes boundary answers with (grpc/doc/statuscodes.md). */
export const GRPC_STATUS = { INTERNAL: 13, PERMISSION_DENIED: 7, UNAUTHENTICATED: 16, UNIMPLEMENTED: 12, UNAVAILABLE: 14, UNKNOWN: 2 } as const;

/** A grpc-message longer than this is cut: it travels in a trailer clients print whole. */
export const MAX_GRPC_MESSAGE_CHARS = 512;

/** `application/grpc`, `application/grpc+proto`, `application/grpc-web+...`: answered in gRPC's form. */
export function isGrpc(contentType: string): boolean {
  return contentType.startsWith('application/grpc');
}

/** Bodies framed as 5-byte-prefixed messages: gRPC (and gRPC-Web) and Connect streaming. */
export function isEnveloped(contentType: string): boolean {
  return contentType.startsWith('application/grpc') || contentType.startsWith('application/connect+');
}

/** gRPC's mapping of an HTTP status to a gRPC status (grpc/doc/http-grpc-status-mapping.md). */
export function grpcStatusOf(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return GRPC_STATUS.INTERNAL;
    case 401:
      return GRPC_STATUS.UNAUTHENTICATED;
    case 403:
      return GRPC_STATUS.PERMISSION_DENIED;
    case 404:
      return GRPC_STATUS.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GRPC_STATUS.UNAVAILABLE;
    default:
      return httpStatus >= 500 ? GRPC_STATUS.INTERNAL : GRPC_STATUS.UNKNOWN;
  }
}

/** gRPC's grpc-message encoding: percent-encode `%` and every byte outside printable ASCII (of the UTF-8). */
export function encodeGrpcMessage(text: string): string {
  const cut = text.length > MAX_GRPC_MESSAGE_CHARS ? `${text.slice(0, MAX_GRPC_MESSAGE_CHARS - 3)}...` : text;
  let out = '';
  for (const byte of Buffer.from(cut, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** A trailers-only gRPC response: HTTP 200 and the status in the one HEADERS frame, which ends the stream. */
export function grpcTrailersOnly(grpcStatus: number, message: string): string[] {
  return [':status', '200', 'content-type', 'application/grpc', 'grpc-status', String(grpcStatus), 'grpc-message', encodeGrpcMessage(message)];
}

/** Where a byte stream of 5-byte-prefixed messages ends each message; chunks in, message-aligned pieces out. */
export interface EnvelopeSplitter {
  /**
   * `chunk` cut where messages end: every piece but the last ends a message (`ends: true`); the last ends one
   * only if the chunk did. The pieces cover the chunk exactly, prefixes included.
   */
  split(chunk: Buffer): { readonly bytes: Buffer; readonly ends: boolean }[];
}

const PREFIX_BYTES = 5;

export function createEnvelopeSplitter(): EnvelopeSplitter {
  // Bytes of the current prefix seen, the prefix so far, and payload bytes still to come.
  let prefixSeen = 0;
  const prefix = Buffer.alloc(PREFIX_BYTES);
  let remaining = 0;
  return {
    split(chunk) {
      const pieces: { bytes: Buffer; ends: boolean }[] = [];
      let start = 0;
      let at = 0;
      while (at < chunk.length) {
        if (prefixSeen < PREFIX_BYTES) {
          const take = Math.min(PREFIX_BYTES - prefixSeen, chunk.length - at);
          chunk.copy(prefix, prefixSeen, at, at + take);
          prefixSeen += take;
          at += take;
          if (prefixSeen < PREFIX_BYTES) break;
          remaining = prefix.readUInt32BE(1);
        }
        const take = Math.min(remaining, chunk.length - at);
        at += take;
        remaining -= take;
        if (remaining > 0) break;
        pieces.push({ bytes: chunk.subarray(start, at), ends: true });
        start = at;
        prefixSeen = 0;
      }
      if (start < chunk.length) pieces.push({ bytes: chunk.subarray(start), ends: false });
      return pieces;
    },
  };
}
