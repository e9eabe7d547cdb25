// Follows server→client WebSocket frame boundaries (RFC 6455 §5.2) by their headers alone, so the relay can
// place a close frame of its own between server frames. Never unmasks, copies or reads a payload.

interface FrameBoundaryTracker {
  /** Follows the stream through `chunk` (all of it). */
  feed(chunk: Buffer): void;
  /** True between frames: a frame of our own may be written now. */
  atBoundary(): boolean;
  /** Bytes of `chunk` up to and including the end of the current frame; -1 if no frame ends in it. */
  untilBoundary(chunk: Buffer): number;
}

/**
 * Follows server→client frame boundaries by reading headers only (no unmasking, no copies), so a close
 * frame of our own is never written into the middle of a server frame. Payload bytes are skipped unread.
 */
export function createFrameBoundaryTracker(): FrameBoundaryTracker {
  const header: number[] = [];
  let need = 2;
  let remaining = 0;

  function headerDone(): void {
    const b1 = header[1] as number;
    const len7 = b1 & 0x7f;
    let length = len7;
    if (len7 === 126) length = ((header[2] as number) << 8) | (header[3] as number);
    else if (len7 === 127) {
      length = 0;
      for (let i = 2; i < 10; i++) length = length * 256 + (header[i] as number);
      // Beyond 2^53 the count is not exact: treat the frame as endless (we then close without a frame).
      if (!Number.isSafeInteger(length)) length = Number.POSITIVE_INFINITY;
    }
    remaining = length;
    header.length = 0;
    need = 2;
  }

  /** Consumes from `chunk`; with `stop`, returns right after the first frame end. */
  function advance(chunk: Buffer, stop: boolean): number {
    let i = 0;
    while (i < chunk.length) {
      if (remaining > 0) {
        const n = Math.min(remaining, chunk.length - i);
        remaining -= n;
        i += n;
        if (remaining === 0 && stop) return i;
        continue;
      }
      header.push(chunk[i] as number);
      i++;
      if (header.length === 2) {
        const b1 = header[1] as number;
        const len7 = b1 & 0x7f;
        need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + ((b1 & 0x80) !== 0 ? 4 : 0);
      }
      if (header.length >= 2 && header.length === need) {
        headerDone();
        if (remaining === 0 && stop) return i;
      }
    }
    return i;
  }

  const atBoundary = (): boolean => header.length === 0 && remaining === 0;
  return {
    feed(chunk) {
      advance(chunk, false);
    },
    atBoundary,
    untilBoundary(chunk) {
      if (atBoundary()) return 0;
      const used = advance(chunk, true);
      return atBoundary() ? used : -1;
    },
  };
}
