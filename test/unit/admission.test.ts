import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { createAdmission, FIRST_BYTE_SWEEP_INTERVAL_MS, perSourceLimit } from '../../src/proxy/admission.js';
import type { AdmissionListener, RefusedConnectionReason } from '../../src/chain/events.js';

/** The parts of a net.Socket admission reads: its address, byte counts, 'close' and destroy(). */
class FakeSocket extends EventEmitter {
  bytesRead = 0;
  bytesWritten = 0;
  destroyed = false;
  readonly remoteAddress: string;
  constructor(remoteAddress: string) {
    super();
    this.remoteAddress = remoteAddress;
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close', false);
  }
}

function fakeMetrics() {
  const refused: RefusedConnectionReason[] = [];
  const timeouts: AdmissionListener[] = [];
  let sources: () => number = () => -1;
  return {
    refused,
    timeouts,
    sources: () => sources(),
    metrics: {
      refusedConnections: { inc: (labels: { reason: RefusedConnectionReason }) => refused.push(labels.reason) },
      firstByteTimeouts: { inc: (labels: { listener: AdmissionListener }) => timeouts.push(labels.listener) },
      watchSources: (_listener: AdmissionListener, count: () => number) => {
        sources = count;
      },
    },
  };
}

/** Bounds a hang only: polls until `done` holds. */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !done(); waited += 10) {
    if (waited > 30_000) assert.fail(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function admission(options: { max: number; percent?: number; firstByteMs?: number; eitherWay?: boolean }) {
  const m = fakeMetrics();
  const a = createAdmission({
    listener: 'proxy',
    maxConnections: options.max,
    perSourcePercent: options.percent ?? 50,
    firstByteTimeoutMs: options.firstByteMs ?? 5_000,
    eitherWay: options.eitherWay ?? false,
    metrics: m.metrics,
  });
  const admit = (ip: string): { socket: FakeSocket; result: string } => {
    const socket = new FakeSocket(ip);
    return { socket, result: a.admit(socket as unknown as Socket) };
  };
  return { a, m, admit };
}

describe('admission', () => {
  it('gives each source its share of the limit, at least one connection and never more than the limit', () => {
    assert.equal(perSourceLimit(4_096, 50), 2_048);
    assert.equal(perSourceLimit(3, 50), 1);
    assert.equal(perSourceLimit(1, 50), 1);
    assert.equal(perSourceLimit(10, 250), 10);
  });

  it('refuses a source beyond its share while other sources still get in, and counts the refusals', () => {
    const { a, m, admit } = admission({ max: 4 });
    assert.deepEqual([admit('10.0.0.2').result, admit('10.0.0.2').result, admit('10.0.0.2').result], ['admitted', 'admitted', 'too-many-connections-from-source']);
    assert.deepEqual([admit('10.0.0.3').result, admit('10.0.0.4').result, admit('10.0.0.5').result], ['admitted', 'admitted', 'too-many-connections']);
    assert.deepEqual(m.refused, ['too-many-connections-from-source', 'too-many-connections']);
    assert.equal(a.open(), 4);
    assert.equal(m.sources(), 3);
  });

  it('gives a closed connection back to its source', () => {
    const { a, m, admit } = admission({ max: 4 });
    const first = admit('10.0.0.2');
    admit('10.0.0.2');
    first.socket.destroy();
    assert.equal(a.open(), 1);
    assert.equal(admit('10.0.0.2').result, 'admitted');
    for (const socket of [...a.sockets()]) socket.destroy();
    assert.equal(m.sources(), 0);
  });

  it('reaps a silent connection after the first-byte timeout, at most one sweep late, and only it', (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const { a, m, admit } = admission({ max: 8, percent: 100, firstByteMs: 2_500 });
    a.start();
    t.after(() => a.stop());
    const mute = admit('10.0.0.2').socket;
    const talker = admit('10.0.0.2').socket;
    talker.bytesRead = 1;
    t.mock.timers.tick(2_500);
    assert.equal(mute.destroyed, false, 'not before the timeout');
    t.mock.timers.tick(FIRST_BYTE_SWEEP_INTERVAL_MS);
    assert.equal(mute.destroyed, true, 'within one sweep after it');
    assert.equal(talker.destroyed, false);
    assert.deepEqual(m.timeouts, ['proxy']);
  });

  it('on a capture listener, takes a byte sent to the client as the end of the wait too', (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const { a, admit } = admission({ max: 8, percent: 100, firstByteMs: 1_000, eitherWay: true });
    a.start();
    t.after(() => a.stop());
    const greeted = admit('10.0.0.2').socket;
    greeted.bytesWritten = 12;
    const mute = admit('10.0.0.2').socket;
    t.mock.timers.tick(3 * FIRST_BYTE_SWEEP_INTERVAL_MS);
    assert.deepEqual([greeted.destroyed, mute.destroyed], [false, true]);
  });

  it('holds a sweep timer only while a connection is silent', async (t) => {
    // Real timers: Node 20's mocked setInterval keeps running after clearInterval() from its own callback.
    const arms = t.mock.method(globalThis, 'setInterval');
    const clears = t.mock.method(globalThis, 'clearInterval');
    const { a, admit } = admission({ max: 8, percent: 100, firstByteMs: 50 });
    a.start();
    t.after(() => a.stop());
    assert.equal(arms.mock.callCount(), 0, 'an idle listener has no timer');
    const talker = admit('10.0.0.2').socket;
    assert.equal(arms.mock.callCount(), 1);
    talker.bytesRead = 1;
    await until(() => clears.mock.callCount() === 1, 'the timer gone once no connection is silent');
    const mute = admit('10.0.0.3').socket;
    assert.equal(arms.mock.callCount(), 2, 'armed again by the next admission');
    await until(() => mute.destroyed, 'the silent connection reaped');
    await until(() => clears.mock.callCount() === 2, 'the timer gone again');
    assert.equal(talker.destroyed, false);
  });
});
