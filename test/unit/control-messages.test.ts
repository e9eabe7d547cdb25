import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { describe, it } from 'node:test';
import {
  type ControlMessage,
  decodeMessage,
  encodeMessage,
  MAX_CONTROL_MESSAGE_BYTES,
  MESSAGE_KINDS,
} from '../../src/control/messages.js';
import { decodeMessages, readBody, readMessageBody } from '../../src/control/ndjson.js';

const HASH = 'a'.repeat(64);

const SAMPLES: Record<(typeof MESSAGE_KINDS)[number], ControlMessage[]> = {
  attach: [
    { kind: 'attach', sandboxId: 'sb-1', instanceId: 'pod-1', bootId: 'b1', version: '0.1.0' },
    {
      kind: 'attach',
      sandboxId: 'sb-1',
      instanceId: 'pod-1',
      bootId: 'b1',
      version: '0.1.0',
      heldPolicyHash: HASH,
      heldGeneration: 7,
      heldCredentialsHash: HASH,
      lastError: { kind: 'connect-refused', message: 'ECONNREFUSED 127.0.0.1:5500' },
    },
  ],
  admitted: [
    {
      kind: 'admitted',
      sessionId: 's-1',
      generation: 3,
      policyHash: HASH,
      policy: 'version: 1\n',
      credentialsHash: HASH,
      credentials: [{ name: 'api', env: { API_KEY: 'secret' }, endpoints: [{ host: 'api.example.test', port: 443, path: '/v1/**' }] }],
      settings: { failureMode: 'fail_closed' },
    },
    { kind: 'admitted', sessionId: 's-2', generation: 3, policyHash: HASH, credentialsHash: HASH, settings: { failureMode: 'retain_last_valid' } },
  ],
  refused: [{ kind: 'refused', code: 'unknown-sandbox', message: 'no policy for sb-9', retryable: true }],
  policy: [{ kind: 'policy', generation: 4, policyHash: HASH, policy: 'version: 1\nnetwork_policies: {}\n' }],
  credentials: [{ kind: 'credentials', generation: 5, credentialsHash: HASH, credentials: [{ name: 'empty', env: {} }] }],
  settings: [{ kind: 'settings', generation: 6, settings: { failureMode: 'retain_last_valid' } }],
  'relay-open': [{ kind: 'relay-open', id: 'r-1', target: { host: '127.0.0.1', port: 22 } }],
  withdraw: [
    { kind: 'withdraw', reason: 'superseded by a newer session' },
    { kind: 'withdraw', reason: 'another boundary process took this instance', code: 'superseded', bootId: 'boot-2' },
  ],
  status: [
    { kind: 'status', generation: 4, policyHash: HASH, state: 'effective' },
    { kind: 'status', generation: 4, policyHash: HASH, state: 'failed', error: { kind: 'policy', code: 'POLICY_INVALID', message: 'bad' } },
  ],
  events: [{ kind: 'events', events: [{ class_uid: 4001, message: 'x' }], dropped: 2 }],
  ack: [{ kind: 'ack' }],
};

describe('control message codec', () => {
  for (const kind of MESSAGE_KINDS) {
    it(`round-trips every ${kind} sample through encode and decode`, () => {
      for (const message of SAMPLES[kind]) {
        const line = encodeMessage(message);
        assert.ok(line.endsWith('\n'));
        assert.deepEqual(decodeMessage(line), message);
      }
    });
  }

  it('returns deep-frozen messages', () => {
    const decoded = decodeMessage(encodeMessage(SAMPLES.admitted[0]!));
    assert.ok(Object.isFrozen(decoded));
    assert.ok(Object.isFrozen((decoded as { settings: object }).settings));
  });

  it('rejects an unknown kind with CONTROL_MESSAGE_INVALID', () => {
    assert.throws(() => decodeMessage('{"kind":"teleport"}'), { code: 'CONTROL_MESSAGE_INVALID' });
  });

  it('rejects truncated JSON with CONTROL_MESSAGE_INVALID', () => {
    const line = encodeMessage(SAMPLES.attach[1]!);
    assert.throws(() => decodeMessage(line.slice(0, line.length / 2)), { code: 'CONTROL_MESSAGE_INVALID' });
  });

  it('rejects input over MAX_CONTROL_MESSAGE_BYTES with MESSAGE_TOO_LARGE on both encode and decode', () => {
    const huge = 'x'.repeat(MAX_CONTROL_MESSAGE_BYTES + 1);
    assert.throws(() => decodeMessage(huge), { code: 'MESSAGE_TOO_LARGE' });
    assert.throws(() => encodeMessage({ kind: 'policy', generation: 1, policyHash: HASH, policy: huge }), { code: 'MESSAGE_TOO_LARGE' });
  });

  it('lists every problem of a bad message in issues, with paths', () => {
    const bad = JSON.stringify({ kind: 'attach', sandboxId: '../etc', instanceId: 3, bootId: 'b', version: 'v', heldGeneration: -1, extra: 1 });
    assert.throws(
      () => decodeMessage(bad),
      (err: { code: string; issues: { path: string }[] }) => {
        assert.equal(err.code, 'CONTROL_MESSAGE_INVALID');
        assert.deepEqual(err.issues.map((i) => i.path).sort(), ['extra', 'heldGeneration', 'instanceId', 'sandboxId']);
        return true;
      },
    );
  });

  it('refuses a withdraw code outside WITHDRAW_CODES and a malformed boot id', () => {
    const bad = JSON.stringify({ kind: 'withdraw', reason: 'r', code: 'evicted', bootId: '../x' });
    assert.throws(
      () => decodeMessage(bad),
      (err: { code: string; issues: { path: string }[] }) => {
        assert.equal(err.code, 'CONTROL_MESSAGE_INVALID');
        assert.deepEqual(err.issues.map((i) => i.path).sort(), ['bootId', 'code']);
        return true;
      },
    );
  });

  it('refuses a kind that the reader did not expect', () => {
    assert.throws(() => decodeMessage(encodeMessage({ kind: 'ack' }), ['admitted', 'refused']), { code: 'CONTROL_MESSAGE_INVALID' });
  });

  it('never echoes a credential value in an issue', () => {
    const bad = JSON.stringify({ kind: 'credentials', generation: 1, credentialsHash: HASH, credentials: [{ name: 'x', env: { KEY: 'hunter2' }, extra: 'hunter2' }, { name: 'y', env: { K: 1 } }] });
    assert.throws(
      () => decodeMessage(bad),
      (err: Error & { issues: { message: string }[] }) => !JSON.stringify([err.message, err.issues]).includes('hunter2'),
    );
  });
});

describe('NDJSON stream codec', () => {
  it('decodes messages split across arbitrary chunk boundaries', async () => {
    const messages = [...SAMPLES.policy, ...SAMPLES['relay-open'], ...SAMPLES.withdraw];
    const bytes = Buffer.from(messages.map(encodeMessage).join('\n'));
    const chunks: Buffer[] = [];
    for (let offset = 0; offset < bytes.length; offset += 7) chunks.push(bytes.subarray(offset, offset + 7));
    const decoded: ControlMessage[] = [];
    for await (const message of decodeMessages(Readable.from(chunks))) decoded.push(message);
    assert.deepEqual(decoded, messages);
  });

  it('keeps a multi-byte character split between chunks intact', async () => {
    const message: ControlMessage = { kind: 'withdraw', reason: 'ünïcødé ✓' };
    const bytes = Buffer.from(encodeMessage(message));
    const split = bytes.indexOf(0xc3) + 1;
    const decoded: ControlMessage[] = [];
    for await (const m of decodeMessages(Readable.from([bytes.subarray(0, split), bytes.subarray(split)]))) decoded.push(m);
    assert.deepEqual(decoded, [message]);
  });

  it('reads messages as they are written to an in-memory stream', async () => {
    const stream = new PassThrough();
    const iterator = decodeMessages(stream)[Symbol.asyncIterator]();
    stream.write(encodeMessage(SAMPLES.policy[0]!));
    assert.deepEqual((await iterator.next()).value, SAMPLES.policy[0]);
    stream.write('\n');
    stream.write(encodeMessage(SAMPLES.settings[0]!));
    assert.deepEqual((await iterator.next()).value, SAMPLES.settings[0]);
    stream.end();
    assert.equal((await iterator.next()).done, true);
  });

  it('fails a stream that ends inside a message with CONTROL_MESSAGE_INVALID', async () => {
    const line = encodeMessage(SAMPLES.policy[0]!);
    await assert.rejects(async () => {
      for await (const _ of decodeMessages(Readable.from([line, line.slice(0, 10)]))) {
        // drain
      }
    }, { code: 'CONTROL_MESSAGE_INVALID' });
  });

  it('fails an oversized line with MESSAGE_TOO_LARGE before it has all arrived', async () => {
    let produced = 0;
    async function* endless() {
      // Bounded: the decoder must stop well before this runs out.
      for (let i = 0; i < 100; i += 1) {
        produced += 1;
        yield Buffer.alloc(1024, 0x61);
      }
    }
    await assert.rejects(async () => {
      for await (const _ of decodeMessages(endless(), { maxBytes: 4096 })) {
        // drain
      }
    }, { code: 'MESSAGE_TOO_LARGE' });
    assert.ok(produced <= 5);
  });

  it('rejects an unexpected kind on a typed stream', async () => {
    await assert.rejects(async () => {
      for await (const _ of decodeMessages(Readable.from([encodeMessage({ kind: 'ack' })]), { expect: ['policy'] })) {
        // drain
      }
    }, { code: 'CONTROL_MESSAGE_INVALID' });
  });

  it('reads a single-message body with a limit', async () => {
    assert.deepEqual(await readMessageBody(Readable.from([encodeMessage({ kind: 'ack' })])), { kind: 'ack' });
    await assert.rejects(readBody(Readable.from([Buffer.alloc(10), Buffer.alloc(10)]), 15), { code: 'MESSAGE_TOO_LARGE' });
  });
});

describe('bounded event buffer', () => {
  it('drops and counts events beyond its bound, and reports the drops in the next batch', async () => {
    const { createEventBuffer } = await import('../../src/control/events.js');
    const buffer = createEventBuffer({ maxEvents: 3, maxBatch: 2 });
    for (let i = 0; i < 5; i += 1) buffer.add({ n: i });
    assert.equal(buffer.size(), 3);
    const first = buffer.take();
    assert.ok(first);
    assert.deepEqual(decodeMessage(first.body), { kind: 'events', events: [{ n: 0 }, { n: 1 }], dropped: 2 });
    buffer.failed(first);
    const second = buffer.take();
    assert.ok(second);
    assert.deepEqual(decodeMessage(second.body), { kind: 'events', events: [{ n: 2 }], dropped: 4 });
    buffer.delivered(second);
    assert.equal(buffer.take(), undefined);
    assert.deepEqual(buffer.stats(), { sent: 1, dropped: 4 });
  });
});

describe('--relay-allow parsing', () => {
  it('accepts loopback ports and refuses anything else with CONFIG_INVALID', async () => {
    const { parseRelayAllow } = await import('../../src/control/relay.js');
    assert.deepEqual(parseRelayAllow('22, 127.0.0.1:8080,[::1]:2222'), [
      { host: '127.0.0.1', port: 22 },
      { host: '127.0.0.1', port: 8080 },
      { host: '::1', port: 2222 },
    ]);
    assert.throws(() => parseRelayAllow('10.0.0.1:22,70000'), { code: 'CONFIG_INVALID' });
  });
});
