// The built-in `ryno/regex` (also `openshell/regex`; docs/policy.md#built-in-regex): every OpenAI-style key in a UTF-8
// request body or client text message is replaced with [REDACTED]. It never denies; a body it cannot read (too large,
// not UTF-8) is a stage failure, which the entry's on_error decides. Pure.

import type { EntryResult, MiddlewareImplementation, TextResult } from './implementation.js';
import type { MiddlewareFinding } from './outcome.js';

/** Largest body or message the built-in reads; a larger one fails the stage. */
export const MAX_REGEX_PAYLOAD_BYTES = 256 * 1024;
/** What each match becomes. */
export const REDACTED = '[REDACTED]';
/** The finding type of a redacted key: one finding per request, with the count. */
export const OPENAI_KEY_FINDING = 'regex.openai';
const OPENAI_KEY = /sk-[A-Za-z0-9_-]{16,}/g;

/** `text` with every key replaced, and how many were. */
export function redactKeys(text: string): { readonly text: string; readonly count: number } {
  let count = 0;
  const out = text.replace(OPENAI_KEY, () => {
    count++;
    return REDACTED;
  });
  return { text: count === 0 ? text : out, count };
}

function findings(count: number): readonly MiddlewareFinding[] {
  return count === 0 ? [] : [{ type: OPENAI_KEY_FINDING, count }];
}

// fatal: a byte sequence that is not UTF-8 fails the stage instead of turning into U+FFFD. ignoreBOM: a BOM is kept,
// so a body without a key goes on byte for byte.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function redactBody(body: Buffer): EntryResult {
  if (body.length > MAX_REGEX_PAYLOAD_BYTES) return { verdict: 'failed', failure: 'payload-too-large' };
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    return { verdict: 'failed', failure: 'non-utf8' };
  }
  const redacted = redactKeys(text);
  const replaced = redacted.count === 0 ? undefined : Buffer.from(redacted.text, 'utf8');
  return { verdict: 'allow', body: replaced, findings: findings(redacted.count) };
}

function redactText(text: string): TextResult {
  // A text message is already UTF-8 (the frame parser refuses one that is not, with 1007).
  if (Buffer.byteLength(text, 'utf8') > MAX_REGEX_PAYLOAD_BYTES) return { verdict: 'failed', failure: 'payload-too-large' };
  const redacted = redactKeys(text);
  return { verdict: 'allow', text: redacted.count === 0 ? undefined : redacted.text, findings: findings(redacted.count) };
}

/** The built-in as an implementation: bound to requests and client text messages, never to responses. */
const regex: MiddlewareImplementation = {
  bindings: new Set(['http-request', 'websocket-message'] as const),
  maxPayloadBytes: MAX_REGEX_PAYLOAD_BYTES,
  evaluateBody: redactBody,
  evaluateText: redactText,
};
export const REGEX_MIDDLEWARE: MiddlewareImplementation = Object.freeze(regex);
