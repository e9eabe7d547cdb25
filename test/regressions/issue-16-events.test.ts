// Regressions of issue 16 (policy DNS speed: per-query DNS Activity events dominated its cost): `issues show 16`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode } from 'dns-packet';
import { startBoundary } from '../harness/boundary.js';
import { buildQuery, rcodeOf, udpExchange } from '../harness/dns-client.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';

const POLICY = `version: 1
network_policies:
  api:
    endpoints: [{ host: api.example.test, port: 443 }]
    binaries: [{ path: "/**" }]
`;
/** Enough repeats that per-query events would be unmistakable, few enough for a quick sequential loop. */
const REPEATS = 200;

const about = (events: readonly OcsfEvent[], host: string, classUid: number) =>
  events.filter((e) => e.class_uid === classUid && (e.query?.hostname ?? e.dst_endpoint?.domain) === host);

describe('issue 16 regressions', () => {
  it('writes one event per repeated DNS question at once and the repeats as one count, while metrics count every query', async (t) => {
    const b = await startBoundary({ policy: POLICY });
    t.after(() => b.close());
    assert.ok(b.dnsPort !== undefined);
    for (const [name, rcode] of [['blocked.example.test', 'NXDOMAIN'], ['api.example.test', 'NOERROR']] as const) {
      for (let i = 0; i < REPEATS; i++) {
        const reply = await udpExchange(b.dnsPort, buildQuery(name, 'A', { id: i }));
        assert.ok(reply !== undefined, `answer ${i} for ${name}`);
        assert.equal(rcodeOf(decode(reply)), rcode);
      }
    }
    const before = b.log.events();
    // Before the fix every query wrote its DNS Activity event (and every refusal its NET:REFUSE): 200 of each.
    assert.equal(about(before, 'blocked.example.test', 4003).length, 1, 'the refusal is visible at once, once');
    assert.equal(about(before, 'blocked.example.test', 4003)[0]?.action, 'Denied');
    assert.equal(about(before, 'blocked.example.test', 4001).length, 1, 'one NET:REFUSE');
    assert.equal(about(before, 'api.example.test', 4003).length, 1);

    const metrics = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    const refused = /boundary_dns_queries_total\{rcode="NXDOMAIN",outcome="refused"\} (\d+)/.exec(metrics);
    assert.equal(Number(refused?.[1]), REPEATS, 'metrics still count every query');

    await b.close();
    const after = b.log.events();
    const blocked = about(after, 'blocked.example.test', 4003);
    assert.deepEqual(blocked.map((e) => e.unmapped.count), [undefined, REPEATS - 1], 'close writes the count of the repeats');
    assert.equal(blocked[1]?.action, 'Denied');
    assert.deepEqual(about(after, 'blocked.example.test', 4001).map((e) => e.unmapped.count), [undefined, REPEATS - 1]);
    assert.deepEqual(about(after, 'api.example.test', 4003).map((e) => e.unmapped.count), [undefined, REPEATS - 1]);
  });
});
