// Splits an absolute-form request target (`http://host:port/path?q`) into scheme, authority and the
// origin-form rest, without a URL parser: the raw path must reach proxy/path.ts untouched. Pure.

type AbsoluteTarget =
  | { readonly ok: true; readonly scheme: string; readonly authority: string; readonly target: string }
  | { readonly ok: false };

const NOT_ABSOLUTE: AbsoluteTarget = { ok: false };

/** `scheme://authority[/path][?query]`; the scheme is lower-cased; an empty path becomes `/`. */
export function parseAbsoluteTarget(url: string): AbsoluteTarget {
  const sep = url.indexOf('://');
  if (sep <= 0) return NOT_ABSOLUTE;
  const scheme = url.slice(0, sep).toLowerCase();
  for (let i = 0; i < scheme.length; i++) {
    const c = scheme.charCodeAt(i);
    const ok = (c >= 97 && c <= 122) || (i > 0 && ((c >= 48 && c <= 57) || c === 43 || c === 45 || c === 46));
    if (!ok) return NOT_ABSOLUTE;
  }
  const start = sep + 3;
  let end = url.length;
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 47 || c === 63 || c === 35) {
      end = i;
      break;
    }
  }
  const authority = url.slice(start, end);
  const rest = url.slice(end);
  const target = rest === '' ? '/' : rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
  return { ok: true, scheme, authority, target };
}
