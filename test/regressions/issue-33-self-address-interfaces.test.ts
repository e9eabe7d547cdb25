// A listener on 0.0.0.0 is boundary's own through the pod's address too (root only).
//
// The self-address check took a listener on an unspecified address to stand for every loopback address on its
// port, not for the pod's own interface address. With `--admin-listen 0.0.0.0:9901` (a Prometheus scraping from
// outside the pod) and a policy that opens the pod's address, a workload's request through the proxy to
// <pod ip>:9901 reached boundary's own admin listener. As a workload does it: curl through the proxy, in a pod
// namespace with a real interface address.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { isDnsReady, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { createNetnsPair, netnsSkipReason } from '../harness/netns-pair.js';

const ADMIN_PORT = 9901;
const CLOSED_PORT = 9902;

it('refuses the pod’s own address on a wildcard listener’s port as self-address, through the proxy', async (t) => {
  const reason = await netnsSkipReason(['curl']);
  if (reason !== undefined) {
    t.skip(`self-address interface test skipped: ${reason}`);
    return;
  }
  // boundary's state dir is in dir: removed after boundary's own hook has stopped it.
  await withStateDir(t, 'boundary-self-address-', (dir) => selfAddress(t, dir));
});

async function selfAddress(t: TestContext, dir: string): Promise<void> {
  const pair = await createNetnsPair(t, 'sa');
  // The pod's address, declared as an IP literal: the policy opens it on both ports.
  await writeFile(
    join(dir, 'policy.yaml'),
    `version: 1\nnetwork_policies:\n  pod:\n    name: pod\n    endpoints:\n      - host: "${pair.podIp}"\n        ports: [${ADMIN_PORT}, ${CLOSED_PORT}]\n    binaries: [{ path: "/**" }]\n`,
  );
  const boundary = spawnBoundaryCli(
    ['--policy', join(dir, 'policy.yaml'), '--state-dir', join(dir, 'state'), '--admin-listen', `0.0.0.0:${ADMIN_PORT}`, '--upstream-dns', '127.0.0.1:9'],
    { prefix: ['ip', 'netns', 'exec', pair.pod] },
  );
  t.after(() => boundary.stop());
  await boundary.waitFor(isDnsReady);

  const through = (port: number) =>
    pair
      .inPod('curl', '-sS', '--max-time', '30', '-w', '\n%{http_code}', '-x', 'http://127.0.0.1:3128', `http://${pair.podIp}:${port}/metrics`)
      .catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  const self = await through(ADMIN_PORT);
  assert.equal(self.stdout.split('\n').at(-1), '403', self.stdout);
  assert.match(self.stdout, /ssrf_denied/);
  assert.match(self.stdout, /self-address/);
  // The policy does open the address: on a port nothing listens on, the proxy dials it and is refused.
  const closed = await through(CLOSED_PORT);
  assert.equal(closed.stdout.split('\n').at(-1), '502', closed.stdout);
}
