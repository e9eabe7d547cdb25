// Streaming redaction of known secret values from response bodies (docs/credentials.md#echoed-secrets): every form
// an origin may echo a value in (redact.ts's whole forms, and its base64 at any alignment, as inside
// `Basic base64(user:value)`) is masked by as many bytes as it had, so Content-Length and chunked or HTTP/2
// framing stay right. Bytes are released at once, but for a tail that could still begin a form. Pure.

import { REDACTED } from './secret.js';
import { secretForms } from './redact.js';

/**
 * A base64 run shorter than this is not searched for: it carries under six bytes of the value, and matching it
 * anywhere in a body would mask ordinary text. The value's whole forms are always searched.
 */
export const MIN_BASE64_CORE_CHARS = 8;

const EMPTY = Buffer.alloc(0);

export interface BodyRedactor {
  /** The bytes now final, forms masked; a tail that may begin a form is kept back for the next push. */
  push(chunk: Buffer): Buffer;
  /** The body ended: what was kept back (a form's beginning, never a whole form). */
  end(): Buffer;
  /** Forms masked so far. */
  readonly redactions: number;
}

/**
 * The base64 characters that depend on the value's bytes alone when it starts 0, 1 or 2 bytes into a 3-byte group:
 * what any base64 text holding the value contains, whatever precedes and follows it. Both alphabets.
 */
export function base64Cores(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const cores = new Set<string>();
  for (const offset of [0, 1, 2]) {
    const total = offset + bytes.length;
    const text = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    // The prefix's bits reach into the first group's first 0, 2 or 3 characters; the last group's final character
    // also holds bits of whatever follows.
    const from = [0, 2, 3][offset] as number;
    const to = Math.floor(total / 3) * 4 + (total % 3);
    const core = text.slice(from, to);
    if (core.length < MIN_BASE64_CORE_CHARS) continue;
    cores.add(core);
    cores.add(core.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return [...cores];
}

/** `[redacted]` padded with `*` (or cut) to exactly `length` bytes. */
function maskOf(length: number): Buffer {
  return Buffer.from(length >= REDACTED.length ? REDACTED + '*'.repeat(length - REDACTED.length) : '*'.repeat(length), 'latin1');
}

interface Form {
  readonly bytes: Buffer;
  readonly mask: Buffer;
}

/**
 * Forms that begin alike (a value's raw, percent- and JSON-encoded forms; its base64 with and without padding and
 * the core inside) are found by one search for what they share at their start (at least their first
 * ANCHOR_BYTES), then told apart where it hits: one pass over the body per group rather than per form. The longer
 * that shared start, the faster the search skips through a body.
 */
const ANCHOR_BYTES = 12;

interface FormGroup {
  readonly anchor: Buffer;
  /** Longest first. */
  readonly forms: readonly Form[];
}

/** The longest start `a` and `b` share. */
function sharedStart(a: Buffer, b: Buffer): Buffer {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return a.subarray(0, n);
}

function groupForms(forms: readonly Form[]): FormGroup[] {
  const groups = new Map<string, Form[]>();
  for (const form of forms) {
    const key = form.bytes.subarray(0, ANCHOR_BYTES).toString('latin1');
    groups.set(key, [...(groups.get(key) ?? []), form]);
  }
  return [...groups.values()].map((members) => ({
    anchor: Buffer.from(members.map((m) => m.bytes).reduce(sharedStart)),
    forms: members,
  }));
}

/** A redactor for `values` (with none, it passes every byte on at once). */
export function createBodyRedactor(values: readonly string[]): BodyRedactor {
  const texts = new Set<string>();
  for (const value of values) for (const form of [...secretForms(value), ...base64Cores(value)]) texts.add(form);
  const forms: Form[] = [...texts]
    .map((text) => Buffer.from(text, 'utf8'))
    .sort((a, b) => b.length - a.length)
    .map((bytes) => ({ bytes, mask: maskOf(bytes.length) }));
  const groups = groupForms(forms);
  let tail = EMPTY;
  let redactions = 0;

  /**
   * `buf` with every form that starts before `limit` masked, the longest where several begin at one place: `buf`
   * itself when nothing matched or it is `owned`, else a copy. A form starting at or past `limit` may still grow
   * into a longer one; it waits.
   */
  function masked(buf: Buffer, owned: boolean, limit: number): Buffer {
    let out = buf;
    for (const { anchor, forms: members } of groups) {
      for (let at = out.indexOf(anchor); at !== -1 && at < limit; ) {
        const form = members.find(({ bytes }) => at + bytes.length <= out.length && out.compare(bytes, 0, bytes.length, at, at + bytes.length) === 0);
        if (form !== undefined) {
          // Never write into the upstream's buffer: only a copy of it is changed.
          if (out === buf && !owned) out = Buffer.from(buf);
          form.mask.copy(out, at);
          redactions += 1;
        }
        at = out.indexOf(anchor, at + (form?.bytes.length ?? 1));
      }
    }
    return out;
  }

  /** Where the longest suffix of `buf` that begins some form starts (buf.length when none does). */
  function heldFrom(buf: Buffer): number {
    let held = buf.length;
    for (const { bytes } of forms) {
      const first = bytes[0] as number;
      for (let at = Math.max(0, buf.length - bytes.length + 1); at < held; at++) {
        if (buf[at] === first && buf.compare(bytes, 0, buf.length - at, at) === 0) {
          held = at;
          break;
        }
      }
    }
    return held;
  }

  return {
    push(chunk) {
      if (chunk.length === 0) return EMPTY;
      const owned = tail.length > 0;
      const pending = owned ? Buffer.concat([tail, chunk]) : chunk;
      // Only a tail that begins some form is kept back, so an SSE event's last bytes are not held; every form that
      // starts before it is whole in `pending` by then, and is masked now.
      const held = heldFrom(pending);
      const out = masked(pending, owned, held);
      tail = held === out.length ? EMPTY : Buffer.from(out.subarray(held));
      return held === out.length ? out : out.subarray(0, held);
    },
    end() {
      const rest = masked(tail, true, tail.length);
      tail = EMPTY;
      return rest;
    },
    get redactions() {
      return redactions;
    },
  };
}
