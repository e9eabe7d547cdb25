// Lifecycle events (docs/events.md#lifecycle) through the same sink as every other event: the real `boundary run`
// reports its credentials by count only and the SIGTERM that stopped it, then the drain; a real TLS client that does
// not trust the interception CA (curl without --cacert, node tls.connect without ca) is reported with the fix, not
// as a raw OpenSSL error.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { CA_BUNDLE_HINT } from '../../src/tls/intercept.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { openTunnel } from '../harness/proxy-client.js';
import { type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = '10';
const KEY_NAMES = ['ALPHA_SECRET_NAME', 'BRAVO_SECRET_NAME', 'CHARLIE_SECRET_NAME'];

describe('lifecycle events of boundary run', () => {
  it('reports the credentials by count, the SIGTERM and the drain', async (t) => {
    // dir holds boundary's --state-dir: removed after the hook that stops boundary.
    await withStateDir(t, 'boundary-lifecycle-', async (dir) => {
      await writeFile(join(dir, 'policy.yaml'), 'version: 1\nnetwork_policies: {}\n');
      await writeFile(
        join(dir, 'creds.yaml'),
        `providers:\n  provider-one:\n    env:\n      ${KEY_NAMES[0]}: "v1"\n      ${KEY_NAMES[1]}: "v2"\n  provider-two:\n    env:\n      ${KEY_NAMES[2]}: "v3"\n`,
      );
      const cli = spawnBoundaryCli([
        '--policy', join(dir, 'policy.yaml'),
        '--credentials', join(dir, 'creds.yaml'),
        '--proxy-listen', '127.0.0.1:0',
        '--admin-listen', '127.0.0.1:0',
        '--dns-listen', '127.0.0.1:0',
        '--upstream-dns', '127.0.0.1:9',
        '--state-dir', join(dir, 'state'),
      ]);
      t.after(() => cli.stop());
      const loaded = await cli.waitFor((line) => line.ocsf?.status_detail === 'credentials_loaded');
      assert.deepEqual([loaded.ocsf?.unmapped?.providers, loaded.ocsf?.unmapped?.keys], [2, 3]);
      assert.match(loaded.ocsf?.message ?? '', /^credentials loaded: 2 providers, 3 keys \(revision \d+\)$/);
      await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));

      const closed = once(cli.child, 'close');
      cli.child.kill('SIGTERM');
      await closed;
      const stopping = cli.lines.find((line) => line.ocsf?.status_detail === 'boundary_stopping');
      const drained = cli.lines.find((line) => line.ocsf?.status_detail === 'boundary_drained');
      assert.equal(stopping?.ocsf?.message, 'SIGTERM received: draining connections');
      assert.equal(stopping?.ocsf?.unmapped?.signal, 'SIGTERM');
      assert.match(drained?.ocsf?.message ?? '', /^drained in \d+ ms$/);
      assert.ok(cli.lines.indexOf(stopping!) < cli.lines.indexOf(drained!));
      assert.equal(cli.child.exitCode, 0);
      // Never a provider or key name, nor a value.
      for (const secret of [...KEY_NAMES, 'provider-one', 'provider-two', '"v1"']) assert.ok(!cli.stdout().includes(secret), secret);
    });
  });
});

describe('a client that rejects the interception CA', () => {
  let origin: Origin;
  let b: RunningBoundary;

  before(async () => {
    const pki = await makeTestPki();
    origin = await tlsOrigin({ ca: pki.ca });
    b = await startBoundary({
      upstreamCaPem: pki.ca.certPem,
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        access: read-only
    binaries: [{ path: "/**" }]
`,
    });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  function rejections(): ReturnType<RunningBoundary['log']['events']> {
    return b.log.events().filter((e) => e.status_detail === 'tls_client_rejected_ca');
  }

  it('curl without --cacert: a MED finding naming the alert and the CA bundle fix', async () => {
    const before = rejections().length;
    await assert.rejects(
      run('curl', ['-sS', '--max-time', CURL_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, `https://api.example.test:${origin.port}/`]),
      (err: { stderr?: string }) => /certificate/i.test(err.stderr ?? ''),
    );
    const event = await b.log.waitFor((e) => e.status_detail === 'tls_client_rejected_ca' && rejections().length > before);
    assert.equal(event.severity_id, 3, 'MED');
    assert.match(event.message ?? '', /the client does not trust the interception CA for api\.example\.test \(TLS alert unknown_ca\)/);
    assert.ok((event.message ?? '').includes(CA_BUNDLE_HINT));
    assert.doesNotMatch(event.message ?? '', /ssl3_|tlsv1 alert|SSL routines|ERR_SSL/i, 'not a raw OpenSSL error');
  });

  it('python (urllib, default trust) gets the same finding', async () => {
    const before = rejections().length;
    const script = [
      'import sys, urllib.request',
      'proxy = "http://127.0.0.1:" + sys.argv[1]',
      'opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": proxy}))',
      'try:',
      '    opener.open(sys.argv[2], timeout=10)',
      'except Exception as e:',
      '    print(type(e).__name__, e)',
    ].join('\n');
    const { stdout } = await run('python3', ['-c', script, String(b.proxyPort), `https://api.example.test:${origin.port}/`]);
    assert.match(stdout, /CERTIFICATE_VERIFY_FAILED/);
    const event = await b.log.waitFor((e) => e.status_detail === 'tls_client_rejected_ca' && rejections().length > before);
    assert.match(event.message ?? '', /TLS alert (unknown_ca|bad_certificate|certificate_unknown)/);
  });

  it('node tls.connect without ca sends no alert (it verifies after the handshake), so nothing is misreported', async () => {
    const before = rejections().length;
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${origin.port}`);
    assert.equal(tunnel.status, 200);
    const client = tlsConnect({ socket: tunnel.socket, servername: 'api.example.test' });
    const [err] = (await once(client, 'error')) as [NodeJS.ErrnoException];
    assert.match(err.code ?? '', /UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER/);
    client.destroy();
    await once(tunnel.socket, 'close');
    assert.equal(rejections().length, before);
  });
});
