// init-netns's DNS redirect end to end (root only), in a pod/outside namespace pair (netns-pair.ts): the pod's
// resolv.conf names a real DNS server outside (dnsmasq, standing in for the cluster DNS). After init-netns a
// workload uid asking it gets boundary's policy answers, boundary's own uid still gets dnsmasq's, and a second
// init-netns run (a restarted init container) leaves every rule exactly as the first run left it.

import assert from 'node:assert/strict';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { DEFAULT_DNS_PORT, DEFAULT_SYNTHETIC_CIDR, DNS_CHAIN, DNS_ZONE_CHAIN, FENCE_CHAIN } from '../../src/app/cli/init-netns.js';
import { dnsAddressOf, isDnsReady, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { policyYaml } from '../harness/control.js';
import { withStateDir } from '../harness/state-dir.js';
import { dig, isSynthetic, startDnsmasq } from '../harness/netns-dns.js';
import { asUid, createNetnsPair, type NetnsPair, netnsSkipReason } from '../harness/netns-pair.js';
import { stageBoundary } from '../harness/stage.js';

const BOUNDARY_UID = 10001;
const WORKLOAD_UID = 10002;

/** Everything init-netns may have touched, as iptables prints it. */
async function ruleSnapshot(pair: NetnsPair): Promise<string> {
  const tables = await Promise.all(
    [['iptables'], ['iptables', '-t', 'nat'], ['iptables', '-t', 'raw'], ['ip6tables']].map(([tool, ...table]) => pair.inPod(tool ?? '', '-w', ...table, '-S')),
  );
  return tables.map((table) => table.stdout).join('\n---\n');
}

it('redirects workload DNS to boundary, leaves the DNS of the boundary uid alone, and installs its rules only once', async (t) => {
  const reason = await netnsSkipReason(['iptables', 'ip6tables', 'setpriv', 'sysctl', 'dig', 'getent', 'dnsmasq']);
  if (reason !== undefined) {
    t.skip(`netns DNS redirect test skipped: ${reason}`);
    return;
  }
  // boundary's state dir is in dir: removed after boundary's own hook has stopped it.
  await withStateDir(t, 'boundary-dns-redirect-', (dir) => redirect(t, dir));
});

async function redirect(t: TestContext, dir: string): Promise<void> {
  const pair = await createNetnsPair(t, 'bd');
  try {
    await pair.inPod('iptables', '-w', '-t', 'nat', '-S', 'OUTPUT');
  } catch (err) {
    t.skip(`netns DNS redirect test skipped: iptables nat does not work in a namespace: ${(err as Error).message}`);
    return;
  }
  const files = { policy: join(dir, 'policy.yaml'), state: join(dir, 'state'), pid: join(dir, 'dnsmasq.pid') };
  // boundary's uid reads the policy and owns its state dir; nothing else of ours is writable to it.
  await chmod(dir, 0o755);
  await mkdir(files.state);
  await chown(files.state, BOUNDARY_UID, BOUNDARY_UID);
  await writeFile(files.policy, policyYaml('api.example.test'));
  await mkdir(pair.etc, { recursive: true });
  await writeFile(join(pair.etc, 'resolv.conf'), `nameserver ${pair.outsideIp}\noptions attempts:1 timeout:2\n`);
  await writeFile(join(pair.etc, 'hosts'), '127.0.0.1 localhost\n');
  const [staged] = await Promise.all([stageBoundary(), startDnsmasq(t, pair, files.pid)]);

  // Before init-netns the workload reaches dnsmasq: what follows is the redirect's doing.
  assert.deepEqual(await dig(pair, WORKLOAD_UID, 'api.example.test'), { status: 'NOERROR', answers: [pair.outsideIp] });

  const initNetns = [process.execPath, staged.main, 'init-netns', '--boundary-uid', String(BOUNDARY_UID)];
  const first = await pair.inPod(...initNetns);
  assert.match(first.stdout, new RegExp(`-j DNAT --to-destination 127\\.0\\.0\\.1:${DEFAULT_DNS_PORT}$`, 'm'));
  const afterFirst = await ruleSnapshot(pair);
  // A restarted init container: same rules, byte for byte, and one jump to each own chain (per table).
  await pair.inPod(...initNetns);
  assert.equal(await ruleSnapshot(pair), afterFirst);
  for (const [jump, count] of [
    [`-A OUTPUT -j ${DNS_CHAIN}`, 1],
    [`-A OUTPUT -j ${DNS_ZONE_CHAIN}`, 1],
    [`-A OUTPUT -j ${FENCE_CHAIN}`, 2],
  ] as const) {
    assert.equal(afterFirst.split('\n').filter((line) => line === jump).length, count, `${jump} in:\n${afterFirst}`);
  }

  // Default --dns-listen and upstream: policy DNS on 127.0.0.1:15053, its upstream the resolv.conf nameserver.
  const boundary = spawnBoundaryCli(['--policy', files.policy, '--state-dir', files.state, '--synthetic-cidr', DEFAULT_SYNTHETIC_CIDR], {
    prefix: ['ip', 'netns', 'exec', pair.pod, ...asUid(BOUNDARY_UID)],
    staged,
  });
  t.after(() => boundary.stop());
  assert.deepEqual(dnsAddressOf(await boundary.waitFor(isDnsReady)), { host: '127.0.0.1', port: DEFAULT_DNS_PORT });

  // (a) The workload (its own uid, and root, which is not exempt either) gets boundary's answers, UDP and TCP.
  for (const [uid, transport] of [
    [WORKLOAD_UID, 'udp'],
    [WORKLOAD_UID, 'tcp'],
    [undefined, 'udp'],
  ] as const) {
    const allowed = await dig(pair, uid, 'api.example.test', { transport });
    assert.equal(allowed.status, 'NOERROR', `${uid} ${transport}`);
    assert.ok(allowed.answers.length === 1 && allowed.answers.every(isSynthetic), `${uid} ${transport}: ${allowed.answers.join(',')}`);
    assert.deepEqual(await dig(pair, uid, 'denied.example.test', { transport }), { status: 'NXDOMAIN', answers: [] }, `${uid} ${transport}`);
  }
  const refusal = await boundary.waitFor((line) => (line.ocsf?.message ?? '').startsWith('DNS A denied.example.test NXDOMAIN'));
  assert.ok(refusal.ocsf !== undefined);
  // The libc resolver, as any program would use it.
  const getent = await pair.inPod(...asUid(WORKLOAD_UID), 'getent', 'hosts', 'api.example.test');
  const address = getent.stdout.trim().split(/\s+/)[0] ?? '';
  assert.ok(isSynthetic(address), getent.stdout);

  // (b) boundary's uid asks the same nameserver and gets dnsmasq's real answer, for any name.
  for (const transport of ['udp', 'tcp'] as const) {
    for (const name of ['api.example.test', 'denied.example.test']) {
      assert.deepEqual(await dig(pair, BOUNDARY_UID, name, { transport }), { status: 'NOERROR', answers: [pair.outsideIp] }, `${name} ${transport}`);
    }
  }
}
