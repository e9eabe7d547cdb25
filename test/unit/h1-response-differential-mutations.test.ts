// ResponseParser against the RegExp parser it replaced, on seeded mutations: realistic responses with fragments
// inserted, replaced, deleted or upper-cased, fed whole and in random pieces, for GET and HEAD.

import { describe, it } from 'node:test';
import { agree, latin1 } from '../harness/h1-differential.js';
import { seeded } from '../harness/seeded.js';

const BASES = [
  'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 64\r\nDate: Mon, 30 Nov 2026 07:55:57 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=120\r\n\r\nok: boundary bench origin, fixed 64-byte body..................\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1;q="a b"\r\nhello\r\nA\r\n world!!!!\r\n0\r\nX-Trailer: 1\r\n\r\n',
  'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-V:  \tcaf\xe9 \t\r\nset-cookie: b=2\r\nX-Empty:\r\nContent-Length: 0\r\n\r\n',
  'HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx',
  'HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n',
  'HTTP/1.1 200 OK\r\nX: y\r\n\r\nabc',
  'HTTP/1.1 204\r\n\r\n',
  'HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3, 3\r\nTRANSFER-ENCODING: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
];

/** Bytes and fragments mutations put in: line and list syntax, framing names, case, controls, obs-text. */
const FRAGMENTS = [
  '\r', '\n', '\r\n', '\r\n\r\n', ' ', '\t', ':', ',', ';', '0', '5', '9', 'a', 'A', 'f', 'x', 'H', '/', '.', '\x00', '\x01', '\x7f', '\x80', '\xa0', '\xff',
  '\r\nContent-Length: 5', '\r\ncontent-length: 0', '\r\nContent-Length: 5, 5', '\r\nContent-Length: 05', '\r\nTransfer-Encoding: chunked',
  '\r\ntransfer-encoding: gzip', '\r\nConnection: close', '\r\nCONNECTION: Close , x', '\r\n folded', '\r\nX:', '\r\n: v', 'HTTP/1.1 ',
];

const MUTATED_CASES = 20_000;

describe('ResponseParser against the RegExp parser it replaced', () => {
  it(`agrees on ${MUTATED_CASES} seeded mutations, fed whole and in random pieces, for GET and HEAD`, () => {
    const random = seeded(20_261_130);
    const int = (n: number): number => Math.floor(random() * n);
    for (let k = 0; k < MUTATED_CASES; k++) {
      let text = BASES[int(BASES.length)] ?? '';
      for (let m = 1 + int(3); m > 0; m--) {
        const at = int(text.length + 1);
        const r = random();
        if (r < 0.4) text = text.slice(0, at) + (FRAGMENTS[int(FRAGMENTS.length)] ?? '') + text.slice(at);
        else if (r < 0.7) text = text.slice(0, at) + (FRAGMENTS[int(FRAGMENTS.length)] ?? '') + text.slice(at + 1);
        else if (r < 0.85) text = text.slice(0, at) + text.slice(at + 1 + int(3));
        else text = text.slice(0, at) + (text[at] ?? '').toUpperCase() + text.slice(at + 1);
      }
      const input = latin1(text);
      const cuts = Array.from({ length: int(4) }, () => int(input.length)).sort((a, b) => a - b);
      agree(input, cuts, random() < 0.2, random() < 0.7);
    }
  });
});
