// Placeholders shaped like the real token (docs/credentials.md#shaped-placeholders): the catalogue of named formats,
// custom prefix + length + alphabet formats, the value boundary derives for a provider's key, and the process-wide
// index of those values every placeholder scan consults. Pure but for that index; never sees a secret value.

import { createHash } from 'node:crypto';

/** A shaped placeholder's random part carries at least this much entropy: traffic never matches one by chance. */
export const MIN_SHAPED_ENTROPY_BITS = 64;
/** Bounds the scanners' held tail (three bytes a character when percent-encoded). */
export const MAX_SHAPED_PLACEHOLDER_CHARS = 256;
/** Values indexed at most; past it a new value is refused at load (the index only grows: see `indexShaped`). */
const MAX_INDEXED_SHAPED = 65_536;

export const SHAPED_ALPHABETS = {
  alphanumeric: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
  'upper-alphanumeric': 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  'lower-alphanumeric': 'abcdefghijklmnopqrstuvwxyz0123456789',
  hex: '0123456789abcdef',
  digits: '0123456789',
  base64: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/',
  base64url: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_',
} as const;
export type ShapedAlphabet = keyof typeof SHAPED_ALPHABETS;

type Part = string | { readonly alphabet: ShapedAlphabet; readonly length: number };

/** A token shape: literal parts and random runs, in order. `id` names it in the derivation. */
export interface PlaceholderFormat {
  readonly id: string;
  readonly parts: readonly Part[];
}

const run = (alphabet: ShapedAlphabet, length: number): Part => ({ alphabet, length });

/** Shapes as the vendors publish them (or, where none is published, as their tokens are issued). */
export const FORMAT_CATALOGUE: Readonly<Record<string, readonly Part[]>> = {
  'github-classic': ['ghp_', run('alphanumeric', 36)],
  'github-fine-grained': ['github_pat_', run('alphanumeric', 22), '_', run('alphanumeric', 59)],
  openai: ['sk-proj-', run('base64url', 156)],
  anthropic: ['sk-ant-api03-', run('base64url', 93), 'AA'],
  'slack-bot': ['xoxb-', run('digits', 13), '-', run('digits', 13), '-', run('alphanumeric', 24)],
  'slack-app': ['xapp-1-A', run('upper-alphanumeric', 10), '-', run('digits', 13), '-', run('hex', 64)],
  'aws-access-key-id': ['AKIA', run('upper-alphanumeric', 16)],
  'aws-secret-access-key': [run('base64', 40)],
  'stripe-secret': ['sk_live_', run('alphanumeric', 99)],
};

/** A custom format as the credentials file writes it: `length` counts the whole token, prefix included. */
export interface CustomFormatInput {
  readonly prefix: string;
  readonly length: number;
  readonly alphabet: string;
}

type FormatResult = { readonly ok: true; readonly format: PlaceholderFormat } | { readonly ok: false; readonly message: string };

const PREFIX_CHARS = /^[A-Za-z0-9._~-]*$/;

function lengthOf(parts: readonly Part[]): number {
  return parts.reduce((n, part) => n + (typeof part === 'string' ? part.length : part.length), 0);
}

function entropyOf(parts: readonly Part[]): number {
  return parts.reduce((bits, part) => bits + (typeof part === 'string' ? 0 : part.length * Math.log2(SHAPED_ALPHABETS[part.alphabet].length)), 0);
}

/** A named format of the catalogue, or a custom one; its problem (for CREDENTIALS_FORMAT_INVALID) otherwise. */
export function compileFormat(input: string | CustomFormatInput, shortestMarkerChars: number): FormatResult {
  if (typeof input === 'string') {
    const parts = FORMAT_CATALOGUE[input];
    if (parts === undefined) return { ok: false, message: `unknown format (expected one of ${Object.keys(FORMAT_CATALOGUE).join(', ')}, or { prefix, length, alphabet })` };
    return { ok: true, format: { id: input, parts } };
  }
  if (!PREFIX_CHARS.test(input.prefix)) return { ok: false, message: 'prefix may hold only A-Z a-z 0-9 . _ ~ -' };
  if (!Object.hasOwn(SHAPED_ALPHABETS, input.alphabet)) return { ok: false, message: `alphabet must be one of ${Object.keys(SHAPED_ALPHABETS).join(', ')}` };
  const parts = [input.prefix, run(input.alphabet as ShapedAlphabet, input.length - input.prefix.length)];
  if (!Number.isInteger(input.length) || input.length < shortestMarkerChars || input.length > MAX_SHAPED_PLACEHOLDER_CHARS) {
    return { ok: false, message: `length must be an integer ${shortestMarkerChars}-${MAX_SHAPED_PLACEHOLDER_CHARS} (the whole token, prefix included)` };
  }
  if (entropyOf(parts) < MIN_SHAPED_ENTROPY_BITS) {
    return { ok: false, message: `the random part (length minus prefix) must carry at least ${MIN_SHAPED_ENTROPY_BITS} bits: make it longer or the alphabet larger` };
  }
  return { ok: true, format: { id: `custom:${input.prefix}:${input.length}:${input.alphabet}`, parts } };
}

/**
 * The placeholder of `key` in `provider` with `format`: its literal parts as given, its runs drawn from SHA-256 of
 * the three (rejection sampling, so every character of an alphabet is equally likely). Derived, not stored: the same
 * in `boundary env` and `boundary run`, across restarts and rotations of the value, until the format changes.
 */
export function shapedPlaceholder(provider: string, key: string, format: PlaceholderFormat): string {
  let counter = 0;
  let pool: Buffer = Buffer.alloc(0);
  let at = 0;
  const nextByte = (): number => {
    if (at >= pool.length) {
      pool = createHash('sha256').update(`boundary-shaped-placeholder\u0000${provider}\u0000${key}\u0000${format.id}\u0000${counter++}`).digest();
      at = 0;
    }
    return pool[at++] as number;
  };
  let out = '';
  for (const part of format.parts) {
    if (typeof part === 'string') {
      out += part;
      continue;
    }
    const alphabet = SHAPED_ALPHABETS[part.alphabet];
    const limit = 256 - (256 % alphabet.length);
    for (let i = 0; i < part.length; ) {
      const byte = nextByte();
      if (byte >= limit) continue;
      out += alphabet[byte % alphabet.length];
      i += 1;
    }
  }
  return out;
}

export function formatLength(format: PlaceholderFormat): number {
  return lengthOf(format.parts);
}

/** What a shaped value stands for: the key, and the stable handle of its provider's key (placeholder.ts resolves it so). */
export interface ShapedRef {
  readonly key: string;
  readonly handle: string;
}

/**
 * Every shaped placeholder of every credential set built in this process. A scan of a streamed body has no scope to
 * ask, and a value from another set (an earlier revision, a key since removed) must still never leave unresolved:
 * it is found, then fails to resolve (refused). Values are never removed; they are derived, so a set rebuilt with
 * the same formats adds nothing.
 */
const byValue = new Map<string, ShapedRef>();
const lowerValues = new Set<string>();
let longest = 0;

/** Adds a set's values; false when the index is full (the load is then refused). */
export function indexShaped(value: string, ref: ShapedRef): boolean {
  if (byValue.has(value)) return true;
  if (byValue.size >= MAX_INDEXED_SHAPED) return false;
  byValue.set(value, ref);
  lowerValues.add(value.toLowerCase());
  longest = Math.max(longest, value.length);
  return true;
}

/** Longest indexed value (0 when none): the scanners hold back a tail long enough for it. */
export function longestShapedChars(): number {
  return longest;
}

/** Whether `text` holds any indexed value, in any case; it is lower-cased only when some value is indexed. */
export function hasShapedAnyCase(text: string): boolean {
  if (lowerValues.size === 0) return false;
  const lower = text.toLowerCase();
  for (const value of lowerValues) if (lower.includes(value)) return true;
  return false;
}

/** Whether `text` holds an indexed value exactly as generated. */
export function hasShapedLiteral(text: string): boolean {
  if (byValue.size === 0) return false;
  for (const value of byValue.keys()) if (text.includes(value)) return true;
  return false;
}

/** Every exact occurrence of an indexed value in `text`, as [start, end, ref]. */
export function findShaped(text: string): [number, number, ShapedRef][] {
  const found: [number, number, ShapedRef][] = [];
  if (byValue.size === 0) return found;
  for (const [value, ref] of byValue) {
    for (let at = text.indexOf(value); at !== -1; at = text.indexOf(value, at + value.length)) found.push([at, at + value.length, ref]);
  }
  return found;
}

/** `text` with every indexed value (any case) replaced by `replacement`, for routing and logs. */
export function replaceShaped(text: string, replacement: string): string {
  if (lowerValues.size === 0) return text;
  let out = text;
  for (const value of lowerValues) {
    let lower = out.toLowerCase();
    for (let at = lower.indexOf(value); at !== -1; at = lower.indexOf(value)) {
      out = out.slice(0, at) + replacement + out.slice(at + value.length);
      lower = out.toLowerCase();
    }
  }
  return out;
}
