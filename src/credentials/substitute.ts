// The one place a Secret is revealed: replaces the placeholders of one slot with values from a scope,
// encoded for that slot, and records the first refusal. Shared by the head, body and WebSocket rewrites.

import { type RefusalReason, type RewriteRefusal, refuse, worse } from './outcome.js';
import { findPlaceholders, type PlaceholderMatch, replaceMatches } from './placeholder.js';
import type { CredentialScope } from './scope.js';

/** Encodes a resolved value for its slot, or names why it cannot go there. */
export type SlotEncoder = (value: string) => string | { readonly refuse: RefusalReason };

export interface Substituter {
  /** `text` with its placeholders replaced; unchanged (and a refusal recorded) when any cannot be. */
  apply(text: string, encode: SlotEncoder): string;
  /** Keys substituted so far. Never log them. */
  readonly used: ReadonlySet<string>;
  /** The most serious refusal so far. */
  refusal(): RewriteRefusal | undefined;
  /** True when `text` is exactly one placeholder (an alias counts with its whole token). */
  isWhole(text: string): boolean;
  /** Records why the placeholders of `text` could not resolve (mismatch, unknown) without substituting. */
  classify(text: string): void;
  /** Records a refusal found outside apply (leftover scan, framing). */
  fail(reason: RefusalReason, message: string): void;
}

const UNSAFE_ANYWHERE = /[\r\n\u0000]/;

/** RFC 3986 percent-encoding of everything except unreserved characters (query values, path segments). */
export function encodeUnreserved(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function createSubstituter(scope: CredentialScope): Substituter {
  const used = new Set<string>();
  let refusal: RewriteRefusal | undefined;
  const fail = (reason: RefusalReason, message: string): void => {
    refusal = worse(refusal, refuse(reason, message));
  };

  function valueFor(match: PlaceholderMatch, encode: SlotEncoder): string | undefined {
    const { key } = match.ref;
    const resolution = scope.resolve(match.ref);
    if (resolution.kind === 'mismatch') {
      fail('endpoint-mismatch', `credential ${key} is not bound to this endpoint`);
      return undefined;
    }
    if (resolution.kind === 'unavailable') {
      fail(resolution.reason, `credential ${key} is not available (${resolution.reason})`);
      return undefined;
    }
    const value = resolution.secret.reveal();
    if (UNSAFE_ANYWHERE.test(value)) {
      fail('unsafe-value', `credential ${key} holds CR, LF or NUL and cannot be sent`);
      return undefined;
    }
    let encoded: string | { readonly refuse: RefusalReason };
    try {
      encoded = encode(value);
    } catch {
      encoded = { refuse: 'unsafe-value' };
    }
    if (typeof encoded !== 'string') {
      fail(encoded.refuse, `credential ${key} cannot be placed in this part of the request`);
      return undefined;
    }
    used.add(key);
    return encoded;
  }

  return {
    apply(text, encode) {
      const matches = findPlaceholders(text, scope.keyExists);
      if (matches.length === 0) return text;
      const values = matches.map((match) => valueFor(match, encode));
      if (values.some((value) => value === undefined)) return text;
      let index = 0;
      return replaceMatches(text, matches, () => values[index++] as string);
    },
    isWhole(text) {
      const matches = findPlaceholders(text, scope.keyExists);
      return matches.length === 1 && matches[0]?.start === 0 && matches[0].end === text.length;
    },
    classify(text) {
      for (const match of findPlaceholders(text, scope.keyExists)) {
        const resolution = scope.resolve(match.ref);
        if (resolution.kind === 'mismatch') fail('endpoint-mismatch', `credential ${match.ref.key} is not bound to this endpoint`);
        if (resolution.kind === 'unavailable') fail(resolution.reason, `credential ${match.ref.key} is not available`);
      }
    },
    used,
    refusal: () => refusal,
    fail,
  };
}
