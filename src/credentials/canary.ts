// The reverse canary's matcher (docs/credentials.md#reverse-canary): every real value of one credential revision, in
// each form an echo redaction knows (raw, percent-, JSON- and base64-encoded at any alignment), found in request bytes,
// also after up to MAX_DECODE_ROUNDS rounds of percent-decoding as the placeholder leak scan does. Built once per
// revision; a search is one native indexOf pass per group of forms that begin alike. Pure; never logs a value.

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

interface Group {
  /** What every member begins with; one search for it finds them all. */
  readonly anchor: Buffer;
  readonly members: readonly Watched[];
}

export interface CanaryMatcher {
  /** The credential revision it was built from. */
  readonly revision: number;
  /** Whether any value is watched at all (no credentials: the search is skipped). */
  readonly empty: boolean;
  /** The distinct values `bytes` holds in any recognised form; empty when none. */
  find(bytes: Buffer): CanaryHit[];
}

function sharedStart(a: Buffer, b: Buffer): Buffer {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return a.subarray(0, n);
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

function groupsOf(values: readonly { secret: Secret }[]): Group[] {
  const byStart = new Map<string, Watched[]>();
  values.forEach(({ secret }, value) => {
    const texts = new Set([...secretForms(secret.reveal()), ...base64Cores(secret.reveal())]);
    for (const text of texts) {
      const form = Buffer.from(text, 'utf8');
      const start = form.subarray(0, MIN_CANARY_VALUE_CHARS).toString('latin1');
      byStart.set(start, [...(byStart.get(start) ?? []), { form, value }]);
    }
  });
  return [...byStart.values()].map((members) => ({ anchor: Buffer.from(members.map((m) => m.form).reduce(sharedStart)), members }));
}

/** The matcher of one credential revision. */
export function createCanaryMatcher(set: CredentialSet): CanaryMatcher {
  const values = valuesOf(set);
  const groups = groupsOf(values);

  function search(buf: Buffer, found: Set<number>): void {
    for (const { anchor, members } of groups) {
      for (let at = buf.indexOf(anchor); at !== -1; at = buf.indexOf(anchor, at + 1)) {
        for (const { form, value } of members) {
          if (!found.has(value) && at + form.length <= buf.length && buf.compare(form, 0, form.length, at, at + form.length) === 0) found.add(value);
        }
      }
    }
  }

  return Object.freeze({
    revision: set.revision,
    empty: values.length === 0,
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
