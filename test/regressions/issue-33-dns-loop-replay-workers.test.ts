// Issue 33: boundary's own upstream DNS query that a redirect sends back to policy DNS fails at once as dns-loop
// (docs/dns.md#a-query-that-comes-back), also when the kernel hands it to a replay worker's socket (--dns-workers).
// A worker holding the name replayed the name's synthetic address to boundary as the nameserver's answer; now it
// passes a datagram from the source port of one of boundary's own exchanges in flight to the main thread. On the
// image's Node (22: dgram reusePort), in test/harness/dns-workers-child.ts: policy DNS with two workers on loopback,
// and an upstream resolver whose nameserver is that policy DNS, as behind a redirect that does not exempt boundary.

import assert from 'node:assert/strict';
import { it } from 'node:test';
import { buildQuery, rcodeOf, udpQuery } from '../harness/dns-client.js';
import { startWorkersChild } from '../harness/dns-workers-driver.js';

/** The one name the child's policy allows. */
const CHILD_NAME = 'api.example.test';
/** Lookups that come back, each from a new source port: SO_REUSEPORT hands about 2 in 3 to a worker. */
const OWN_QUERY_LOOKUPS = 16;
/** Workload queries until a worker has replayed the name: a hang bound (merges are reported every 100 ms). */
const MAX_WORKLOAD_QUERIES = 2_000;

it('fails boundary’s own query as dns-loop when a replay worker receives it, and never replays it the name’s answer', async (t) => {
  const child = await startWorkersChild();
  if (child === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
  t.after(() => child.kill());
  const { port, ask } = child;

  // The workload asks with EDNS, as dig does and as boundary asks upstream, until a worker replays the answer: the
  // workers now hold the very question boundary's own lookup asks.
  const workload = buildQuery(CHILD_NAME, 'A', { edns: 1232 });
  for (let sent = 0; Number((await ask('stats')).replayed) === 0; sent++) {
    assert.ok(sent < MAX_WORKLOAD_QUERIES, 'a worker replayed the answer');
    assert.equal(rcodeOf(await udpQuery(port, workload)), 'NOERROR');
  }

  const { failures, passed } = (await ask(`loop ${OWN_QUERY_LOOKUPS}`)) as { failures: string[]; passed: number };
  assert.deepEqual(failures, new Array<string>(OWN_QUERY_LOOKUPS).fill('dns-loop'), 'never answered with boundary’s own synthetic address');
  assert.ok(passed > 0, 'a worker received some of them, and passed them to the main thread');
  assert.equal((await ask('close')).closed, true);
});
