// Issue 33: boundary's own upstream DNS query that a redirect sends back to policy DNS fails at once as dns-loop
// (docs/dns.md#a-query-that-comes-back), also when the kernel hands it to a replay worker's socket (--dns-workers).
// A worker holding the name replayed the name's synthetic address to boundary as the nameserver's answer; now it
// passes a datagram from the source port of one of boundary's own exchanges in flight to the main thread. On the
// image's Node (22: dgram reusePort), in test/harness/dns-workers-child.ts: policy DNS with two workers on loopback,
// and an upstream resolver whose nameserver is that policy DNS, as behind a redirect that does not exempt boundary.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { it } from 'node:test';
import { PROJECT_ROOT } from '../harness/cli-boundary.js';
import { buildQuery, rcodeOf, udpQuery } from '../harness/dns-client.js';
import { imageNode } from '../harness/image-node.js';

/** The one name the child's policy allows. */
const CHILD_NAME = 'api.example.test';
/** Lookups that come back, each from a new source port: SO_REUSEPORT hands about 2 in 3 to a worker. */
const OWN_QUERY_LOOKUPS = 16;
/** Workload queries until a worker has replayed the name: a hang bound (merges are reported every 100 ms). */
const MAX_WORKLOAD_QUERIES = 2_000;

it('fails boundary’s own query as dns-loop when a replay worker receives it, and never replays it the name’s answer', async (t) => {
  let node: string;
  try {
    node = (await imageNode(join(PROJECT_ROOT, 'Dockerfile'))).path;
  } catch {
    return t.skip('the image Node (npm package node@22) is not installable here');
  }
  const child = spawn(node, ['--import', 'tsx', join(PROJECT_ROOT, 'test/harness/dns-workers-child.ts')], { cwd: PROJECT_ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  async function ask(command?: string): Promise<Record<string, unknown>> {
    if (command !== undefined) child.stdin.write(`${command}\n`);
    const line = await lines.next();
    if (line.done === true) throw new Error('the child ended');
    return JSON.parse(line.value) as Record<string, unknown>;
  }
  const port = Number((await ask()).port);

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
