// Streaming leak scan for bodies that are not rewritten (docs/credentials.md#streaming-bodies, CR-12/13): holds back a
// tail of SCAN_TAIL_BYTES so a marker split across reads, or fully percent-encoded, is seen before any of
// its bytes are released. Pure and synchronous; the proxy forwards only the bytes this releases.

import { containsMarker, LONGEST_MARKER_CHARS } from './placeholder.js';
import { longestShapedChars } from './shaped.js';

/** 3 × the longest marker: a fully percent-encoded marker (`%6F%70...`) is three bytes per character. */
export const SCAN_TAIL_BYTES = 3 * LONGEST_MARKER_CHARS;

type ScanVerdict = 'clean' | 'marker';

interface MarkerScanner {
  /**
   * Scans `chunk` with the bytes held back from earlier chunks. 'marker' is final: the proxy must refuse
   * the request and close the upstream side without writing anything more.
   */
  feed(chunk: Uint8Array): ScanVerdict;
  /** The bytes now safe to forward: all fed bytes except the last SCAN_TAIL_BYTES. Empty after a marker. */
  release(): Buffer;
  /** End of the body: the held tail, now safe too (empty after a marker). feed() after flush() throws. */
  flush(): Buffer;
  readonly verdict: ScanVerdict;
  /** Bytes fed and not yet released. */
  readonly held: number;
}

/**
 * One scanner per request body. Usage, per chunk: `if (s.feed(c) === 'marker') refuse(); else write(s.release())`,
 * and at the end of the body `write(s.flush())`. Bytes never reach upstream before the scanner released them.
 */
export function createMarkerScanner(): MarkerScanner {
  // A shaped placeholder can be longer than any marker: the tail covers the longest known when the scan starts.
  const tailBytes = Math.max(SCAN_TAIL_BYTES, 3 * longestShapedChars());
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let verdict: ScanVerdict = 'clean';
  let finished = false;

  function tail(bytes: number): Buffer {
    const all = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes);
    pending = [all];
    return all.subarray(Math.max(0, all.length - bytes));
  }

  return {
    feed(chunk) {
      if (finished) throw new Error('marker scanner: feed after flush');
      if (verdict === 'marker') return verdict;
      const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      // Everything before the held tail was already scanned with at least SCAN_TAIL_BYTES of overlap.
      const window = Buffer.concat([tail(tailBytes), bytes]);
      pending.push(Buffer.from(bytes));
      pendingBytes += bytes.length;
      if (containsMarker(window.toString('latin1'))) {
        verdict = 'marker';
        pending = [];
        pendingBytes = 0;
      }
      return verdict;
    },
    release() {
      if (verdict === 'marker' || pendingBytes <= tailBytes) return Buffer.alloc(0);
      const all = Buffer.concat(pending, pendingBytes);
      const cut = all.length - tailBytes;
      pending = [Buffer.from(all.subarray(cut))];
      pendingBytes = tailBytes;
      return all.subarray(0, cut);
    },
    flush() {
      finished = true;
      if (verdict === 'marker') return Buffer.alloc(0);
      const rest = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      return rest;
    },
    get verdict() {
      return verdict;
    },
    get held() {
      return pendingBytes;
    },
  };
}

/** One-shot form for a complete buffer (e.g. a small body already in memory). */
export function bufferHasMarker(body: Uint8Array): boolean {
  return containsMarker(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('latin1'));
}
