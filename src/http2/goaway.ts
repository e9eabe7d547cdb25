// The bytes of a connection-level HTTP/2 refusal for a socket with no HTTP/2 session: the server preface (an empty
// SETTINGS frame) and a GOAWAY with an error code and debug text (RFC 9113 §6.8). Pure.

/** RFC 9113 §7: "use HTTP/1.1 for this request". */
export const HTTP_1_1_REQUIRED = 0x0d;
/** Debug text beyond this is cut: it is for people reading a packet capture, not a channel. */
export const MAX_GOAWAY_DEBUG_BYTES = 256;

const SETTINGS = 0x4;
const GOAWAY = 0x7;

function frame(type: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  return Buffer.concat([head, payload]);
}

/** SETTINGS (none) then GOAWAY(last stream 0, `code`, `debug`): nothing the client sent was processed. */
export function refusalBytes(code: number, debug: string): Buffer {
  const text = Buffer.from(debug, 'utf8').subarray(0, MAX_GOAWAY_DEBUG_BYTES);
  const payload = Buffer.alloc(8 + text.length);
  payload.writeUInt32BE(0, 0);
  payload.writeUInt32BE(code, 4);
  text.copy(payload, 8);
  return Buffer.concat([frame(SETTINGS, Buffer.alloc(0)), frame(GOAWAY, payload)]);
}
