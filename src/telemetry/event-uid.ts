// Event uids: random version-4 UUIDs (RFC 9562 §5.4) in crypto.randomUUID()'s text form, written in batches from one
// fill of random bytes. A uid is handed out as its 36 ASCII bytes, a view of the batch's text: the audit line copies
// them as they are, and a string is made only for what keeps one (docs/benchmarks.md#fourth-pass-the-event-uid-as-bytes).

import { randomFillSync } from 'node:crypto';

/** UUIDs made per fill of random bytes (16 bytes each). */
export const EVENT_UIDS_PER_BATCH = 128;
const UUID_BYTES = 16;
const UUID_CHARS = 36;
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
const DASH = 0x2d;
/** Where each of a uid's 16 bytes is written in its text (two hex digits); the dashes between never move. */
const BYTE_TEXT_AT = Uint8Array.from([0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34]);
const DASHES_AT = [8, 13, 18, 23] as const;

/**
 * A source of random v4 UUIDs in lower-case hex with dashes, as crypto.randomUUID() gives them, each as its text's
 * 36 ASCII bytes. A uid's bytes are written over once EVENT_UIDS_PER_BATCH more are taken: copy them (or take
 * `uidText`) before that.
 */
export function createEventUids(): () => Buffer {
  const entropy = Buffer.allocUnsafeSlow(UUID_BYTES * EVENT_UIDS_PER_BATCH);
  const text = Buffer.allocUnsafeSlow(UUID_CHARS * EVENT_UIDS_PER_BATCH);
  // Made once: every refill writes the same places.
  const views = Array.from({ length: EVENT_UIDS_PER_BATCH }, (_, u) => text.subarray(u * UUID_CHARS, (u + 1) * UUID_CHARS));
  // Written once: every refill writes the hex digits around them.
  for (let u = 0; u < EVENT_UIDS_PER_BATCH; u++) for (const at of DASHES_AT) text[u * UUID_CHARS + at] = DASH;
  let next = EVENT_UIDS_PER_BATCH;

  function refill(): void {
    randomFillSync(entropy);
    for (let u = 0; u < EVENT_UIDS_PER_BATCH; u++) {
      const base = u * UUID_BYTES;
      // The version (4) in the high nibble of octet 6, the variant (10) in the high bits of octet 8.
      entropy[base + 6] = ((entropy[base + 6] as number) & 0x0f) | 0x40;
      entropy[base + 8] = ((entropy[base + 8] as number) & 0x3f) | 0x80;
      const uidAt = u * UUID_CHARS;
      for (let i = 0; i < UUID_BYTES; i++) {
        const byte = entropy[base + i] as number;
        const at = uidAt + (BYTE_TEXT_AT[i] as number);
        text[at] = HEX_DIGITS[byte >> 4] as number;
        text[at + 1] = HEX_DIGITS[byte & 0x0f] as number;
      }
    }
    next = 0;
  }

  return function eventUid(): Buffer {
    if (next === EVENT_UIDS_PER_BATCH) refill();
    return views[next++] as Buffer;
  };
}

/** A uid's text, to keep. */
export function uidText(uid: Uint8Array): string {
  return Buffer.from(uid.buffer, uid.byteOffset, uid.byteLength).toString('latin1');
}
