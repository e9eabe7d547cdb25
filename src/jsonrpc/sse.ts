// An incremental Server-Sent Events rewriter (docs/policy.md#filtering-toolslist): splits a byte stream into events
// (a blank line ends one; lines end in CRLF, LF or CR), hands each event's data to `rewrite`, and passes every
// other byte on unchanged. Bounded: an event held past `maxEventBytes` is dropped for what `oversized` says.
// Once `done()` holds, the rest of the stream streams through untouched. Pure; no I/O.

const LF = 0x0a;
const CR = 0x0d;

export interface SseRewriteOptions {
  /** An event held longer than this is not held further: it is dropped, and `oversized()` is sent instead. */
  readonly maxEventBytes: number;
  /** New data for an event's data (its `data:` lines joined with LF), or undefined to send it unchanged. */
  rewrite(data: string): string | undefined;
  /** What replaces a dropped oversized event's data, or undefined to send nothing. */
  oversized(): string | undefined;
  /** Nothing more to rewrite: stream the rest unchanged. */
  done(): boolean;
}

export interface SseRewriter {
  /** The bytes to send for this chunk (possibly none yet: an event is being held). */
  push(chunk: Buffer): Buffer;
  /** What is held at the end of the stream, sent as it came. */
  end(): Buffer;
}

export function createSseRewriter(options: SseRewriteOptions): SseRewriter {
  let held: Buffer[] = [];
  let heldBytes = 0;
  /** Scanner state across chunks: the last byte was CR (a following LF belongs to it), the line so far is empty. */
  let afterCr = false;
  let lineEmpty = true;
  let discarding = false;
  let passthrough = false;

  const take = (): Buffer => {
    const out = held.length === 1 ? (held[0] as Buffer) : Buffer.concat(held, heldBytes);
    held = [];
    heldBytes = 0;
    return out;
  };

  return {
    push(chunk) {
      if (passthrough) return chunk;
      const out: Buffer[] = [];
      let start = 0;
      for (let i = 0; i < chunk.length; i++) {
        const c = chunk[i] as number;
        if (c === LF && afterCr) {
          afterCr = false;
          continue;
        }
        afterCr = c === CR;
        if (c !== LF && c !== CR) {
          lineEmpty = false;
          continue;
        }
        if (!lineEmpty) {
          lineEmpty = true;
          continue;
        }
        // A blank line: the event ends after this terminator (and its LF, when it is a CRLF).
        let stop = i + 1;
        if (c === CR && chunk[stop] === LF) {
          stop++;
          afterCr = false;
          i++;
        }
        const part = chunk.subarray(start, stop);
        start = stop;
        if (discarding) {
          discarding = false;
          passthrough = true;
          out.push(chunk.subarray(start));
          return Buffer.concat(out);
        }
        held.push(part);
        heldBytes += part.length;
        out.push(rewritten(take(), options));
        if (options.done()) {
          passthrough = true;
          out.push(chunk.subarray(start));
          return Buffer.concat(out);
        }
      }
      if (!discarding && start < chunk.length) {
        held.push(chunk.subarray(start));
        heldBytes += chunk.length - start;
        if (heldBytes > options.maxEventBytes) {
          take();
          discarding = true;
          const data = options.oversized();
          if (data !== undefined) out.push(Buffer.from(`data: ${data}\n\n`));
        }
      }
      return Buffer.concat(out);
    },
    end() {
      return discarding ? Buffer.alloc(0) : take();
    },
  };
}

/** One whole event: unchanged, or with its data lines replaced by one `data:` line where the first one was. */
function rewritten(event: Buffer, options: SseRewriteOptions): Buffer {
  const text = event.toString('utf8');
  const lines = text.split(/\r\n|\r|\n/);
  const data: string[] = [];
  for (const line of lines) {
    if (line === 'data' || line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (data.length === 0) return event;
  const replaced = options.rewrite(data.join('\n'));
  if (replaced === undefined) return event;
  const out: string[] = [];
  let placed = false;
  for (const line of lines.slice(0, -2)) {
    if (line === 'data' || line.startsWith('data:')) {
      if (!placed) out.push(`data: ${replaced}`);
      placed = true;
    } else out.push(line);
  }
  return Buffer.from(`${out.join('\n')}\n\n`);
}
