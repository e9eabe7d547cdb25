// The fail-closed marker test (containsMarker) against the one it replaced, which lower-cased every text it read: the
// same answer on random, adversarial and every-character inputs, with and without shaped placeholders indexed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { containsMarker, MARKERS, percentDecodeLoose, SHORTEST_MARKER_CHARS } from '../../src/credentials/placeholder.js';
import { compileFormat, indexShaped, shapedPlaceholder } from '../../src/credentials/shaped.js';

const LOWER_MARKERS = MARKERS.map((marker) => marker.toLowerCase());
const shapedLower: string[] = [];

/** containsMarker as it was: a lower-case copy of each round's text, searched for each marker and shaped value. */
function referenceContainsMarker(text: string): boolean {
  if (text.length < SHORTEST_MARKER_CHARS) return false;
  let current = text;
  for (let round = 0; round <= 3; round += 1) {
    const lower = current.toLowerCase();
    if (LOWER_MARKERS.some((marker) => lower.includes(marker)) || shapedLower.some((value) => lower.includes(value))) return true;
    const next = percentDecodeLoose(current);
    if (next === current) return false;
    current = next;
  }
  return false;
}

let seed = 20261205;
function random(n: number): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return Math.floor((seed / 2147483648) * n);
}
const pick = <T>(list: readonly T[]): T => list[random(list.length)] as T;

/** Each character in a random case, some of them percent-encoded once to three times (any case of hex digit). */
function disguise(text: string, encode: boolean): string {
  let out = '';
  for (const ch of text) {
    let piece = random(2) === 0 ? ch.toUpperCase() : ch.toLowerCase();
    if (encode && random(4) === 0 && piece.charCodeAt(0) < 0x80) {
      for (let round = 1 + random(3); round > 0; round--) {
        const hex = [...piece].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
        piece = random(2) === 0 ? hex.toUpperCase() : hex;
      }
    }
    out += piece;
  }
  return out;
}

/** Characters beyond ASCII that case mapping treats specially (dotted I, Kelvin, long s, sharp s, final sigma, ligatures). */
const ODD = ['İ', 'ı', 'K', 'Å', 'ſ', 'ß', 'ẞ', 'Σ', 'ς', 'ﬀ', 'ﬅ', 'Ω', 'ǅ', '\u0307', '\u{1F600}', '\uD800'];
const FILLER = ['a', 'Z', '%', '%2', '%3A', '%3a', '%25', ':', '-', ' ', '/', '=', '&', 'resolve', 'env', 'open', 'shell', 'RYNO', ...ODD];

function fragmentOf(marker: string): string {
  const from = random(marker.length);
  return marker.slice(from, from + 1 + random(marker.length - from));
}

function randomInput(extra: readonly string[]): string {
  const parts: string[] = [];
  for (let n = random(8); n >= 0; n--) {
    const kind = random(6);
    const marker = pick([...MARKERS, ...extra]);
    if (kind === 0) parts.push(disguise(marker, random(2) === 0));
    else if (kind === 1) parts.push(disguise(fragmentOf(marker), random(2) === 0));
    else if (kind === 2) {
      // A marker with one character swapped for an odd one, dropped or doubled: near misses.
      const at = random(marker.length);
      parts.push(disguise(`${marker.slice(0, at)}${pick(['', pick(ODD), marker[at] ?? ''])}${marker.slice(at + 1)}`, random(3) === 0));
    } else parts.push(pick(FILLER));
  }
  return parts.join('');
}

function compareOn(inputs: Iterable<string>): number {
  let found = 0;
  for (const input of inputs) {
    const want = referenceContainsMarker(input);
    assert.equal(containsMarker(input), want, JSON.stringify(input));
    if (want) found++;
  }
  return found;
}

function* randomInputs(count: number, extra: readonly string[]): Generator<string> {
  for (let i = 0; i < count; i++) yield randomInput(extra);
}

/** Every marker with every character of the BMP beyond ASCII in place of one of its characters: each place for
 *  a character with a case mapping, a few places (start, inside, end) for the others. */
function* everyCharacterAt(): Generator<string> {
  for (const marker of MARKERS) {
    const few = [0, 1, marker.length >> 1, marker.length - 1];
    const every = [...marker].map((_, i) => i);
    for (let code = 0x80; code <= 0xffff; code++) {
      const ch = String.fromCharCode(code);
      const mapped = ch.toLowerCase() !== ch || ch.toUpperCase() !== ch;
      for (const at of mapped ? every : few) {
        yield `${marker.slice(0, at)}${ch}${marker.slice(at + 1)}`;
        if (mapped) yield `${marker.slice(0, at).toUpperCase()}${ch}${marker.slice(at + 1).toUpperCase()}`;
      }
      if (mapped) yield `${ch}${marker.toUpperCase()}${ch}`;
    }
  }
}

describe('containsMarker matches the lower-casing scan it replaced', () => {
  it('on 60,000 random header-like texts: markers in any case, split, near misses, percent-encoded up to three times', () => {
    const found = compareOn(randomInputs(60_000, []));
    assert.ok(found > 5_000 && found < 55_000, `both answers well represented (${found} with a marker)`);
  });

  it('on every character beyond ASCII in place of each marker character, and around a marker in upper case', () => {
    for (let code = 0x80; code <= 0xffff; code++) {
      // No character beyond ASCII lower-cases to a marker letter: the regular expression's premise.
      const lower = String.fromCharCode(code).toLowerCase();
      for (const c of lower) assert.ok(c.charCodeAt(0) >= 0x80 || !LOWER_MARKERS.some((m) => m.includes(c)), `U+${code.toString(16)}`);
    }
    compareOn(everyCharacterAt());
  });

  it('at the edges: empty, one short of the shortest marker, the marker alone, at the very start and end, on long texts', () => {
    const inputs = ['', 'x'.repeat(SHORTEST_MARKER_CHARS - 1)];
    for (const marker of MARKERS) {
      inputs.push(marker, marker.toUpperCase(), marker.slice(1), marker.slice(0, -1), `${marker}x`, `x${marker}`, `${'y'.repeat(8_000)}${disguise(marker, true)}`);
      inputs.push(encodeURIComponent(encodeURIComponent(encodeURIComponent(marker))), encodeURIComponent(encodeURIComponent(encodeURIComponent(encodeURIComponent(marker)))));
    }
    compareOn(inputs);
  });

  it('with shaped placeholders indexed, found in any case as before', () => {
    const compiled = compileFormat('github-fine-grained', SHORTEST_MARKER_CHARS);
    assert.ok(compiled.ok);
    const value = shapedPlaceholder('diff-provider', 'DIFF_KEY', compiled.format);
    assert.ok(indexShaped(value, { key: 'DIFF_KEY', handle: 'h' }));
    shapedLower.push(value.toLowerCase());
    const found = compareOn(randomInputs(20_000, [value]));
    assert.ok(found > 2_000);
  });
});
