// The HPACK decoder's strings, made from their codes up to SHORT_READ_CHARS and sliced past it: every octet value at
// every length around the switch-over reads back as the latin1 text that was encoded, raw and Huffman-coded alike.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HpackDecoder } from '../../src/http2/hpack.js';
import { encodeHeaderBlock } from '../../src/http2/hpack-encode.js';

let seed = 7;
function random(n: number): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return Math.floor((seed / 2147483648) * n);
}

describe('HPACK short strings', () => {
  it('decodes names and values of 0-20 octets of any value exactly', () => {
    const decoder = new HpackDecoder();
    for (let round = 0; round < 200; round++) {
      const flat: string[] = [];
      for (let length = 0; length <= 20; length++) {
        let name = 'x-';
        let value = '';
        for (let i = 0; i < length; i++) {
          name += String.fromCharCode(random(256));
          value += String.fromCharCode(random(256));
        }
        flat.push(name, value);
      }
      assert.deepEqual(decoder.decode(encodeHeaderBlock(flat), 1 << 20), flat);
    }
  });

  it('decodes a Huffman-coded string through the same path (RFC 7541 C.4.1)', () => {
    const decoder = new HpackDecoder();
    // "www.example.com" Huffman-coded, as in RFC 7541 C.4.1: a literal with indexed name (:authority) then the value.
    const block = Buffer.from('418cf1e3c2e5f23a6ba0ab90f4ff', 'hex');
    assert.deepEqual(decoder.decode(block, 1 << 20), [':authority', 'www.example.com']);
  });
});
