// The supervisor's GET /v1/sandboxes/<id>/denials end to end: a real attached boundary forwards its denial events
// over mTLS HTTP/2, the supervisor keeps them per sandbox behind its admin auth. Loopback only; no sleeps.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { restPolicy, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor } from '../harness/control.js';
import { sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';
import type { SupervisorEvent } from '../../src/supervisor/supervisor.js';

/** Events messages waited for before giving up on the denial arriving. */
const MAX_EVENT_BATCHES = 50;
const QUERY_VALUE = 'QV-attached-91d2';

describe('supervisor: recent denials per sandbox', () => {
  let pki: TestPki;
  let origin: Origin;
  before(async () => {
    pki = await makeTestPki();
    origin = await httpOrigin();
  });
  after(() => origin.close());

  it('aggregates the denials its boundary forwarded, behind the admin token, without query values', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    await b.waitState((s) => s.policy.effective);

    const denied = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v2/blocked?token=${QUERY_VALUE}` });
    assert.equal(denied.status, 403);

    // The boundary's own ring suggests an entry: the text of the pushed policy was kept for it.
    const local = await b.get('/v1/denials');
    const [mine] = local.body.denials as Record<string, unknown>[];
    assert.equal(mine?.path, '/v2/blocked');
    assert.match(String(mine?.suggestion), /network_policies:/);

    const admin = sup.supervisor.adminAddress()?.port ?? 0;
    const url = `http://127.0.0.1:${admin}/v1/sandboxes/${pki.sandboxId}/denials?last=10`;
    assert.equal((await fetch(url)).status, 401, 'the admin token is required');
    const seen = new Set<SupervisorEvent>();
    let denials: Record<string, unknown>[] = [];
    for (let i = 0; i < MAX_EVENT_BATCHES && denials.length === 0; i++) {
      const reply = await fetch(url, { headers: sup.adminHeaders });
      assert.equal(reply.status, 200);
      const text = await reply.text();
      assert.ok(!text.includes(QUERY_VALUE), 'no query value');
      denials = (JSON.parse(text) as { denials: Record<string, unknown>[] }).denials;
      if (denials.length > 0) break;
      const batch = await sup.waitFor((e) => e.type === 'events' && !seen.has(e));
      seen.add(batch);
    }
    const [denial] = denials;
    assert.equal(denial?.reason, 'no-rule-matched');
    assert.equal(denial?.adapter, 'forward');
    assert.equal(denial?.host, 'api.example.test');
    assert.equal(denial?.port, origin.port);
    assert.equal(denial?.path, '/v2/blocked');
    assert.deepEqual(denial?.queryKeys, ['token']);
    assert.equal(denial?.policy, 'api');
    assert.equal((denial?.replay as Record<string, unknown> | undefined)?.method, 'GET');

    const unknown = await fetch(`http://127.0.0.1:${admin}/v1/sandboxes/no-such-sandbox/denials`, { headers: sup.adminHeaders });
    assert.equal(unknown.status, 404);
    const bad = await fetch(`http://127.0.0.1:${admin}/v1/sandboxes/${pki.sandboxId}/denials?last=x`, { headers: sup.adminHeaders });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: string }).error, 'ADMIN_REQUEST_INVALID');
  });
});
