// boundary's own DNS and the workload's redirected DNS never share a conntrack entry (root only).
//
// init-netns DNATs every other uid's port-53 traffic to policy DNS, but conntrack matches a packet to an existing
// entry before any nat rule sees it. Once the workload had asked from source port P, boundary's own next query from
// P was redirected to boundary's own policy DNS and waited on itself until the upstream timeout: the workload got
// SERVFAIL, or a 502 through the proxy. The other way round, a workload query from a port boundary had just used
// matched boundary's entry, skipped the redirect, and was rejected by the fence.
//
// As a workload would do it: queries from the ports boundary will use. The pod's ephemeral range is narrowed to a
// few ports, so boundary's random source port is certain to be one of them.

import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DEFAULT_BOUNDARY_UID as BOUNDARY_UID } from '../../src/app/cli/init-netns.js';
import { isDnsReady } from '../harness/cli-boundary.js';
import { dig, isSynthetic, startDnsPod } from '../harness/netns-dns.js';
import { netnsSkipReason } from '../harness/netns-pair.js';

const WORKLOAD_UID = 10002;
/** The pod's whole ephemeral range: every source port boundary's resolver can be given. */
const PORTS = [40_000, 40_001, 40_002, 40_003];

it('keeps boundary’s own DNS and the redirected workload DNS apart, whichever used a source port first', async (t) => {
  const reason = await netnsSkipReason(['iptables', 'ip6tables', 'setpriv', 'sysctl', 'dig', 'dnsmasq']);
  if (reason !== undefined) {
    t.skip(`DNS conntrack zone test skipped: ${reason}`);
    return;
  }
  const { pair, startBoundary } = await startDnsPod(t, 'dz');
  await pair.inPod('sysctl', '-qw', `net.ipv4.ip_local_port_range=${PORTS[0]} ${PORTS.at(-1)}`);

  const boundary = startBoundary();
  await boundary.waitFor(isDnsReady);

  // (a) The workload asks from every port of the range; each query is redirected and leaves its entry. The name is
  // one policy refuses, answered without any upstream lookup, so boundary's uid has used none of these ports yet.
  for (const port of PORTS) {
    assert.deepEqual(await dig(pair, WORKLOAD_UID, 'denied.other.test', { sourcePort: port }), { status: 'NXDOMAIN', answers: [] }, `workload from ${port}`);
  }
  // boundary's resolver, on whichever of those ports it is given, still reaches the nameserver: a name it has not
  // resolved yet (a wildcard entry: policy DNS asks upstream first) gets its synthetic answer, not SERVFAIL.
  const fresh = await dig(pair, WORKLOAD_UID, 'fresh.example.test');
  assert.ok(fresh.status === 'NOERROR' && fresh.answers.length === 1 && fresh.answers.every(isSynthetic), `boundary's upstream lookup: ${JSON.stringify(fresh)}`);
  // boundary's uid asking from the workload's ports gets the nameserver's answer, not its own policy DNS's.
  for (const port of PORTS) {
    assert.deepEqual(await dig(pair, BOUNDARY_UID, 'api.example.test', { sourcePort: port }), { status: 'NOERROR', answers: [pair.outsideIp] }, `boundary uid from ${port}`);
  }

  // (b) The other way round: ports boundary's uid has just used. The workload is still redirected to policy DNS.
  for (const port of PORTS) {
    const answer = await dig(pair, WORKLOAD_UID, `b${port}.example.test`, { sourcePort: port });
    assert.ok(answer.status === 'NOERROR' && answer.answers.every(isSynthetic), `workload after boundary from ${port}: ${JSON.stringify(answer)}`);
  }
});
