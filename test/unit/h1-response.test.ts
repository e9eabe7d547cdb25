import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MAX_CHUNK_LINE_BYTES,
  MAX_INTERIM_RESPONSES,
  MAX_RESPONSE_HEAD_BYTES,
  MAX_TRAILER_BYTES,
  ResponseParser,
} from '../../src/http1/h1-response.js';
import { MAX_RESPONSE_HEADERS } from '../../src/http1/h1-response-head.js';

interface Parsed {
  status: number;
  headers: string[];
  body: string;
  ended: boolean;
  reusable: boolean;
  heads: number;
  error: { code: string; message: string } | undefined;
}

/** Feeds `parts` (latin1 strings) to a fresh parser; `eof` then signals the upstream's close. */
function parse(parts: readonly string[], options: { head?: boolean; eof?: boolean } = {}): Parsed {
  const body: Buffer[] = [];
  const out: Parsed = { status: 0, headers: [], body: '', ended: false, reusable: false, heads: 0, error: undefined };
  const parser = new ResponseParser({
    onHead(status, headers) {
      out.heads++;
      out.status = status;
      out.headers = headers;
    },
    onData(chunk) {
      body.push(Buffer.from(chunk));
    },
    onEnd() {
      out.ended = true;
    },
  });
  parser.start(options.head === true);
  let error: Error | undefined;
  for (const part of parts) {
    error = parser.feed(Buffer.from(part, 'latin1'));
    if (error !== undefined) break;
  }
  if (error === undefined && options.eof === true) error = parser.eof();
  out.body = Buffer.concat(body).toString('latin1');
  out.reusable = parser.reusable;
  out.error = error === undefined ? undefined : { code: (error as Error & { code: string }).code, message: error.message };
  return out;
}

const OK_CL = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello';
const OK_CHUNKED = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1;q="a b"\r\nhello\r\nA\r\n world!!!!\r\n0\r\nX-Trailer: 1\r\n\r\n';
const OK_INTERIM = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok';

const VALID: readonly { name: string; input: string; head?: boolean; eof?: boolean; expect: Partial<Parsed> }[] = [
  { name: 'a Content-Length body', input: OK_CL, expect: { status: 200, body: 'hello', ended: true, reusable: true, headers: ['Content-Length', '5', 'X-A', 'b'] } },
  { name: 'a chunked body with extensions and trailers (dropped)', input: OK_CHUNKED, expect: { body: 'hello world!!!!', ended: true, reusable: true } },
  { name: 'a close-delimited body', input: 'HTTP/1.1 200 OK\r\nX: y\r\n\r\nabc', eof: true, expect: { body: 'abc', ended: true, reusable: false } },
  { name: 'HEAD with a Content-Length and no body', input: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', head: true, expect: { body: '', ended: true, reusable: true } },
  { name: 'HEAD with Transfer-Encoding: chunked and no body', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', head: true, expect: { ended: true, reusable: true } },
  { name: '204 without a body', input: 'HTTP/1.1 204 No Content\r\n\r\n', expect: { status: 204, ended: true, reusable: true } },
  { name: '304 with the Content-Length of the full representation', input: 'HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n', expect: { status: 304, ended: true, reusable: true } },
  { name: '100 and 103 skipped before the final answer', input: OK_INTERIM, expect: { status: 201, heads: 1, headers: ['Content-Length', '2'], body: 'ok', reusable: true } },
  { name: 'Connection: close', input: 'HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n', expect: { ended: true, reusable: false } },
  { name: 'HTTP/1.0, never reused', input: 'HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx', expect: { body: 'x', ended: true, reusable: false } },
  { name: 'identical Content-Length headers and lists', input: 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3, 3\r\n\r\nabc', expect: { body: 'abc', reusable: true } },
  { name: 'a status line without a reason', input: 'HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n', expect: { status: 200, ended: true } },
  { name: 'an empty reason after the space', input: 'HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n', expect: { status: 404, ended: true } },
  { name: 'OWS trimmed, obs-text kept, case, order and duplicates kept', input: 'HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-V:  \tcaf\xe9 \t\r\nset-cookie: b=2\r\nX-Empty:\r\nContent-Length: 0\r\n\r\n', expect: { headers: ['Set-Cookie', 'a=1', 'X-V', 'caf\xe9', 'set-cookie', 'b=2', 'X-Empty', '', 'Content-Length', '0'] } },
  { name: 'upper-case hex chunk sizes with leading zeros', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n00B\r\nhello world\r\n0\r\n\r\n', expect: { body: 'hello world', reusable: true } },
  { name: 'bytes after the end: complete but poisoned', input: `${OK_CL}HTTP/1.1 200 OK`, expect: { body: 'hello', ended: true, reusable: false } },
];

const INVALID: readonly { name: string; input: string; head?: boolean; eof?: boolean }[] = [
  { name: 'a bare LF line ending', input: 'HTTP/1.1 200 OK\nContent-Length: 0\n\n' },
  { name: 'a bare LF after the status line', input: 'HTTP/1.1 200 OK\r\nX: 1\n\r\n' },
  { name: 'a bare CR inside a header value', input: 'HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n' },
  { name: 'HTTP/2 in the status line', input: 'HTTP/2 200 OK\r\n\r\n' },
  { name: 'a lower-case version', input: 'http/1.1 200 OK\r\n\r\n' },
  { name: 'a status below 100', input: 'HTTP/1.1 099 X\r\n\r\n' },
  { name: 'a status above 599', input: 'HTTP/1.1 600 X\r\n\r\n' },
  { name: 'a four-digit status', input: 'HTTP/1.1 2000 OK\r\n\r\n' },
  { name: 'a non-digit status', input: 'HTTP/1.1 2x0 OK\r\n\r\n' },
  { name: 'a control character in the reason', input: 'HTTP/1.1 200 O\x01K\r\n\r\n' },
  { name: 'whitespace before the colon', input: 'HTTP/1.1 200 OK\r\nX-A : b\r\n\r\n' },
  { name: 'obs-fold', input: 'HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\nContent-Length: 0\r\n\r\n' },
  { name: 'a header name that is not a token', input: 'HTTP/1.1 200 OK\r\nX(A): b\r\n\r\n' },
  { name: 'a header line without a colon', input: 'HTTP/1.1 200 OK\r\nX-A b\r\n\r\n' },
  { name: 'an empty header name', input: 'HTTP/1.1 200 OK\r\n: b\r\n\r\n' },
  { name: 'NUL in a header value', input: 'HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n' },
  { name: 'BEL in a header value', input: 'HTTP/1.1 200 OK\r\nX: a\x07b\r\n\r\n' },
  { name: 'DEL in a header value', input: 'HTTP/1.1 200 OK\r\nX: a\x7fb\r\n\r\n' },
  { name: 'Transfer-Encoding gzip', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n' },
  { name: 'Transfer-Encoding gzip, chunked', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n' },
  { name: 'Transfer-Encoding chunked twice', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n' },
  { name: 'Transfer-Encoding with an empty element', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked,\r\n\r\n' },
  { name: 'Transfer-Encoding with Content-Length', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n' },
  { name: 'differing Content-Length values in one list', input: 'HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n' },
  { name: 'differing Content-Length headers', input: 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n' },
  { name: 'a signed Content-Length', input: 'HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n' },
  { name: 'a non-digit Content-Length', input: 'HTTP/1.1 200 OK\r\nContent-Length: 0x5\r\n\r\n' },
  { name: 'an empty Content-Length', input: 'HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n' },
  { name: 'a 16-digit Content-Length', input: 'HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n' },
  { name: '101 to a request that asked for no upgrade', input: 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n' },
  { name: 'a non-hex chunk size', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n' },
  { name: 'a signed chunk size', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n' },
  { name: 'a space before the chunk size', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n' },
  { name: 'a trailing space after the chunk size', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n' },
  { name: 'a chunk size of 13 hex digits', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000000000005\r\nhello\r\n0\r\n\r\n' },
  { name: 'chunk data not followed by CRLF', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n' },
  { name: 'chunk data followed by a bare LF', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n' },
  { name: 'a chunk-size line ending in a bare LF', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n' },
  { name: 'a control character in a chunk extension', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\x01\r\nhello\r\n0\r\n\r\n' },
  { name: 'a chunk extension without a semicolon', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 a=1\r\nhello\r\n0\r\n\r\n' },
  { name: `a chunk-size line over ${MAX_CHUNK_LINE_BYTES} bytes`, input: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;${'a'.repeat(MAX_CHUNK_LINE_BYTES)}\r\nhello\r\n0\r\n\r\n` },
  { name: 'a malformed trailer', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T 1\r\n\r\n' },
  { name: 'an obs-folded trailer', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n 2\r\n\r\n' },
  { name: `trailers over ${MAX_TRAILER_BYTES} bytes`, input: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n${'X-T: 1\r\n'.repeat(MAX_TRAILER_BYTES / 8 + 1)}\r\n` },
  { name: `a head over ${MAX_RESPONSE_HEAD_BYTES} bytes`, input: `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_RESPONSE_HEAD_BYTES)}\r\n\r\n` },
  { name: `an unfinished head over ${MAX_RESPONSE_HEAD_BYTES} bytes`, input: `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_RESPONSE_HEAD_BYTES)}` },
  { name: `more than ${MAX_RESPONSE_HEADERS} headers`, input: `HTTP/1.1 200 OK\r\n${'X: 1\r\n'.repeat(MAX_RESPONSE_HEADERS + 1)}\r\n` },
  { name: `more than ${MAX_INTERIM_RESPONSES} interim responses`, input: `${'HTTP/1.1 100 Continue\r\n\r\n'.repeat(MAX_INTERIM_RESPONSES + 1)}HTTP/1.1 200 OK\r\n\r\n` },
  { name: 'a close in the middle of a Content-Length body', input: 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe', eof: true },
  { name: 'a close in the middle of a chunked body', input: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe', eof: true },
  { name: 'a close in the middle of the head', input: 'HTTP/1.1 200 OK\r\nContent-Le', eof: true },
  { name: 'a close before any byte', input: '', eof: true },
];

describe('ResponseParser', () => {
  for (const c of VALID) {
    it(`accepts ${c.name}`, () => {
      const out = parse([c.input], c);
      assert.equal(out.error, undefined);
      for (const [key, value] of Object.entries(c.expect)) assert.deepEqual(out[key as keyof Parsed], value, key);
    });
  }

  for (const c of INVALID) {
    it(`refuses ${c.name} with UPSTREAM_PROTOCOL_ERROR`, () => {
      const out = parse([c.input], c);
      assert.equal(out.error?.code, 'UPSTREAM_PROTOCOL_ERROR');
    });
  }

  it('gives the same result whatever byte boundary splits the input', () => {
    for (const c of [VALID[0], VALID[1], VALID[7], VALID[13]]) {
      assert.ok(c !== undefined);
      const whole = parse([c.input], c);
      for (let i = 1; i < c.input.length; i++) {
        assert.deepEqual(parse([c.input.slice(0, i), c.input.slice(i)], c), whole, `${c.name} split at ${i}`);
      }
      const bytes = [...c.input];
      assert.deepEqual(parse(bytes, c), whole, `${c.name} byte by byte`);
    }
  });

  it('refuses an invalid response whatever byte boundary splits it', () => {
    const cases = ['HTTP/1.1 200 OK\r\nX: 1\n\r\n', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n'];
    for (const input of cases) {
      for (let i = 1; i < input.length; i++) {
        assert.equal(parse([input.slice(0, i), input.slice(i)]).error?.code, 'UPSTREAM_PROTOCOL_ERROR', `split at ${i}`);
      }
    }
  });

  it('hands body bytes over as slices of the fed buffer, not copies', () => {
    const input = Buffer.from(OK_CL, 'latin1');
    const seen: Buffer[] = [];
    const parser = new ResponseParser({ onHead() {}, onData: (chunk) => seen.push(chunk), onEnd() {} });
    parser.start(false);
    assert.equal(parser.feed(input), undefined);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.buffer, input.buffer);
  });

  it('parses a second response after start() on the same parser', () => {
    let ends = 0;
    const parser = new ResponseParser({ onHead() {}, onData() {}, onEnd: () => ends++ });
    parser.start(false);
    assert.equal(parser.feed(Buffer.from(OK_CL)), undefined);
    assert.equal(parser.reusable, true);
    parser.start(true);
    assert.equal(parser.reusable, false);
    assert.equal(parser.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n')), undefined);
    assert.equal(ends, 2);
    assert.equal(parser.reusable, true);
  });

  it('refuses bytes fed after a complete response', () => {
    const parser = new ResponseParser({ onHead() {}, onData() {}, onEnd() {} });
    parser.start(false);
    assert.equal(parser.feed(Buffer.from(OK_CL)), undefined);
    assert.equal(parser.feed(Buffer.from('x'))?.code, 'UPSTREAM_PROTOCOL_ERROR');
    assert.equal(parser.reusable, false);
  });
});
