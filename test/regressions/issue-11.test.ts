// Regressions of issue 11 (the shipped Kubernetes pod could not work): `issues show 11`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode } from 'dns-packet';
import { resolvSearchDomains } from '../../src/app/cli/run.js';
import { startBoundary } from '../harness/boundary.js';
import { buildQuery, rcodeOf, udpExchange } from '../harness/dns-client.js';

// What the kubelet writes for a pod in namespace "default" with dnsPolicy ClusterFirst.
const CLUSTER_FIRST = 'search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n';
const POLICY = `version: 1
network_policies:
  api:
    endpoints: [{ host: api.example.test, port: 443 }]
    binaries: [{ path: "/**" }]
`;

describe('issue 11 regressions', () => {
  it('reads the search list of a ClusterFirst resolv.conf (the last search or domain line wins)', () => {
    assert.deepEqual(resolvSearchDomains(CLUSTER_FIRST), ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local']);
    assert.deepEqual(resolvSearchDomains('domain a.example\nsearch B.example. c.example\n'), ['b.example', 'c.example']);
    assert.deepEqual(resolvSearchDomains('nameserver 10.0.0.1\n'), []);
  });

  it('lets a stub resolver walk a ClusterFirst search list to an allowed name (ndots:5)', async (t) => {
    const b = await startBoundary({ policy: POLICY, searchDomains: resolvSearchDomains(CLUSTER_FIRST) });
    t.after(() => b.close());
    assert.ok(b.dnsPort !== undefined);
    // musl asks each search candidate in turn and gives up at the first answer that is not NXDOMAIN or
    // NODATA: before the fix the first candidate was REFUSED and the name never resolved.
    const walk: string[] = [];
    for (const candidate of ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local', ''].map((d) => (d === '' ? 'api.example.test' : `api.example.test.${d}`))) {
      const reply = await udpExchange(b.dnsPort, buildQuery(candidate));
      assert.ok(reply !== undefined, `an answer for ${candidate}`);
      const packet = decode(reply);
      walk.push(`${candidate} ${rcodeOf(packet)}`);
      if (rcodeOf(packet) !== 'NXDOMAIN') break;
    }
    assert.deepEqual(walk, [
      'api.example.test.default.svc.cluster.local NXDOMAIN',
      'api.example.test.svc.cluster.local NXDOMAIN',
      'api.example.test.cluster.local NXDOMAIN',
      'api.example.test NOERROR',
    ]);
    assert.equal(b.resolver.calls.filter((c) => c.name.endsWith('cluster.local')).length, 0, 'search candidates are never asked upstream');
  });
});
