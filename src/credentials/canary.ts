// The reverse canary's matcher (docs/credentials.md#reverse-canary): every real value of one credential revision, in
// each form the echo redaction knows and after percent-decoding as the placeholder scan does, found in request bytes
// by a native search per form prefix or, past a few values, one pass through a first-bytes index. Pure; no logging.

import { base64Cores } from './body-redact.js';
import { percentDecodeLoose } from './placeholder.js';
import { secretForms } from './redact.js';
import type { Secret } from './secret.js';
import type { CredentialSet } from './set.js';

/**
 * Values shorter than this are not watched: a few characters occur in ordinary traffic, so watching them would refuse
 * requests that carry no secret. Base64 runs under MIN_BASE64_CORE_CHARS are skipped for the same reason.
 */
export const MIN_CANARY_VALUE_CHARS = 8;
/** Rounds of percent-decoding a search applies (`%2541` is two rounds from `A`), as the placeholder scan. */
const MAX_DECODE_ROUNDS = 3;
const PERCENT = 0x25;
/** Bits of the first-bytes filter: a set bit says some form may begin with the four bytes that hash to it. */
const FILTER_BITS = 20;
/** Every form is at least MIN_CANARY_VALUE_CHARS bytes, so its first four bytes always exist. */
const PREFIX_BYTES = 4;
/**
 * Up to this many distinct prefixes (about eight values), one native indexOf per prefix is faster than the indexed
 * pass, which walks the bytes in JavaScript (docs/benchmarks.md#reverse-canary-and-secret-scanner).
 */
const NATIVE_SEARCH_MAX_PREFIXES = 48;

/** A watched value found in a request: every key that holds it, and the value to ask a scope about. */
export interface CanaryHit {
  /** Sorted key names (never the value). */
  readonly keys: readonly string[];
  readonly secret: Secret;
}

interface Watched {
  readonly form: Buffer;
  /** Index into the matcher's values. */
  readonly value: number;
}

export interface CanaryMatcher {
  /** The credential revision it was built from. */
  readonly revision: number;
  /** Whether any value is watched at all (no credentials: the search is skipped). */
  readonly empty: boolean;
  /** Bytes a stream must hold back so no form, even percent-encoded MAX_DECODE_ROUNDS times, is cut (createCanaryStream). */
  readonly tailBytes: number;
  /** The distinct values `bytes` holds in any recognised form; empty when none. */
  find(bytes: Buffer): CanaryHit[];
}

/** The filter slot of a form's first four bytes, read big-endian as one number. */
function slot(prefix: number): number {
  return Math.imul(prefix, 0x9e3779b1) >>> (32 - FILTER_BITS);
}

/** Every distinct value of `set` with the keys that hold it. */
function valuesOf(set: CredentialSet): { secret: Secret; keys: string[] }[] {
  const byValue = new Map<string, { secret: Secret; keys: Set<string> }>();
  for (const provider of set.providers.values()) {
    for (const [key, secret] of provider.keys) {
      const value = secret.reveal();
      if (value.length < MIN_CANARY_VALUE_CHARS) continue;
      const known = byValue.get(value);
      if (known === undefined) byValue.set(value, { secret, keys: new Set([key]) });
      else known.keys.add(key);
    }
  }
  return [...byValue.values()].map(({ secret, keys }) => ({ secret, keys: [...keys].sort() }));
}

/** Every form of every value, by its first four bytes, and the filter of those prefixes. */
function indexOf(values: readonly { secret: Secret }[]): { byPrefix: Map<number, Watched[]>; filter: Uint8Array } {
  const byPrefix = new Map<number, Watched[]>();
  const filter = new Uint8Array((1 << FILTER_BITS) >>> 3);
  values.forEach(({ secret }, value) => {
    for (const text of new Set([...secretForms(secret.reveal()), ...base64Cores(secret.reveal())])) {
      const form = Buffer.from(text, 'utf8');
      const prefix = form.readUInt32BE(0);
      byPrefix.set(prefix, [...(byPrefix.get(prefix) ?? []), { form, value }]);
      const at = slot(prefix);
      filter[at >>> 3] = (filter[at >>> 3] as number) | (1 << (at & 7));
    }
  });
  return { byPrefix, filter };
}

function sharedStart(a: Buffer, b: Buffer): Buffer {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return a.subarray(0, n);
}

/** Adds the value of each of `forms` that `buf` holds at `start`. */
function check(forms: readonly Watched[], buf: Buffer, start: number, found: Set<number>): void {
  for (const { form, value } of forms) {
    if (!found.has(value) && start + form.length <= buf.length && buf.compare(form, 0, form.length, start, start + form.length) === 0) found.add(value);
  }
}

/** The matcher of one credential revision. */
export function createCanaryMatcher(set: CredentialSet): CanaryMatcher {
  const values = valuesOf(set);
  const { byPrefix, filter } = indexOf(values);
  // Each prefix's forms searched by what they all begin with: the longer the needle, the faster indexOf skips.
  const groups =
    byPrefix.size > NATIVE_SEARCH_MAX_PREFIXES ? undefined : [...byPrefix.values()].map((forms) => ({ anchor: Buffer.from(forms.map((w) => w.form).reduce(sharedStart)), forms }));

  function search(buf: Buffer, found: Set<number>): void {
    if (groups !== undefined) {
      for (const { anchor, forms } of groups) for (let at = buf.indexOf(anchor); at !== -1; at = buf.indexOf(anchor, at + 1)) check(forms, buf, at, found);
      return;
    }
    let prefix = 0;
    for (let i = 0; i < buf.length; i++) {
      prefix = ((prefix << 8) | (buf[i] as number)) >>> 0;
      if (i < PREFIX_BYTES - 1) continue;
      const at = slot(prefix);
      if (((filter[at >>> 3] as number) & (1 << (at & 7))) === 0) continue;
      check(byPrefix.get(prefix) ?? [], buf, i - PREFIX_BYTES + 1, found);
    }
  }

  return Object.freeze({
    revision: set.revision,
    empty: values.length === 0,
    // A character percent-encoded MAX_DECODE_ROUNDS times takes 2 * rounds + 1 bytes (`%252541`).
    tailBytes: (2 * MAX_DECODE_ROUNDS + 1) * Math.max(0, ...[...byPrefix.values()].flat().map((w) => w.form.length)),
    find(bytes: Buffer): CanaryHit[] {
      if (values.length === 0) return [];
      const found = new Set<number>();
      search(bytes, found);
      // Only text with a `%` can hide a value behind escapes the fixed forms do not spell (`%41` for `A`).
      if (bytes.includes(PERCENT)) {
        let text = bytes.toString('latin1');
        for (let round = 0; round < MAX_DECODE_ROUNDS; round++) {
          const next = percentDecodeLoose(text);
          if (next === text) break;
          search(Buffer.from(next, 'latin1'), found);
          text = next;
        }
      }
      return [...found].sort((a, b) => a - b).map((i) => values[i] as { secret: Secret; keys: string[] });
    },
  });
}

/** A body searched as it streams: bytes are released only once no value can still be completed by later ones. */
export interface CanaryStream {
  /** Searches `chunk` with the bytes held back before it; the values found (empty: none). After a hit, stop. */
  feed(chunk: Buffer): CanaryHit[];
  /** What is now safe to send on: every byte fed but the last `tailBytes`. */
  release(): Buffer;
  /** The end of the body: the bytes still held. */
  flush(): Buffer;
}

/** The streaming search of one body (as the placeholder scan's, credentials/scan.ts), with `matcher`'s values. */
export function createCanaryStream(matcher: CanaryMatcher): CanaryStream {
  let held: Buffer = Buffer.alloc(0);
  return {
    feed(chunk) {
      held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      // What is held is the tail release() kept and this chunk: a value across the two is whole here.
      return matcher.find(held);
    },
    release() {
      if (held.length <= matcher.tailBytes) return Buffer.alloc(0);
      const out = held.subarray(0, held.length - matcher.tailBytes);
      held = held.subarray(held.length - matcher.tailBytes);
      return out;
    },
    flush() {
      const out = held;
      held = Buffer.alloc(0);
      return out;
    },
  };
}
