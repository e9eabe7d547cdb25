// The client frame parser's input buffer: chunks kept as they arrived, copied out only as far as a read
// needs. Pure bytes; knows nothing of frames.
//
// Every read costs O(bytes asked for + chunks it covers), never O(bytes buffered): the parser peeks at a
// header on each push while a large frame trickles in, and a read proportional to the whole queue made that
// quadratic (issue 15).

/** Consumed chunks are dropped from the list's front once there are this many and they are at least half of it. */
const COMPACT_MIN_CONSUMED_CHUNKS = 1_024;

interface ByteQueue {
  size(): number;
  push(chunk: Buffer): void;
  /** The first min(n, size) bytes, without consuming them. */
  peek(n: number): Buffer;
  /** Removes and returns exactly n bytes (n <= size). */
  take(n: number): Buffer;
}

/** Buffered input as a list of chunks; a read touches only the chunks covering the bytes it asks for. */
export function createByteQueue(): ByteQueue {
  const chunks: Buffer[] = [];
  // chunks[head] is the first unconsumed chunk: an index, not shift(), keeps consuming O(chunks consumed).
  let head = 0;
  let size = 0;

  /** Copies the first `n` bytes (n <= size) into a new buffer, touching only the chunks that hold them. */
  function copyFront(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    for (let i = head; filled < n; i++) {
      const chunk = chunks[i] as Buffer;
      filled += chunk.copy(out, filled, 0, Math.min(chunk.length, n - filled));
    }
    return out;
  }

  /** Drops the first `n` bytes (n <= size). */
  function drop(n: number): void {
    size -= n;
    let left = n;
    while (left > 0) {
      const chunk = chunks[head] as Buffer;
      if (chunk.length > left) {
        chunks[head] = chunk.subarray(left);
        break;
      }
      left -= chunk.length;
      head++;
    }
    if (head === chunks.length) {
      chunks.length = 0;
      head = 0;
    } else if (head >= COMPACT_MIN_CONSUMED_CHUNKS && head * 2 >= chunks.length) {
      // Amortised O(1) per consumed chunk: each compaction moves fewer chunks than it drops.
      chunks.splice(0, head);
      head = 0;
    }
  }

  return {
    size: () => size,
    push(chunk) {
      if (chunk.length === 0) return;
      chunks.push(chunk);
      size += chunk.length;
    },
    peek(n) {
      const want = Math.min(n, size);
      const first = chunks[head];
      if (first === undefined || want <= 0) return Buffer.alloc(0);
      if (first.length >= want) return first.subarray(0, want);
      return copyFront(want);
    },
    take(n) {
      if (n <= 0) return Buffer.alloc(0);
      const first = chunks[head] as Buffer;
      const out = first.length >= n ? first.subarray(0, n) : copyFront(n);
      drop(n);
      return out;
    },
  };
}
