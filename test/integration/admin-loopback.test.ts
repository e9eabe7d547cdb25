// The admin port as a pod exposes it (root only): boundary listens on 0.0.0.0 in a "pod" network namespace, as
// deploy/kubernetes/sandbox-pod.yaml says. From the "outside" namespace (Prometheus, the kubelet) /metrics, /healthz
// and /readyz answer and /v1/explain and /v1/denials are 403 ADMIN_LOOPBACK_ONLY; inside the pod on 127.0.0.1
// (the agent) they answer, while the same pod calling its own pod IP is not loopback and is refused.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { createNetnsPair, netnsSkipReason } from '../harness/netns-pair.js';

const POLICY = 'version: 1\nnetwork_policies:\n  api:\n    endpoints: [{ host: api.example.test, port: 443 }]\n    binaries: [{ path: "/**" }]\n';
const EXPLAIN = `/v1/explain?url=${encodeURIComponent('https://api.example.test/')}`;

it('serves explain and denials to loopback callers only, health and metrics to anyone', { timeout: 120_000 }, async (t: TestContext) => {
  const reason = await netnsSkipReason(['curl']);
  if (reason !== undefined) {
    t.skip(`admin loopback test skipped: ${reason}`);
    return;
  }
  // boundary's state dir is in dir: removed after boundary's own hook has stopped it.
  await withStateDir(t, 'boundary-admin-loopback-', (dir) => adminLoopback(t, dir));
});

async function adminLoopback(t: TestContext, dir: string): Promise<void> {
  const pair = await createNetnsPair(t, 'al');
  await writeFile(join(dir, 'policy.yaml'), POLICY);
  const cli = spawnBoundaryCli(
    [
      '--policy', join(dir, 'policy.yaml'),
      '--proxy-listen', '127.0.0.1:0',
      '--admin-listen', '0.0.0.0:9901',
      '--dns-listen', '127.0.0.1:0',
      '--upstream-dns', `${pair.outsideIp}:53`,
      '--state-dir', join(dir, 'state'),
      '--capture', 'off',
    ],
    { prefix: ['ip', 'netns', 'exec', pair.pod] },
  );
  t.after(() => cli.stop());
  await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));

  /** HTTP status and body of GET path, from inside `ns`, to `host`'s admin port. */
  const get = async (inNs: typeof pair.inPod, host: string, path: string): Promise<{ status: number; body: string }> => {
    const { stdout } = await inNs('curl', '-sS', '--max-time', '5', '-w', '\n%{http_code}', `http://${host}:9901${path}`);
    const cut = stdout.lastIndexOf('\n');
    return { status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) };
  };

  for (const path of ['/metrics', '/healthz', '/readyz']) {
    assert.equal((await get(pair.inOutside, pair.podIp, path)).status, 200, `${path} from outside the pod`);
  }
  for (const [who, inNs, host] of [
    ['outside the pod', pair.inOutside, pair.podIp],
    ['the pod, through its own pod IP', pair.inPod, pair.podIp],
  ] as const) {
    for (const path of [EXPLAIN, '/v1/denials']) {
      const refused = await get(inNs, host, path);
      assert.equal(refused.status, 403, `${path} from ${who}: ${refused.body}`);
      assert.equal((JSON.parse(refused.body) as { error?: string }).error, 'ADMIN_LOOPBACK_ONLY');
    }
  }
  const explained = await get(pair.inPod, '127.0.0.1', EXPLAIN);
  assert.equal(explained.status, 200, explained.body);
  assert.equal((JSON.parse(explained.body) as { verdict?: string }).verdict, 'allow');
  assert.equal((await get(pair.inPod, '127.0.0.1', '/v1/denials')).status, 200);
}
