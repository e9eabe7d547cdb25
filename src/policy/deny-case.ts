// The `policy check` warning for deny rules an origin that ignores case could be reached around
// (docs/policy.md#case-insensitive-origins). Reads the YAML only to point at the rule; never changes what a rule matches.

import { childPath, type Field, isMap, isScalar, isSeq, mapGet, type ReadContext, report, seqItems } from './yaml-source.js';

const ASCII_LETTER = /^[a-zA-Z]$/;

/**
 * `/admin/**` -> `/[aA][dD][mM][iI][nN]/**`: every ASCII letter outside a `[...]` class becomes a class of both cases, the
 * spelling that denies `/ADMIN` too. Returns the pattern unchanged when it has no such letter.
 */
export function caseInsensitivePath(pattern: string): string {
  let out = '';
  let inClass = false;
  for (const ch of pattern) {
    if (inClass) {
      out += ch;
      if (ch === ']') inClass = false;
    } else if (ch === '[') {
      out += ch;
      inClass = true;
    } else {
      out += ASCII_LETTER.test(ch) ? `[${ch.toLowerCase()}${ch.toUpperCase()}]` : ch;
    }
  }
  return out;
}

/** Warns once per deny rule whose path has a letter outside a class: IIS, Windows and macOS serve `/ADMIN` as `/admin`. */
export function warnCaseSensitiveDenies(ctx: ReadContext, denyField: Field | undefined, path: string): void {
  const seq = denyField?.value;
  if (!isSeq(seq)) return;
  seqItems(seq).forEach((item, i) => {
    if (!isMap(item)) return;
    const node = mapGet(item, 'path');
    if (!isScalar(node) || typeof node.value !== 'string') return;
    const written = node.value;
    const folded = caseInsensitivePath(written);
    if (folded === written) return;
    report(ctx, node, childPath(childPath(childPath(path, 'deny_rules'), i), 'path'), 'POLICY_WARN_DENY_PATH_CASE',
      `deny path ${written} matches this case only; an origin that ignores case (IIS, Windows or macOS files, some frameworks) ` +
        `also serves ${written.toUpperCase()}: write ${folded} to deny every spelling`);
  });
}
