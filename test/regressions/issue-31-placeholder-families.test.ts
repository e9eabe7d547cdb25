// Regression of issue 31, "Current OpenShell policies load and work": OpenShell's rename spells placeholders
// `ryno:resolve:env:KEY` and `<prefix>-RYNO-RESOLVE-ENV-KEY`, and boundary's leak scans knew only the openshell
// spelling, so a ryno placeholder went upstream as it was written. Now both families are reserved in every scan
// (headers, target, bodies, a streamed body split across reads and percent-encoded, WebSocket text), boundary
// resolves the family `--placeholder-family` names (openshell by default), and a marker of the other family is
// refused 500 credential_unavailable with nothing sent (docs/credentials.md#placeholder-families).
// Clients: curl (forward HTTP, CONNECT with TLS interception, a chunked upload streamed from stdin) and undici's
// WebSocket, and curl over HTTP/2 for a refusal that must be reported as a refusal, not as the client closing; loopback origins.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ProxyAgent, WebSocket } from 'undici';
import { type ProbeOrigin, probeOrigin } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, HOSTS, type Transport } from '../harness/credential-stack.js';
import type { SeenRequest } from '../harness/servers.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const TOKEN = 'tok-31-family';
const PROBE = 'probe.example.test';
const WS = 'ws.example.test';

interface Stacks {
  readonly stack: CredentialStack;
  readonly probe: ProbeOrigin;
  readonly ws: WsOrigin;
  readonly caFile: string;
}

async function stacks(family: 'openshell' | 'ryno'): Promise<Stacks> {
  const probe = await probeOrigin();
  const ws = await wsOrigin();
  const stack = await credentialStack({
    values: { token: TOKEN, query: 'q-31', basic: 'pw-31' },
    placeholderFamily: family,
    extraNames: [PROBE, WS],
    extraPolicy: `      - { host: ${PROBE}, ports: [${probe.port}], protocol: rest, enforcement: enforce, access: full }
      - { host: ${WS}, ports: [${ws.port}], protocol: websocket, enforcement: enforce, access: read-write }
`,
  });
  const caFile = join(stack.b.dir, 'boundary-ca.pem');
  await writeFile(caFile, stack.b.caPem ?? '');
  return { stack, probe, ws, caFile };
}

async function closeAll(s: Stacks | undefined): Promise<void> {
  await s?.stack.close();
  await Promise.all([s?.probe.close(), s?.ws.close()]);
}

interface Reply {
  readonly code: number;
  readonly body: Record<string, unknown>;
}

async function curl(s: Stacks, transport: Transport, host: string, path: string, args: readonly string[]): Promise<Reply> {
  const port = s.stack.portFor(host, transport);
  const url = transport === 'forward' ? `http://${host}:${port}${path}` : `https://${host}:${port}${path}`;
  const tls = transport === 'connect' ? ['--cacert', s.caFile] : [];
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://127.0.0.1:${s.stack.b.proxyPort}`,
    '-w', '\n%{http_code}', ...tls, ...args, url]);
  const cut = stdout.lastIndexOf('\n');
  return { code: Number(stdout.slice(cut + 1)), body: JSON.parse(stdout.slice(0, cut)) as Record<string, unknown> };
}

const origins = (s: Stacks): number => s.stack.plain.seen.length + s.stack.secure.seen.length;
/** What the origin behind HOSTS.api or HOSTS.rewrite last received (its echo of a secret is redacted on the way back). */
const lastSeen = (s: Stacks, transport: Transport): SeenRequest | undefined => (transport === 'forward' ? s.stack.plain : s.stack.secure).seen.at(-1);

/** A marker of `family` for API_TOKEN in each slot, and whether this boundary resolves it. */
function slots(family: 'openshell' | 'ryno'): { name: string; path: string; args: string[] }[] {
  const canonical = `${family}:resolve:env:API_TOKEN`;
  const alias = `xoxb-${family.toUpperCase()}-RESOLVE-ENV-API_TOKEN`;
  return [
    { name: 'a Bearer header', path: '/h', args: ['-H', `Authorization: Bearer ${canonical}`] },
    { name: 'an alias in a header', path: '/a', args: ['-H', `X-Api-Key: ${alias}`] },
    { name: 'a percent-encoded query value', path: `/q?k=${encodeURIComponent(canonical)}`, args: [] },
    { name: 'a JSON body (no body rewrite)', path: '/b', args: ['-H', 'Content-Type: application/json', '--data-binary', JSON.stringify({ t: canonical })] },
  ];
}

for (const resolved of ['openshell', 'ryno'] as const) {
  const other = resolved === 'openshell' ? 'ryno' : 'openshell';

  describe(`issue 31: placeholder families, boundary resolving ${resolved}`, () => {
    let s: Stacks;
    before(async () => {
      s = await stacks(resolved);
    });
    after(() => closeAll(s));

    for (const transport of ['forward', 'connect'] as const) {
      it(`swaps its own family's Bearer placeholder for the secret (${transport})`, async () => {
        const reply = await curl(s, transport, HOSTS.api, '/own', ['-H', `Authorization: Bearer ${resolved}:resolve:env:API_TOKEN`]);
        assert.equal(reply.code, 200, JSON.stringify(reply.body));
        assert.equal(lastSeen(s, transport)?.headers.authorization, `Bearer ${TOKEN}`);
      });

      for (const slot of slots(other)) {
        it(`refuses a ${other} marker in ${slot.name} with 500 credential_unavailable, nothing sent (${transport})`, async () => {
          const before = origins(s);
          const from = s.stack.b.log.events().length;
          const reply = await curl(s, transport, HOSTS.api, slot.path, slot.args);
          assert.equal(reply.code, 500, JSON.stringify(reply.body));
          assert.equal(reply.body.error, 'credential_unavailable');
          assert.equal(origins(s), before);
          const event = await s.stack.b.log.waitFor((e) => s.stack.b.log.events().indexOf(e) >= from && e.unmapped.reason_code === 'credential-unavailable');
          assert.equal(JSON.stringify(event).includes(other), false, 'the event never holds the placeholder');
        });
      }

      if (transport === 'connect') {
        it(`refuses a ${other} marker over HTTP/2 with 500 credential_unavailable, recorded as the refusal it is`, async () => {
          const before = origins(s);
          const from = s.stack.b.log.events().length;
          const reply = await curl(s, transport, HOSTS.api, '/h2', ['--http2', '-H', `Authorization: Bearer ${other}:resolve:env:API_TOKEN`]);
          assert.equal(reply.code, 500, JSON.stringify(reply.body));
          assert.equal(reply.body.error, 'credential_unavailable');
          assert.equal(origins(s), before);
          // The refusal ends the stream: it must be reported before that end, not as the client closing.
          const event = await s.stack.b.log.waitFor((e) => s.stack.b.log.events().indexOf(e) >= from && e.activity_name !== 'Open');
          assert.equal(event.unmapped.reason_code, 'credential-unavailable');
        });
      }

      it(`does not rewrite a ${other} marker in a body on a rewrite endpoint (${transport})`, async () => {
        const before = origins(s);
        const reply = await curl(s, transport, HOSTS.rewrite, '/rw', ['-H', 'Content-Type: application/json', '--data-binary', JSON.stringify({ t: `${other}:resolve:env:API_TOKEN` })]);
        assert.equal(reply.code, 500, JSON.stringify(reply.body));
        assert.equal(origins(s), before);
      });

      it(`rewrites its own family in a body on a rewrite endpoint (${transport})`, async () => {
        const reply = await curl(s, transport, HOSTS.rewrite, '/rw', ['-H', 'Content-Type: application/json', '--data-binary', JSON.stringify({ t: `${resolved}:resolve:env:API_TOKEN` })]);
        assert.equal(reply.code, 200, JSON.stringify(reply.body));
        assert.equal(lastSeen(s, transport)?.body, JSON.stringify({ t: TOKEN }));
      });
    }

    it(`cuts a streamed body whose percent-encoded ${other} marker is split across two reads; the origin sees only what came before`, async () => {
      // R3: curl uploads stdin chunk by chunk (-T -); the second half is written once the origin holds the first.
      const pad = 'a'.repeat(2_000);
      const encoded = `%${other.charCodeAt(0).toString(16)}${other.slice(1)}:resolve:env:API_TOKEN`;
      const first = `${pad}${encoded.slice(0, 6)}`;
      const second = `${encoded.slice(6)} and more`;
      const released = first.length - 69;
      const completed = s.probe.completed();
      const client = spawn('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://127.0.0.1:${s.stack.b.proxyPort}`, '-X', 'POST',
        '-H', 'Content-Type: text/plain', '-T', '-', '-w', '\n%{http_code}', `http://${PROBE}:${s.probe.port}/stream`]);
      let out = '';
      client.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      client.stdin.write(first);
      for (let i = 0; i < 1_000 && s.probe.received().length < released; i++) await once(s.probe, 'body');
      assert.equal(s.probe.received().toString('latin1'), pad.slice(0, released));
      client.stdin.end(second);
      await once(client, 'close');
      const code = out.slice(out.lastIndexOf('\n') + 1);
      // The head went upstream with the first bytes; a cut upload is answered 500, or the connection is cut.
      assert.ok(code === '500' || code === '000', out);
      assert.equal(s.probe.received().toString('latin1'), pad.slice(0, released));
      assert.equal(s.probe.completed(), completed, 'the upstream request never completed');
    });

    it(`closes a WebSocket with 1008 when a text message holds a ${other} placeholder, and relays its own family's text`, async () => {
      const socket = new WebSocket(`ws://${WS}:${s.ws.port}/chat`, { dispatcher: new ProxyAgent(`http://127.0.0.1:${s.stack.b.proxyPort}`) });
      try {
        await new Promise<void>((resolve, reject) => {
          socket.addEventListener('open', () => resolve());
          socket.addEventListener('error', () => reject(new Error('the WebSocket did not open')));
        });
        const closed = new Promise<number>((resolve) => socket.addEventListener('close', (e) => resolve(e.code)));
        socket.send(`hello ${other}:resolve:env:API_TOKEN`);
        assert.equal(await closed, 1008);
        assert.equal(s.ws.records.some((r) => r.kind === 'text' && r.text.includes('resolve')), false);
      } finally {
        socket.close();
      }
    });
  });
}
