// JSON text for strings and numbers, written the way JSON.stringify writes them, with the common case (nothing
// to escape or clean) found by one native scan. Pure; shared by the OCSF renderer and the log line writer.
import { cleanText, MAX_FIELD_CHARS } from './ocsf.js';

// What JSON.stringify escapes: control characters, quote, backslash, (lone) surrogates.
const JSON_ESCAPED = /[\u0000-\u001f"\\\ud800-\udfff]/;
// That, plus what cleanText would change: '#', '?', DEL..C1, U+2028/9.
const NOT_CLEAN_JSON = /[\u0000-\u001f"#?\\\u007f-\u009f\u2028\u2029\ud800-\udfff]/;

/** JSON.stringify(text): one native scan finds nothing to escape in the common case; anything else is left
 *  to JSON.stringify itself. */
export function jsonString(text: string): string {
  return JSON_ESCAPED.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** JSON.stringify(cleanText(text, maxChars)), in one scan when cleanText would return `text` unchanged and
 *  it needs no escaping; otherwise the two real functions. */
export function cleanJson(text: string, maxChars = MAX_FIELD_CHARS): string {
  return text.length > maxChars || NOT_CLEAN_JSON.test(text) ? JSON.stringify(cleanText(text, maxChars)) : `"${text}"`;
}

/** A finite number as JSON writes it (NaN and the infinities are null). */
export function jsonNumber(value: number): string {
  return Number.isFinite(value) ? `${value}` : 'null';
}

/** Flat copy of a string built from pieces: a memoised fragment is then one piece in every line using it. */
export function flat(text: string): string {
  return JSON.parse(JSON.stringify(text)) as string;
}
