// Method-override headers (docs/destinations.md#method-override-headers): frameworks that honour them act on
// the method they name, not the wire method, so an L7 endpoint decides both. Pure; sees raw header pairs only.

import { isToken } from '../http1/grammar.js';

/** The override headers common frameworks honour, lower-case with `-` (a `_` spelling folds into them). */
export const METHOD_OVERRIDE_HEADERS: readonly string[] = ['x-http-method-override', 'x-http-method', 'x-method-override'];
const OVERRIDE_LENGTHS: ReadonlySet<number> = new Set(METHOD_OVERRIDE_HEADERS.map((n) => n.length));

/** Longer than any method a framework dispatches on; a longer value is refused, not decided. */
export const MAX_METHOD_OVERRIDE_LENGTH = 32;

export type MethodOverride =
  | { readonly ok: true; readonly method: string }
  | { readonly ok: false; readonly problem: 'repeated-override' | 'bad-override-value' };

/**
 * The override the request carries, upper-cased as frameworks compare it, or undefined when none does. More
 * than one override header (or one repeated) is refused: which wins differs between frameworks. Names are
 * matched with `_` read as `-`, since a CGI/WSGI-style mapping reads `X_HTTP_Method` as `X-HTTP-Method`.
 */
export function methodOverride(rawHeaders: readonly string[]): MethodOverride | undefined {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (!OVERRIDE_LENGTHS.has(name.length)) continue;
    if (!METHOD_OVERRIDE_HEADERS.includes(name.toLowerCase().replaceAll('_', '-'))) continue;
    if (value !== undefined) return { ok: false, problem: 'repeated-override' };
    value = (rawHeaders[i + 1] ?? '').trim();
  }
  if (value === undefined) return undefined;
  // RFC 9110 method = token: a list, a space or an empty value is refused, as frameworks split them differently.
  if (value.length > MAX_METHOD_OVERRIDE_LENGTH || !isToken(value)) return { ok: false, problem: 'bad-override-value' };
  return { ok: true, method: value.toUpperCase() };
}
