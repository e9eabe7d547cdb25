// The client frame parser's input buffer: chunks kept as they arrived and concatenated only once a whole
// frame (or header) is there. Pure bytes; knows nothing of frames.

/** Buffered input as a list of chunks: concatenated only once a whole frame is there. */
export function createByteQueue() {
  const chunks: Buffer[] = [];
  let size = 0;
  return {
    size: () => size,
    push(chunk: Buffer): void {
      if (chunk.length === 0) return;
      chunks.push(chunk);
      size += chunk.length;
    },
    /** The first min(n, size) bytes, without consuming them. */
    peek(n: number): Buffer {
      const first = chunks[0];
      if (first !== undefined && first.length >= n) return first.subarray(0, n);
      return Buffer.concat(chunks, Math.min(n, size)).subarray(0, n);
    },
    /** Removes and returns exactly n bytes (n <= size). */
    take(n: number): Buffer {
      const first = chunks[0];
      if (first !== undefined && first.length >= n) {
        const out = first.subarray(0, n);
        if (first.length === n) chunks.shift();
        else chunks[0] = first.subarray(n);
        size -= n;
        return out;
      }
      const all = Buffer.concat(chunks, size);
      chunks.length = 0;
      if (all.length > n) chunks.push(all.subarray(n));
      size -= n;
      return all.subarray(0, n);
    },
  };
}
