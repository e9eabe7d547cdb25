// The bytes of a connection-level HTTP/2 refusal for a socket with no HTTP/2 session: the server preface (an empty
// SETTINGS frame) and a GOAWAY with an error code and debug text (RFC 9113 §6.8). Pure.

import { goawayFrame, H2Error, settingsFrame } from './frames.js';

/** RFC 9113 §7: "use HTTP/1.1 for this request". */
export const HTTP_1_1_REQUIRED = H2Error.HTTP_1_1_REQUIRED;
/** Debug text beyond this is cut: it is for people reading a packet capture, not a channel. */
export const MAX_GOAWAY_DEBUG_BYTES = 256;

/** SETTINGS (none) then GOAWAY(last stream 0, `code`, `debug`): nothing the client sent was processed. */
export function refusalBytes(code: number, debug: string): Buffer {
  const text = Buffer.from(debug, 'utf8').subarray(0, MAX_GOAWAY_DEBUG_BYTES);
  return Buffer.concat([settingsFrame([]), goawayFrame(0, code, text)]);
}
