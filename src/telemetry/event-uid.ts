// Event uids: random version-4 UUIDs (RFC 9562 §5.4), written as text in batches from one fill of random bytes, each
// handed out as one flat string. crypto.randomUUID joins its text from 20 pieces per call, a string per piece, and
// the audit line then flattens it again: one of these per event was a tenth of what a proxied stream allocated.

import { randomFillSync } from 'node:crypto';

/** UUIDs made per fill of random bytes (16 bytes each). */
export const EVENT_UIDS_PER_BATCH = 128;
const UUID_BYTES = 16;
const UUID_CHARS = 36;
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
const DASH = 0x2d;

/** A source of random v4 UUIDs in lower-case hex with dashes, as crypto.randomUUID() gives them. */
export function createEventUids(): () => string {
  const entropy = Buffer.allocUnsafeSlow(UUID_BYTES * EVENT_UIDS_PER_BATCH);
  const text = Buffer.allocUnsafeSlow(UUID_CHARS * EVENT_UIDS_PER_BATCH);
  let next = EVENT_UIDS_PER_BATCH;

  function refill(): void {
    randomFillSync(entropy);
    let at = 0;
    for (let u = 0; u < EVENT_UIDS_PER_BATCH; u++) {
      const base = u * UUID_BYTES;
      for (let i = 0; i < UUID_BYTES; i++) {
        let byte = entropy[base + i] as number;
        // The version (4) in the high nibble of octet 6, the variant (10) in the high bits of octet 8.
        if (i === 6) byte = (byte & 0x0f) | 0x40;
        else if (i === 8) byte = (byte & 0x3f) | 0x80;
        if (i === 4 || i === 6 || i === 8 || i === 10) text[at++] = DASH;
        text[at++] = HEX_DIGITS[byte >> 4] as number;
        text[at++] = HEX_DIGITS[byte & 0x0f] as number;
      }
    }
    next = 0;
  }

  return function eventUid(): string {
    if (next === EVENT_UIDS_PER_BATCH) refill();
    const at = next++ * UUID_CHARS;
    return text.toString('latin1', at, at + UUID_CHARS);
  };
}
