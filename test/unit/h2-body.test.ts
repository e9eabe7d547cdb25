import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MarkerInBodyError } from '../../src/chain/credential-injection.js';
import { scannedMessages } from '../../src/chain/h2-body.js';

function message(payload: string): Buffer {
  const body = Buffer.from(payload);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

async function* chunks(...parts: Buffer[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield p;
}

describe('marker scan of gRPC message bodies', () => {
  it('releases each message whole as soon as it ends, so a streaming call never waits on a held tail', async () => {
    const first = message('short');
    const iterator = scannedMessages(chunks(first, message('second')))[Symbol.asyncIterator]();
    const out = await iterator.next();
    assert.deepEqual(out.value, first, 'the first message went out before the second arrived');
  });

  it('holds the tail of a message still arriving', async () => {
    const long = message('x'.repeat(2_000));
    const out: Buffer[] = [];
    for await (const c of scannedMessages(chunks(long.subarray(0, 1_000), long.subarray(1_000)))) out.push(c);
    assert.deepEqual(Buffer.concat(out), long);
    assert.ok((out[0]?.length ?? 0) < 1_000, 'part of the first chunk was held back');
  });

  it('stops the body at a credential placeholder split across chunks, before any of it is released', async () => {
    const m = message('token openshell:resolve:env:API_TOKEN here');
    const released: Buffer[] = [];
    await assert.rejects(
      (async () => {
        for await (const c of scannedMessages(chunks(m.subarray(0, 20), m.subarray(20)))) released.push(c);
      })(),
      (err: unknown) => err instanceof MarkerInBodyError,
    );
    assert.ok(!Buffer.concat(released).toString('latin1').includes('openshell'), 'no byte of the marker went out');
  });
});
