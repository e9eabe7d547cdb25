// Regression of issue 16, "Exhaustion" (`issues show 16`), capture side: addresses now change hands after a
// quarantine, so a connection accepted on a synthetic address must keep it from every other name for as long as it
// is open, however long that outlives the mapping (capture-listeners.ts takes a pool hold per accepted connection).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { SYNTHETIC_QUARANTINE_MS } from '../../src/net/synthetic-budget.js';
import { startBoundary } from '../harness/boundary.js';
import { testClock } from '../harness/clock.js';
import { buildQuery, rcodeOf, udpQuery } from '../harness/dns-client.js';
import { echoRoundTrip } from '../harness/liveness.js';
import { echoServer } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

describe('issue 16: a captured connection keeps its synthetic address', () => {
  it('never hands the address of an open connection to another name, and hands it on after the quarantine', async (t) => {
    const clock = testClock();
    const echo = await echoServer();
    t.after(() => echo.close());
    const names: Record<string, { addresses: string[]; ttlSeconds: number }> = {};
    for (let i = 0; i < 700; i++) names[`n${i}.example.test`] = { addresses: ['127.0.0.1'], ttlSeconds: 1 };
    const b = await startBoundary({
      now: clock.now,
      // 256-address windows, so they change hands within a few simulated minutes.
      syntheticCidr: '127.77.0.0/20',
      names: { 'held.example.test': { addresses: ['127.0.0.1'], ttlSeconds: 1 }, ...names },
      policy: `version: 1
network_policies:
  tools:
    endpoints:
      - { host: "*.example.test", port: ${echo.port}, protocol: tcp }
    binaries: [{ path: "/**" }]
`,
    });
    t.after(() => b.close());
    const pool = b.boundary.transparent.pool()!;
    const ask = async (name: string) => {
      const reply = await udpQuery(b.dnsPort!, buildQuery(name));
      return { rcode: rcodeOf(reply), ip: String((reply.answers?.[0] as { data?: unknown } | undefined)?.data ?? '') };
    };
    const held = await ask('held.example.test');
    assert.equal(held.rcode, 'NOERROR');
    const socket = connect({ host: held.ip, port: echo.port });
    socket.on('error', () => undefined);
    await withinDeadline(once(socket, 'connect'), 'the captured connection');
    const echoed = (text: string) => withinDeadline(echoRoundTrip(socket, text), 'the echo through the held connection');
    assert.equal(await echoed('before'), 'before');
    // Ten simulated minutes of other names, one every 2 s (within this window's budget), swept as the tick would.
    const given = new Map<string, number>();
    let n = 0;
    const nextName = async (): Promise<string> => {
      clock.advance(2_000);
      pool.sweep();
      const answer = await ask(`n${n++}.example.test`);
      assert.equal(answer.rcode, 'NOERROR', `n${n - 1}.example.test`);
      given.set(answer.ip, (given.get(answer.ip) ?? 0) + 1);
      return answer.ip;
    };
    for (let i = 0; i < 320; i++) assert.notEqual(await nextName(), held.ip, `given to n${n - 1} while the connection is open`);
    assert.ok([...given.values()].some((count) => count > 1), 'the other addresses were reused meanwhile');
    assert.equal(await echoed('after'), 'after', 'the connection still works');
    socket.destroy();
    const closedAt = clock.now();
    // Oldest first: the address comes back once every address that entered quarantine before it has (256 at most).
    let reused = false;
    for (let i = 0; i < 300 && !reused; i++) reused = (await nextName()) === held.ip;
    assert.ok(reused, 'once closed, the address comes back after its quarantine');
    assert.ok(clock.now() - closedAt >= SYNTHETIC_QUARANTINE_MS);
  });
});

