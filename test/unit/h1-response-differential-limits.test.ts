// ResponseParser against the RegExp parser it replaced, at and around every limit: header count, head size,
// Content-Length digits, interim responses, chunk-size digits, chunk-line length and trailer size.

import { describe, it } from 'node:test';
import { MAX_CONTENT_LENGTH_DIGITS } from '../../src/http1/grammar.js';
import {
  MAX_CHUNK_LINE_BYTES,
  MAX_CHUNK_SIZE_DIGITS,
  MAX_INTERIM_RESPONSES,
  MAX_RESPONSE_HEAD_BYTES,
  MAX_TRAILER_BYTES,
} from '../../src/http1/h1-response.js';
import { MAX_RESPONSE_HEADERS } from '../../src/http1/h1-response-head.js';
import { agree, latin1 } from '../harness/h1-differential.js';

describe('ResponseParser against the RegExp parser it replaced', () => {
  it('agrees at the limits: header count, head size, Content-Length digits, interim heads, chunk lines', () => {
    const lines = (count: number): string => 'X: 1\r\n'.repeat(count);
    for (const count of [MAX_RESPONSE_HEADERS - 1, MAX_RESPONSE_HEADERS, MAX_RESPONSE_HEADERS + 1]) {
      agree(latin1(`HTTP/1.1 200 OK\r\n${lines(count)}Content-Length: 0\r\n\r\n`));
      agree(latin1(`HTTP/1.1 200 OK\r\n${lines(count)}\r\n`), [17, 40]);
      // Too many headers and a malformed one: the count is reported first, as the split-based parser did.
      agree(latin1(`HTTP/1.1 200 OK\r\nX 1\r\n${lines(count)}\r\n`));
    }
    const filler = (size: number): string => `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(size - 25)}\r\n\r\n`;
    for (const size of [MAX_RESPONSE_HEAD_BYTES - 1, MAX_RESPONSE_HEAD_BYTES, MAX_RESPONSE_HEAD_BYTES + 1]) {
      agree(latin1(filler(size)));
      agree(latin1(filler(size)), [size - 3, size - 1]);
      agree(latin1(`${filler(size).slice(0, 30)}\n${filler(size).slice(31)}`));
    }
    for (const digits of [MAX_CONTENT_LENGTH_DIGITS - 1, MAX_CONTENT_LENGTH_DIGITS, MAX_CONTENT_LENGTH_DIGITS + 1]) {
      agree(latin1(`HTTP/1.1 200 OK\r\nContent-Length: ${'0'.repeat(digits - 1)}2\r\n\r\nok`));
    }
    for (const count of [MAX_INTERIM_RESPONSES, MAX_INTERIM_RESPONSES + 1]) {
      agree(latin1(`${'HTTP/1.1 100 Continue\r\nX: 1\r\n\r\n'.repeat(count)}HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n`), [3, 40, 41]);
    }
    for (const digits of [MAX_CHUNK_SIZE_DIGITS, MAX_CHUNK_SIZE_DIGITS + 1]) {
      agree(latin1(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${'0'.repeat(digits - 1)}1\r\nx\r\n0\r\n\r\n`));
    }
    agree(latin1(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${'a'.repeat(MAX_CHUNK_LINE_BYTES - 5)}\r\nx\r\n0\r\n\r\n`));
    agree(latin1(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n${'X-T: 1\r\n'.repeat(MAX_TRAILER_BYTES / 8)}\r\n`));
  });
});
