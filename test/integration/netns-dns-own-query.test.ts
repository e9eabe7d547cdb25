// A DNS redirect that catches boundary's own queries too (root only): a rule written by hand, without init-netns's
// owner match, in a real pod namespace with a real nameserver. boundary's upstream query then arrives at its own
// policy DNS; it must fail at once as dns-loop with the fix in its message, for the workload's lookup and for a
// request through the proxy, instead of waiting on itself until the upstream timeout (docs/dns.md#a-query-that-comes-back).
// Over TCP too: a rule that catches TCP only, and a name whose answer does not fit in UDP, which boundary asks again
// over TCP.

import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import { DEFAULT_DNS_PORT, DNS_CHAIN } from '../../src/app/cli/init-netns.js';
import { type BoundaryCli, isDnsReady, type LogLine } from '../harness/cli-boundary.js';
import { dig, startDnsPod } from '../harness/netns-dns.js';
import { asUid, type NetnsPair, netnsSkipReason } from '../harness/netns-pair.js';

const WORKLOAD_UID = 10002;
const PROXY_PORT = 3128;
const ADMIN_PORT = 9901;
const LOOP_MESSAGE = /the query to 10\.231\.\d+\.2:53 from port \d+ came back to boundary's policy DNS: exempt boundary's uid from the DNS redirect \(docs\/dns\.md, A query that comes back\)$/;
/** A's of one name past what fits in boundary's EDNS size upstream (1,232 bytes): dnsmasq answers it truncated over UDP. */
const BIG_ANSWER_ADDRESSES = 100;

const unmapped = (line: LogLine): Record<string, unknown> => (line.ocsf?.unmapped ?? {}) as Record<string, unknown>;

/**
 * A pod (startDnsPod, `hosts` for dnsmasq) whose DNS chain starts with a hand-written redirect of every uid's
 * `protocol` port-53 traffic to policy DNS, boundary's own included, and boundary running in it; undefined (the test
 * skipped) where namespaces cannot be made.
 */
async function loopedPod(t: TestContext, tag: string, protocol: 'udp' | 'tcp', hosts?: string): Promise<{ pair: NetnsPair; boundary: BoundaryCli } | undefined> {
  const reason = await netnsSkipReason(['iptables', 'ip6tables', 'setpriv', 'dig', 'dnsmasq', 'curl']);
  if (reason !== undefined) {
    t.skip(`DNS loop test skipped: ${reason}`);
    return undefined;
  }
  const { pair, startBoundary } = await startDnsPod(t, tag, hosts);
  await pair.inPod('iptables', '-t', 'nat', '-I', DNS_CHAIN, '1', '-p', protocol, '--dport', '53', '-j', 'DNAT', '--to-destination', `127.0.0.1:${DEFAULT_DNS_PORT}`);
  const boundary = startBoundary();
  await boundary.waitFor(isDnsReady);
  return { pair, boundary };
}

it('fails boundary’s redirected upstream lookups at once as dns-loop, for policy DNS and for the proxy', async (t) => {
  const pod = await loopedPod(t, 'dl', 'udp');
  if (pod === undefined) return;
  const { pair, boundary } = pod;

  // The workload's lookup of a name policy DNS must resolve upstream: SERVFAIL, and the event names the loop. dig
  // waits 2 s, the upstream timeout: a policy DNS waiting on itself leaves it without any answer.
  assert.deepEqual(await dig(pair, WORKLOAD_UID, 'fresh.example.test'), { status: 'SERVFAIL', answers: [] });
  const refusal = await boundary.waitFor((line) => line.ocsf?.status_detail === 'policy_dns_upstream_dns_loop');
  assert.match(refusal.ocsf?.message ?? '', LOOP_MESSAGE);
  // What an operator's alert reads: a loop of its own, not an upstream failure.
  const metrics = await pair.inPod('curl', '-sS', `http://127.0.0.1:${ADMIN_PORT}/metrics`);
  assert.match(metrics.stdout, /^boundary_dns_queries_total\{rcode="SERVFAIL",outcome="dns-loop"\} 1$/m);

  // Through the proxy: a CONNECT to another allowed name is a 502, and its event carries the same message.
  const curl = await pair
    .inPod(...asUid(WORKLOAD_UID), 'curl', '-sS', '-o', '/dev/null', '-w', '%{http_connect}', '--max-time', '30', '-x', `http://127.0.0.1:${PROXY_PORT}`, 'https://proxied.example.test/')
    .catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  assert.equal(curl.stdout, '502');
  const failed = await boundary.waitFor((line) => unmapped(line).reason_code === 'resolve-failed');
  assert.match(String(unmapped(failed).reason ?? failed.ocsf?.message), LOOP_MESSAGE);
});

it('fails boundary’s lookup as dns-loop when only its TCP retry of a truncated answer is redirected', async (t) => {
  // init-netns exempts boundary's UDP and TCP; the rule ahead of its rules catches every uid's TCP only.
  const hosts = Array.from({ length: BIG_ANSWER_ADDRESSES }, (_, i) => `10.232.${Math.floor(i / 250)}.${(i % 250) + 1} big.example.test\n`).join('');
  const pod = await loopedPod(t, 'dt', 'tcp', hosts);
  if (pod === undefined) return;
  const { pair, boundary } = pod;

  // Over UDP the workload's lookup reaches policy DNS and boundary's reaches dnsmasq, truncated; boundary's TCP retry
  // comes back. dig waits 2 s, the upstream timeout: a policy DNS waiting on itself leaves it without any answer.
  assert.deepEqual(await dig(pair, WORKLOAD_UID, 'big.example.test'), { status: 'SERVFAIL', answers: [] });
  const refusal = await boundary.waitFor((line) => line.ocsf?.status_detail === 'policy_dns_upstream_dns_loop');
  assert.match(refusal.ocsf?.message ?? '', LOOP_MESSAGE);
  // A name whose answer fits in UDP is resolved as before: the rule catches only the TCP retry.
  const small = await dig(pair, WORKLOAD_UID, 'small.example.test');
  assert.equal(small.status, 'NOERROR');
  assert.equal(small.answers.length, 1);
});
