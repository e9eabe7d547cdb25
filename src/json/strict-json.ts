// JSON text read the one way every parser agrees on (docs/policy.md#duplicate-json-keys): JSON.parse's value, or
// a refusal when an object repeats a key, since first-key parsers (cJSON, RapidJSON) and last-key ones (JSON.parse)
// would then read different requests. Pure; no recursion, so nesting depth is bounded by the text's size only.

/** A repeated key is shown cut to this many characters, control characters as `?`: the client picks it. */
export const MAX_SHOWN_KEY_CHARS = 64;
/** The path of the object holding it is shown cut to this many characters. */
export const MAX_SHOWN_PATH_CHARS = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/** Why a text was refused for a repeated key: the closed reason and one sentence naming the key and its object. */
export interface DuplicateKeyRefusal {
  readonly reason: 'json-duplicate-key';
  readonly problem: string;
}

export type JsonRead =
  | { readonly kind: 'value'; readonly value: unknown }
  /** Not JSON, as JSON.parse decides. */
  | { readonly kind: 'not-json' }
  | { readonly kind: 'duplicate-key'; readonly refusal: DuplicateKeyRefusal };

/**
 * Parses `text` with JSON.parse and proves no key was repeated: every member of an object has exactly one `:` outside
 * strings, and the parsed value has one own key per member unless a repeated key collapsed two into one (dropping
 * the first value with everything inside it). So the members counted in the text equal the keys of the value
 * exactly when no object repeats a key, however the keys are escaped (`"a"` and `"\u0061"` are one key to
 * JSON.parse, and so here). The value decided is the value checked.
 */
export function readJson(text: string): JsonRead {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: 'not-json' };
  }
  if (typeof value !== 'object' || value === null || membersInText(text) === keysInValue(value)) return { kind: 'value', value };
  return { kind: 'duplicate-key', refusal: { reason: 'json-duplicate-key', problem: describeDuplicate(text) } };
}

/** `:` outside string literals. Only called on text JSON.parse accepted, where a `\` in a string always escapes the next character. */
function membersInText(text: string): number {
  let members = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === COLON) members++;
    else if (c === QUOTE) i = closingQuote(text, i + 1);
  }
  return members;
}

/** The index of the `"` closing the string whose contents start at `from`. */
function closingQuote(text: string, from: number): number {
  let at = text.indexOf('"', from);
  for (;;) {
    let before = at - 1;
    while (text.charCodeAt(before) === BACKSLASH) before--;
    // An even run of backslashes escapes itself, not the quote.
    if ((at - 1 - before) % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
}

/** Own keys of every object in a JSON.parse value (a tree: no object is reached twice). */
function keysInValue(root: object): number {
  let keys = 0;
  const pending: object[] = [root];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (Array.isArray(next)) {
      for (const item of next as unknown[]) if (typeof item === 'object' && item !== null) pending.push(item);
      continue;
    }
    const names = Object.keys(next);
    keys += names.length;
    for (const name of names) {
      const item = (next as Record<string, unknown>)[name];
      if (typeof item === 'object' && item !== null) pending.push(item);
    }
  }
  return keys;
}

interface Open {
  /** Keys seen so far in this object; undefined for an array. */
  readonly keys: Set<string> | undefined;
  readonly path: string;
  /** Items seen so far in this array. */
  index: number;
}

/**
 * The first repeated key and the path of its object, for the refusal's sentence: a scan of text JSON.parse accepted
 * that decodes each key as JSON.parse does. Runs only on the refusal path.
 */
function describeDuplicate(text: string): string {
  const open: Open[] = [];
  let memberKey: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = open[open.length - 1];
    if (c === 0x7b || c === 0x5b) {
      const path = top === undefined ? '$' : `${top.path}${top.keys === undefined ? `[${top.index}]` : pathKey(memberKey ?? '')}`;
      open.push({ keys: c === 0x7b ? new Set() : undefined, path, index: 0 });
    } else if (c === 0x7d || c === 0x5d) open.pop();
    else if (c === 0x2c && top?.keys === undefined && top !== undefined) top.index++;
    else if (c === QUOTE) {
      const end = closingQuote(text, i + 1);
      if (top?.keys !== undefined && text.charCodeAt(afterSpace(text, end + 1)) === COLON) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (top.keys.has(key)) return `key ${JSON.stringify(shown(key, MAX_SHOWN_KEY_CHARS))} appears more than once in the object at ${shown(top.path, MAX_SHOWN_PATH_CHARS)}`;
        top.keys.add(key);
        memberKey = key;
      }
      i = end;
    }
  }
  return 'a key appears more than once in one object';
}

function afterSpace(text: string, from: number): number {
  let at = from;
  for (let c = text.charCodeAt(at); c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d; c = text.charCodeAt(++at));
  return at;
}

function pathKey(key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function shown(text: string, max: number): string {
  const printable = text.replace(/[^\x20-\x7e]/g, '?');
  return printable.length <= max ? printable : `${printable.slice(0, max - 3)}...`;
}
