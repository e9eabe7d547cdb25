import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAssemblyTimer, MESSAGE_IDLE_TIMEOUT_MS, MESSAGE_TOTAL_TIMEOUT_MS } from '../../src/websocket/assembly-timer.js';
import { createFrameBoundaryTracker } from '../../src/websocket/frame-boundary.js';
import {
  CLOSE_CODES,
  type ClientEvent,
  createClientFrameParser,
  decodeClose,
  encodeClose,
  encodeFrame,
  MAX_CLOSE_REASON_BYTES,
  MAX_FRAME_PAYLOAD_BYTES,
  MAX_MESSAGE_FRAGMENTS,
  OPCODES,
} from '../../src/websocket/ws-frames.js';

const KEY = Buffer.from([0x12, 0x34, 0x56, 0x78]);

function clientFrame(opcode: number, payload: string | Buffer, fin = true): Buffer {
  return encodeFrame({ fin, opcode, payload: typeof payload === 'string' ? Buffer.from(payload) : payload, maskKey: KEY });
}

function texts(events: readonly ClientEvent[]): string[] {
  return events.flatMap((e) => (e.kind === 'text' ? [e.text] : []));
}

describe('WebSocket client frame parser', () => {
  it('round-trips a masked text frame and keeps the raw bytes for forwarding', () => {
    const raw = clientFrame(OPCODES.text, 'hello');
    assert.equal((raw[1] as number) & 0x80, 0x80, 'the mask bit is set');
    assert.notEqual(raw.subarray(6).toString(), 'hello', 'the payload is masked on the wire');
    const result = createClientFrameParser().push(raw);
    assert.equal(result.error, undefined);
    assert.deepEqual(texts(result.events), ['hello']);
    const event = result.events[0];
    assert.ok(event?.kind === 'text');
    assert.deepEqual(Buffer.concat([...event.frames]), raw);
  });

  it('parses 7-bit, 16-bit and 64-bit payload lengths', () => {
    for (const size of [125, 126, 65_535, 65_536, 70_000]) {
      const payload = Buffer.alloc(size, 0x61);
      const raw = clientFrame(OPCODES.binary, payload);
      assert.equal((raw[1] as number) & 0x7f, size < 126 ? size : size < 65_536 ? 126 : 127);
      const [event] = createClientFrameParser().push(raw).events;
      assert.ok(event?.kind === 'binary');
      assert.deepEqual(event.frame.payload, payload, `size ${size}`);
    }
  });

  it('reassembles a frame delivered one byte at a time', () => {
    const parser = createClientFrameParser();
    const raw = clientFrame(OPCODES.text, 'x'.repeat(300));
    const events: ClientEvent[] = [];
    for (const byte of raw) events.push(...parser.push(Buffer.from([byte])).events);
    assert.deepEqual(texts(events), ['x'.repeat(300)]);
  });

  it('reassembles a fragmented text message with a ping and a pong between its fragments', () => {
    const parser = createClientFrameParser();
    const stream = Buffer.concat([
      clientFrame(OPCODES.text, 'hel', false),
      clientFrame(OPCODES.ping, 'p'),
      clientFrame(OPCODES.continuation, 'lo ', false),
      clientFrame(OPCODES.pong, ''),
      clientFrame(OPCODES.continuation, 'world', true),
    ]);
    const { events, error } = parser.push(stream);
    assert.equal(error, undefined);
    assert.deepEqual(
      events.map((e) => e.kind),
      ['text-fragment', 'control', 'text-fragment', 'control', 'text'],
    );
    assert.deepEqual(texts(events), ['hello world']);
    const message = events[4];
    assert.ok(message?.kind === 'text');
    assert.equal(message.frames.length, 3, 'the three data frames, not the control frames');
    assert.equal(parser.inMessage(), false);
  });

  it('yields binary frames one by one, continuation frames included', () => {
    const { events } = createClientFrameParser().push(
      Buffer.concat([clientFrame(OPCODES.binary, 'ab', false), clientFrame(OPCODES.continuation, 'cd', true)]),
    );
    assert.deepEqual(
      events.map((e) => e.kind),
      ['binary', 'binary'],
    );
  });

  it('keeps a text split inside a multi-byte character intact across fragments', () => {
    const bytes = Buffer.from('é€', 'utf8');
    const { events } = createClientFrameParser().push(
      Buffer.concat([clientFrame(OPCODES.text, bytes.subarray(0, 1), false), clientFrame(OPCODES.continuation, bytes.subarray(1))]),
    );
    assert.deepEqual(texts(events), ['é€']);
  });

  it('refuses an unmasked client frame with 1002', () => {
    const result = createClientFrameParser().push(encodeFrame({ opcode: OPCODES.text, payload: Buffer.from('hi') }));
    assert.equal(result.error?.code, CLOSE_CODES.protocolError);
  });

  it('refuses malformed frames with protocol errors and stays failed afterwards', () => {
    const cases: Array<[string, Buffer, number]> = [
      ['reserved bit', Buffer.from([0xc1, 0x80, 1, 2, 3, 4]), CLOSE_CODES.protocolError],
      ['reserved opcode', Buffer.from([0x83, 0x80, 1, 2, 3, 4]), CLOSE_CODES.protocolError],
      ['fragmented ping', clientFrame(OPCODES.ping, 'x', false), CLOSE_CODES.protocolError],
      ['long ping', clientFrame(OPCODES.ping, Buffer.alloc(126)), CLOSE_CODES.protocolError],
      ['stray continuation', clientFrame(OPCODES.continuation, 'x'), CLOSE_CODES.protocolError],
      ['non-minimal 16-bit length', Buffer.from([0x82, 0xfe, 0, 5, 1, 2, 3, 4, 0, 0, 0, 0, 0]), CLOSE_CODES.protocolError],
      ['64-bit length with the top bit', Buffer.from([0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0]), CLOSE_CODES.protocolError],
      ['close with one byte', clientFrame(OPCODES.close, Buffer.from([3])), CLOSE_CODES.protocolError],
      ['close with code 1005', clientFrame(OPCODES.close, Buffer.from([0x03, 0xed])), CLOSE_CODES.protocolError],
      ['invalid UTF-8 text', clientFrame(OPCODES.text, Buffer.from([0xc3, 0x28])), CLOSE_CODES.invalidPayload],
    ];
    for (const [name, bytes, code] of cases) {
      const parser = createClientFrameParser();
      assert.equal(parser.push(bytes).error?.code, code, name);
      assert.equal(parser.push(clientFrame(OPCODES.text, 'ok')).error?.code, code, `${name}: still failed`);
    }
  });

  it('refuses a new data frame inside a fragmented message', () => {
    const result = createClientFrameParser().push(
      Buffer.concat([clientFrame(OPCODES.binary, 'a', false), clientFrame(OPCODES.binary, 'b')]),
    );
    assert.equal(result.error?.code, CLOSE_CODES.protocolError);
    assert.equal(result.events.length, 1, 'the valid first fragment was still yielded');
  });

  it('refuses a frame over the size limit from its header, before buffering the payload', () => {
    const header = Buffer.alloc(14);
    header[0] = 0x82;
    header[1] = 0xff;
    header.writeBigUInt64BE(BigInt(MAX_FRAME_PAYLOAD_BYTES + 1), 2);
    const result = createClientFrameParser().push(header);
    assert.equal(result.error?.code, CLOSE_CODES.messageTooBig);
  });

  it('refuses a message with more fragments than allowed', () => {
    const parser = createClientFrameParser();
    const fragment = clientFrame(OPCODES.continuation, 'x', false);
    let result = parser.push(clientFrame(OPCODES.binary, 'x', false));
    for (let i = 1; i < MAX_MESSAGE_FRAGMENTS && result.error === undefined; i++) result = parser.push(fragment);
    assert.equal(result.error, undefined, `${MAX_MESSAGE_FRAGMENTS} fragments are allowed`);
    assert.equal(parser.push(fragment).error?.code, CLOSE_CODES.messageTooBig);
  });
});

describe('WebSocket frame encoders', () => {
  it('builds close frames with a code and a reason cut on a character boundary', () => {
    const frame = encodeClose(CLOSE_CODES.policyViolation, 'policy violation');
    assert.equal(frame[0], 0x88);
    assert.deepEqual(decodeClose(frame.subarray(2)), { code: 1008, reason: 'policy violation' });
    const long = encodeClose(1012, '€'.repeat(100));
    const { reason } = decodeClose(long.subarray(2));
    assert.ok(Buffer.byteLength(reason) <= MAX_CLOSE_REASON_BYTES);
    assert.equal(reason, '€'.repeat(41));
  });

  it('re-masks a rewritten text frame so the parser reads the new text back', () => {
    const rewritten = encodeFrame({ opcode: OPCODES.text, payload: Buffer.from('token=real'), maskKey: Buffer.from([9, 8, 7, 6]) });
    const result = createClientFrameParser().push(rewritten);
    assert.deepEqual(texts(result.events), ['token=real']);
    const masked = encodeClose(1008, '', KEY);
    const [close] = createClientFrameParser().push(masked).events;
    assert.ok(close?.kind === 'control');
    assert.equal(decodeClose(close.frame.payload).code, 1008);
  });
});

describe('server frame boundary tracker', () => {
  it('follows unmasked server frames of every length form across chunk splits', () => {
    const tracker = createFrameBoundaryTracker();
    const frames = [
      encodeFrame({ opcode: OPCODES.text, payload: Buffer.from('a') }),
      encodeFrame({ opcode: OPCODES.binary, payload: Buffer.alloc(300) }),
      encodeFrame({ opcode: OPCODES.binary, payload: Buffer.alloc(70_000) }),
      encodeFrame({ opcode: OPCODES.pong, payload: Buffer.alloc(0) }),
    ];
    for (const frame of frames) {
      tracker.feed(frame.subarray(0, 1));
      assert.equal(tracker.atBoundary(), false);
      const split = Math.max(frame.length - 1, 1);
      tracker.feed(frame.subarray(1, split));
      tracker.feed(frame.subarray(split));
      assert.equal(tracker.atBoundary(), true);
    }
  });

  it('says how many bytes finish the frame under way', () => {
    const tracker = createFrameBoundaryTracker();
    const a = encodeFrame({ opcode: OPCODES.text, payload: Buffer.from('hello') });
    const b = encodeFrame({ opcode: OPCODES.text, payload: Buffer.from('next') });
    tracker.feed(a.subarray(0, 3));
    assert.equal(tracker.untilBoundary(Buffer.from([])), -1);
    assert.equal(tracker.untilBoundary(Buffer.concat([a.subarray(3), b])), a.length - 3);
    assert.equal(tracker.atBoundary(), true);
    assert.equal(tracker.untilBoundary(b), 0);
  });
});

describe('message assembly timer', () => {
  it('fires the idle timeout when a fragmented message stalls, and not while fragments keep coming', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const fired: string[] = [];
    const timer = createAssemblyTimer({ onExpire: (which) => fired.push(which), timers: { setTimeout, clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) } });
    timer.fragment();
    t.mock.timers.tick(MESSAGE_IDLE_TIMEOUT_MS - 1);
    timer.fragment();
    t.mock.timers.tick(MESSAGE_IDLE_TIMEOUT_MS - 1);
    assert.deepEqual(fired, []);
    t.mock.timers.tick(1);
    assert.deepEqual(fired, ['idle']);
    t.mock.timers.tick(MESSAGE_TOTAL_TIMEOUT_MS);
    assert.deepEqual(fired, ['idle'], 'fires once');
  });

  it('fires the total timeout for a message that trickles in forever, and never after clear()', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const fired: string[] = [];
    const timers = { setTimeout, clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout) };
    const timer = createAssemblyTimer({ onExpire: (which) => fired.push(which), timers });
    const steps = Math.ceil(MESSAGE_TOTAL_TIMEOUT_MS / (MESSAGE_IDLE_TIMEOUT_MS / 2));
    for (let i = 0; i < steps && fired.length === 0; i++) {
      timer.fragment();
      t.mock.timers.tick(MESSAGE_IDLE_TIMEOUT_MS / 2);
    }
    assert.deepEqual(fired, ['total']);
    const cleared = createAssemblyTimer({ onExpire: (which) => fired.push(`cleared ${which}`), timers });
    cleared.fragment();
    cleared.clear();
    t.mock.timers.tick(MESSAGE_TOTAL_TIMEOUT_MS);
    assert.deepEqual(fired, ['total']);
  });
});
