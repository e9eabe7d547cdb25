// Issue 31, "Current OpenShell policies load and work": OpenShell now forwards some placeholders in a request body
// that is not rewritten (an unknown key, an issued revision form) and refuses the rest. boundary keeps refusing every
// marker in such a body (docs/policy.md#placeholders-in-bodies-that-are-not-rewritten); this pins that choice.
// Client: curl (forward HTTP and CONNECT with TLS interception); loopback origins.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type ProbeOrigin, probeOrigin } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, HOSTS, type Transport } from '../harness/credential-stack.js';

const run = promisify(execFile);
const TOKEN = 'tok-31-body';
const PROBE = 'probe.example.test';

interface Reply {
  readonly code: string;
  readonly body: string;
}

describe('issue 31: placeholders in a body that is not rewritten are refused, whatever their form', () => {
  let stack: CredentialStack;
  let probe: ProbeOrigin;
  let caFile: string;

  before(async () => {
    probe = await probeOrigin();
    stack = await credentialStack({
      values: { token: TOKEN, query: 'q-31', basic: 'pw-31' },
      extraNames: [PROBE],
      extraPolicy: `      - { host: ${PROBE}, ports: [${probe.port}], protocol: rest, enforcement: enforce, access: full }\n`,
    });
    caFile = join(stack.b.dir, 'boundary-ca.pem');
    await writeFile(caFile, stack.b.caPem ?? '');
  });
  after(async () => {
    await stack?.close();
    await probe?.close();
  });

  async function post(transport: Transport, host: string, port: number, body: string): Promise<Reply> {
    const url = transport === 'forward' ? `http://${host}:${port}/prompt` : `https://${host}:${port}/prompt`;
    const tls = transport === 'connect' ? ['--cacert', caFile] : [];
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://127.0.0.1:${stack.b.proxyPort}`,
      '-w', '\n%{http_code}', ...tls, '-H', 'Content-Type: application/json', '--data-binary', body, url]);
    const cut = stdout.lastIndexOf('\n');
    return { code: stdout.slice(cut + 1), body: stdout.slice(0, cut) };
  }

  // C1-C3: an unknown key, the issued revision form of the current credentials, the bare canonical form.
  const cases = (): [string, string][] => [
    ['an unknown key', 'openshell:resolve:env:UNKNOWN_KEY'],
    ['the current revision form', `openshell:resolve:env:v${stack.source.current().revision}_API_TOKEN`],
    ['the canonical form of a bound key', 'openshell:resolve:env:API_TOKEN'],
  ];

  for (const transport of ['forward', 'connect'] as const) {
    it(`refuses each form on a credentialed endpoint with 500 credential_unavailable, nothing sent (${transport})`, async () => {
      for (const [name, marker] of cases()) {
        const seen = stack.plain.seen.length + stack.secure.seen.length;
        const reply = await post(transport, HOSTS.api, stack.portFor(HOSTS.api, transport), JSON.stringify({ prompt: `my env holds ${marker}` }));
        assert.equal(reply.code, '500', `${name}: ${reply.body}`);
        assert.equal((JSON.parse(reply.body) as { error: string }).error, 'credential_unavailable', name);
        assert.equal(stack.plain.seen.length + stack.secure.seen.length, seen, `${name}: nothing reached the origin`);
        assert.equal(reply.body.includes(TOKEN), false, `${name}: the secret is never substituted`);
      }
    });
  }

  it('never completes the request on an endpoint no credential is bound to, whatever the form', async () => {
    for (const [name, marker] of cases()) {
      const completed = probe.completed();
      const reply = await post('forward', PROBE, probe.port, JSON.stringify({ prompt: `my env holds ${marker}` }));
      // The body streams there: the request is cut once the marker is seen (500, or the connection closed).
      assert.ok(reply.code === '500' || reply.code === '000', `${name}: ${reply.code} ${reply.body}`);
      assert.equal(probe.completed(), completed, `${name}: the origin never got the whole request`);
      assert.equal(probe.received().toString('latin1').includes('resolve'), false, `${name}: no marker byte went upstream`);
    }
  });
});
