import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bufferHasMarker, createMarkerScanner, SCAN_TAIL_BYTES } from '../../src/credentials/scan.js';

const encodeAll = (text: string) =>
  [...text].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');

const MARKERS: [string, string][] = [
  ['a literal placeholder', 'openshell:resolve:env:API_KEY'],
  ['an alias', 'sk-OPENSHELL-RESOLVE-ENV-API_KEY'],
  ['an upper-case placeholder', 'OPENSHELL:RESOLVE:ENV:API_KEY'],
  ['a placeholder with encoded colons', 'openshell%3Aresolve%3Aenv%3AAPI_KEY'],
  ['a fully percent-encoded placeholder', `${encodeAll('openshell:resolve:env:')}API_KEY`],
  ['a fully percent-encoded alias marker', `sk${encodeAll('-OPENSHELL-RESOLVE-ENV-')}API_KEY`],
  ['a ryno placeholder', 'ryno:resolve:env:API_KEY'],
  ['a ryno placeholder with its first letter encoded', '%72yno:resolve:env:API_KEY'],
  ['a fully percent-encoded ryno placeholder', `${encodeAll('ryno:resolve:env:')}API_KEY`],
  ['a ryno alias', 'xoxb-RYNO-RESOLVE-ENV-API_KEY'],
];

function markerStart(body: string): number {
  const lower = body.toLowerCase();
  const starts = ['openshell', '-openshell', '%6f%70', '%2d%4f', 'ryno', '%72yno', '%72%79', '-ryno'].map((s) => lower.indexOf(s)).filter((i) => i >= 0);
  return Math.min(...starts);
}

describe('createMarkerScanner', () => {
  it('holds back three times the longest marker', () => {
    assert.equal(SCAN_TAIL_BYTES, 69);
  });

  for (const [name, marker] of MARKERS) {
    const body = `${'{"data":"'.padEnd(90, 'a')}${marker}${'"}'.padEnd(40, 'z')}`;
    const start = markerStart(body);

    it(`catches ${name} split across two chunks at every byte offset, before releasing any of its bytes`, () => {
      for (let cut = 0; cut <= body.length; cut += 1) {
        const scanner = createMarkerScanner();
        let released = 0;
        if (scanner.feed(Buffer.from(body.slice(0, cut))) === 'clean') released += scanner.release().length;
        const second = scanner.feed(Buffer.from(body.slice(cut)));
        assert.equal(second, 'marker', `cut at ${cut}`);
        assert.ok(released <= start, `cut at ${cut}: released ${released} bytes, marker starts at ${start}`);
        assert.equal(scanner.release().length, 0);
        assert.equal(scanner.flush().length, 0);
      }
    });

    it(`catches ${name} fed one byte at a time`, () => {
      const scanner = createMarkerScanner();
      let released = 0;
      let verdict = 'clean';
      for (let i = 0; i < body.length && verdict === 'clean'; i += 1) {
        verdict = scanner.feed(Buffer.from(body[i] ?? ''));
        released += scanner.release().length;
      }
      assert.equal(verdict, 'marker');
      assert.ok(released <= start);
    });
  }

  it('releases every byte of a clean body, in order, at every split offset', () => {
    const body = `${'x'.repeat(150)}openshell resolve env % 3A ${'y'.repeat(80)}`;
    for (let cut = 0; cut <= body.length; cut += 1) {
      const scanner = createMarkerScanner();
      const out: Buffer[] = [];
      assert.equal(scanner.feed(Buffer.from(body.slice(0, cut))), 'clean');
      out.push(scanner.release());
      assert.ok(scanner.held <= SCAN_TAIL_BYTES);
      assert.equal(scanner.feed(Buffer.from(body.slice(cut))), 'clean');
      out.push(scanner.release(), scanner.flush());
      assert.equal(Buffer.concat(out).toString(), body);
      assert.equal(scanner.held, 0);
    }
  });

  it('keeps reporting a marker once seen and refuses feeds after flush', () => {
    const scanner = createMarkerScanner();
    assert.equal(scanner.feed(Buffer.from('openshell:resolve:env:K')), 'marker');
    assert.equal(scanner.feed(Buffer.from('clean bytes')), 'marker');
    assert.equal(scanner.verdict, 'marker');
    scanner.flush();
    assert.throws(() => scanner.feed(Buffer.from('x')));
  });

  it('accepts Uint8Array views without copying the wrong bytes', () => {
    const backing = Buffer.from('zzzzopenshell:resolve:env:Kzzzz');
    const scanner = createMarkerScanner();
    assert.equal(scanner.feed(new Uint8Array(backing.buffer, backing.byteOffset + 4, 10)), 'clean');
    assert.equal(scanner.feed(new Uint8Array(backing.buffer, backing.byteOffset + 14, 13)), 'marker');
  });

  it('checks a whole buffer at once', () => {
    assert.equal(bufferHasMarker(Buffer.from('a=openshell%253Aresolve%253Aenv%253AK')), true);
    assert.equal(bufferHasMarker(Buffer.from('plain body')), false);
  });
});
