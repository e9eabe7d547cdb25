import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createEnvelopeSplitter, encodeGrpcMessage, GRPC_STATUS, grpcStatusOf, grpcTrailersOnly, isEnveloped, isGrpc, MAX_GRPC_MESSAGE_CHARS } from '../../src/http2/grpc.js';

function message(payload: string, flag = 0): Buffer {
  const body = Buffer.from(payload);
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

describe('gRPC on HTTP/2 streams', () => {
  it('tells gRPC calls and enveloped bodies by content-type', () => {
    assert.ok(isGrpc('application/grpc'));
    assert.ok(isGrpc('application/grpc+proto'));
    assert.ok(!isGrpc('application/json'));
    assert.ok(isEnveloped('application/connect+proto'));
    assert.ok(!isEnveloped('application/proto'));
  });

  it("maps HTTP statuses as gRPC's own mapping does", () => {
    assert.equal(grpcStatusOf(403), GRPC_STATUS.PERMISSION_DENIED);
    assert.equal(grpcStatusOf(400), GRPC_STATUS.INTERNAL);
    assert.equal(grpcStatusOf(502), GRPC_STATUS.UNAVAILABLE);
    assert.equal(grpcStatusOf(503), GRPC_STATUS.UNAVAILABLE);
    assert.equal(grpcStatusOf(500), GRPC_STATUS.INTERNAL);
    assert.equal(grpcStatusOf(418), GRPC_STATUS.UNKNOWN);
  });

  it('percent-encodes grpc-message outside printable ASCII and %, and bounds it', () => {
    assert.equal(encodeGrpcMessage('denied 100% (é)'), 'denied 100%25 (%C3%A9)');
    assert.equal(encodeGrpcMessage('a\r\nb'), 'a%0D%0Ab');
    assert.equal(encodeGrpcMessage('x'.repeat(MAX_GRPC_MESSAGE_CHARS + 50)).length, MAX_GRPC_MESSAGE_CHARS);
  });

  it('answers trailers-only: HTTP 200, the status and message in the one HEADERS frame', () => {
    assert.deepEqual(grpcTrailersOnly(7, 'no'), [':status', '200', 'content-type', 'application/grpc', 'grpc-status', '7', 'grpc-message', 'no']);
  });

  it('cuts a byte stream where each message ends, whatever the chunking', () => {
    const stream = Buffer.concat([message('one'), message(''), message('three', 1)]);
    for (let size = 1; size <= stream.length; size++) {
      const splitter = createEnvelopeSplitter();
      const ends: number[] = [];
      let seen = 0;
      let joined = Buffer.alloc(0);
      for (let at = 0; at < stream.length; at += size) {
        for (const piece of splitter.split(stream.subarray(at, at + size))) {
          seen += piece.bytes.length;
          joined = Buffer.concat([joined, piece.bytes]);
          if (piece.ends) ends.push(seen);
        }
      }
      assert.deepEqual(ends, [8, 13, 23], `chunks of ${size}`);
      assert.deepEqual(joined, stream);
    }
  });
});
