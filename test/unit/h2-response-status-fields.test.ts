// An answer's head written as `:status` plus the regular fields (RequestStream.respondHead) against the list with
// `:status` first as it was encoded before: the same octets for every status, and h2ResponseRegular the same fields as
// h2ResponseFields, handing back the list itself only when nothing in it changes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { h2ResponseFields, h2ResponseRegular } from '../../src/http2/headers.js';
import { encodeHeaderBlockAfter } from '../../src/http2/hpack-encode.js';

describe(':status encoded apart from the response fields', () => {
  it('writes the same block as the list led by `:status`, for every status and with a table size update', () => {
    const fields = ['content-type', 'text/plain', 'content-length', '5', 'x-long', 'v'.repeat(300)];
    for (let status = 100; status <= 999; status++) {
      for (const update of [false, true]) {
        const apart = encodeHeaderBlockAfter(fields, 9, update, status);
        const led = encodeHeaderBlockAfter([':status', String(status), ...fields], 9, update);
        assert.deepEqual(apart.subarray(9), led.subarray(9), `status ${status}`);
      }
    }
    assert.deepEqual(encodeHeaderBlockAfter([], 0, false, 204), encodeHeaderBlockAfter([':status', '204'], 0, false));
  });

  it('h2ResponseRegular gives h2ResponseFields’ fields, and the list itself when they are already so', () => {
    const clean = ['content-type', 'text/plain', 'set-cookie', 'a=1', 'grpc-status', '0'];
    assert.equal(h2ResponseRegular(clean), clean);
    for (const flat of [
      clean,
      ['Content-Type', 'text/plain'],
      ['connection', 'close', 'keep-alive', 'x', 'content-length', '1'],
      ['te', 'trailers', 'trailer', 'grpc-status', 'a', 'b'],
      [':status', '200', 'a', 'b'],
      ['\u00c0', 'x'],
      ['transfer-encoding', 'chunked', 'upgrade', 'h2c', 'proxy-connection', 'x'],
      [],
    ]) {
      assert.deepEqual(h2ResponseRegular(flat), h2ResponseFields(undefined, flat), JSON.stringify(flat));
    }
  });
});
