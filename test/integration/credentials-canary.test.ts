import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { request as httpRequest, createServer } from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FORMAT_CATALOGUE, shapedPlaceholder } from '../../src/credentials/shaped.js';
import { encodeUnreserved } from '../../src/credentials/substitute.js';
import { type CertificateAuthority, createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { PH } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, HOSTS, type RequestSpec, stackPolicy } from '../harness/credential-stack.js';
import { type ClientResponse, openTunnel, readAll, sendRequest } from '../harness/proxy-client.js';
import { grantCanary } from '../harness/grant-canary.js';
import { textsUnder } from '../harness/files-under.js';

const EXTRA = {
  body: 'echobody.example.test',
  l7: 'l7.example.test',
  audit: 'audit.example.test',
  dead: 'dead.example.test',
} as const;

const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

/** Every rendering of `secret` a leak could take: raw, base64 (padded, bare, url), Basic user:secret, percent. */
function formsOf(secret: string): string[] {
  return [
    secret,
    b64(secret),
    b64(secret).replace(/=+$/, ''),
    Buffer.from(secret).toString('base64url'),
    b64(`user:${secret}`),
    encodeURIComponent(secret),
    encodeUnreserved(secret),
  ];
}

function canaryValue(): string {
  // `+` and a space make the percent-encoded and raw forms differ.
  return `Cn4ry+${randomBytes(10).toString('hex')} q`;
}

async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function adminGet(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
    req.on('error', reject);
    req.end();
  });
}


/** A client certificate and key in a directory of their own (not the state dir the files sink reads), bound to the TLS api origin. */
async function clientCertificate(pki: { ca: CertificateAuthority }, shapedSecret: string): Promise<{ dir: string; keyPem: string; provider: (port: number) => string }> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-canary-cert-'));
  const issued = await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId: 'canary', trustDomain: 'canary.test', now: Date.now });
  await writeFile(join(dir, 'client.pem'), issued.certPem);
  await writeFile(join(dir, 'client.key'), issued.keyPem);
  await writeFile(join(dir, 'shaped'), shapedSecret);
  // The same provider holds a key whose placeholder is shaped like a GitHub token.
  const provider = (port: number) =>
    `  mtls:\n    client_certificate: { cert: ${join(dir, 'client.pem')}, key: ${join(dir, 'client.key')} }\n` +
    `    env:\n      SHAPED_TOKEN: { value_from: { file: ${join(dir, 'shaped')} }, format: github-classic }\n` +
    `    endpoints:\n      - { host: ${HOSTS.api}, port: ${port} }\n`;
  return { dir, keyPem: issued.keyPem, provider };
}

/** The key's PEM whole and each of its base64 lines: any of them in a sink is a leak. */
function keyForms(keyPem: string): string[] {
  return [keyPem.trim(), ...keyPem.split('\n').filter((line) => line.length >= 16 && !line.startsWith('-----'))];
}

function extraPolicy(echo: number, dead: number): string {
  const endpoint = (host: string, port: number, more: string): string => `      - host: ${host}
        ports: [${port}]
        protocol: rest
${more}`;
  return (
    endpoint(EXTRA.body, echo, '        enforcement: enforce\n        access: full\n        request_body_credential_rewrite: true\n') +
    endpoint(EXTRA.l7, echo, '        enforcement: enforce\n        rules:\n          - allow: { method: GET, path: "/ok/**" }\n') +
    endpoint(EXTRA.audit, echo, '        enforcement: audit\n        rules:\n          - allow: { method: GET, path: "/ok/**" }\n') +
    endpoint(EXTRA.dead, dead, '        enforcement: enforce\n        access: full\n')
  );
}

async function run(format: 'json' | 'shorthand'): Promise<void> {
  const first = canaryValue();
  const second = canaryValue();
  const dead = await closedPort();
  const shapedSecret = canaryValue();
  const shaped = shapedPlaceholder('mtls', 'SHAPED_TOKEN', { id: 'github-classic', parts: FORMAT_CATALOGUE['github-classic'] ?? [] });
  const cert = await clientCertificate({ ca: await createCertificateAuthority({ commonName: 'canary client CA', now: Date.now }) }, shapedSecret);
  const s: CredentialStack = await credentialStack({
    values: { token: first, query: first, basic: first },
    logFormat: format,
    extraNames: [...Object.values(EXTRA)],
    extraPolicy: (ports) => extraPolicy(ports.echo, dead),
    extraEndpoints: (ports) =>
      `      - { host: ${EXTRA.body}, port: ${ports.echo} }\n      - { host: ${EXTRA.l7}, port: ${ports.echo} }\n` +
      `      - { host: ${EXTRA.audit}, port: ${ports.echo} }\n      - { host: ${EXTRA.dead}, port: ${dead} }\n` +
      cert.provider(ports.secure),
  });
  const responses: ClientResponse[] = [];
  const keep = (r: ClientResponse): ClientResponse => {
    responses.push(r);
    return r;
  };
  const forward = async (host: string, port: number, spec: RequestSpec): Promise<ClientResponse> =>
    keep(await sendRequest({ proxyPort: s.b.proxyPort, path: `http://${host}:${port}${spec.path}`, method: spec.method ?? 'GET', headers: spec.headers ?? {}, ...(spec.body === undefined ? {} : { body: spec.body }) }));
  const tunnelled = async (host: string, port: number, spec: RequestSpec): Promise<ClientResponse> => {
    const tunnel = await openTunnel(s.b.proxyPort, `${host}:${port}`);
    if (tunnel.status !== 200) return keep({ status: tunnel.status, headers: {}, body: tunnel.head + (await readAll(tunnel.socket, tunnel.rest)) });
    try {
      return keep(await sendRequest({ socket: tunnel.socket, path: spec.path, method: spec.method ?? 'GET', headers: { host: `${host}:${port}`, ...spec.headers }, ...(spec.body === undefined ? {} : { body: spec.body }) }));
    } finally {
      tunnel.socket.destroy();
    }
  };
  const echo = s.ports.echo;
  const bearer = { authorization: `Bearer ${PH}API_TOKEN` };
  const slots: RequestSpec[] = [
    { path: '/a/bearer', headers: bearer },
    { path: '/a/basic', headers: { authorization: `Basic ${b64(`user:${PH}BASIC_PASS`)}` } },
    { path: '/a/whole', headers: { 'x-api-key': `${PH}API_TOKEN` } },
    { path: `/a/query?k=${PH}QUERY_KEY` },
    { path: `/a/seg${PH}API_TOKEN/x` },
  ];
  const body = { method: 'POST', path: '/a/body', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ t: `${PH}API_TOKEN` }) };

  async function matrix(): Promise<void> {
    // Allowed (and audited) with every slot, forward and through a plaintext tunnel.
    for (const send of [forward, tunnelled]) {
      for (const spec of slots) assert.equal((await send(HOSTS.echo, echo, spec)).status, 200);
      assert.equal((await send(EXTRA.body, echo, body)).status, 200);
      assert.equal((await send(EXTRA.audit, echo, { path: '/not-ok/x', headers: bearer })).status, 200);
      // Denied by policy (L7 and L4), mismatched, and the error paths.
      assert.equal((await send(EXTRA.l7, echo, { path: '/denied?k=1', headers: bearer })).status, 403);
      assert.equal((await send(EXTRA.body, echo, { ...body, path: '/a/unknown', body: JSON.stringify({ t: `${PH}NOPE` }) })).status, 500);
      assert.equal((await send(EXTRA.body, echo, { method: 'POST', path: '/a/big', headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(300_000) })).status, 413);
      assert.equal((await send(HOSTS.echo, echo, { path: `/a/encoded?k=openshell%3Aresolve%3Aenv%3AAPI_TOKEN` })).status, 500);
      assert.equal((await send(HOSTS.echo, echo, { method: 'POST', path: '/a/stream', headers: { 'content-type': 'text/plain' }, body: `x ${PH}API_TOKEN` })).status, 500);
    }
    assert.equal((await forward('nowhere.example.test', echo, { path: '/x', headers: bearer })).status, 403);
    assert.equal((await forward(HOSTS.other, s.ports.otherPlain, { path: '/m', headers: bearer })).status, 403);
    assert.equal((await s.through('connect', HOSTS.other, { path: '/m', headers: bearer }).then(keep)).status, 403);
    assert.equal((await forward(EXTRA.dead, dead, { path: '/d', headers: bearer })).status, 502);
    assert.equal((await tunnelled(HOSTS.skip, s.ports.secure, { path: '/skip', headers: bearer })).status, 403);
    // The client certificate's endpoint: its key goes into the upstream handshake.
    assert.equal((await s.through('connect', HOSTS.api, { path: '/m', headers: bearer }).then(keep)).status, 200);
    // The shaped placeholder: swapped where bound, refused elsewhere.
    assert.equal((await s.through('connect', HOSTS.api, { path: '/s', headers: { 'x-token': shaped } }).then(keep)).status, 200);
    assert.equal((await forward(HOSTS.echo, echo, { path: '/s', headers: { 'x-token': shaped } })).status, 403);
  }

  try {
    await matrix();
    // A policy reload, then the matrix again.
    await s.b.writePolicy(stackPolicy(s.ports, `${extraPolicy(echo, dead)}      - host: reload.example.test\n        ports: [1]\n`));
    await s.b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
    // A credentials rotation to the second canary, then the matrix again.
    await s.rotate({ token: second, query: second, basic: second });
    await matrix();

    // The search works: both canaries, and their Basic and percent forms, reached the bound origin.
    const received = JSON.stringify(s.echo.seen);
    for (const secret of [first, second]) {
      assert.ok(received.includes(secret), 'raw form reached the origin');
      assert.ok(received.includes(b64(`user:${secret}`)), 'Basic form reached the origin');
      assert.ok(received.includes(encodeUnreserved(secret)), 'percent-encoded form reached the origin');
    }

    // Second line of defence: the boundary's own logger redacts credential-bearing headers and Secret values
    // even if a future change logged a request (checked in this format).
    s.b.log.logger.warn({ req: { headers: { authorization: `Bearer ${first}`, 'x-api-key': first, cookie: `s=${first}` } } }, 'request dump');
    s.b.log.logger.warn({ headers: { Authorization: `Basic ${b64(`user:${first}`)}` }, secret: first }, 'header dump');
    assert.match(s.b.log.text(), /request dump/);

    const sinks = {
      log: s.b.log.text(),
      ocsf: JSON.stringify(s.b.log.events()),
      readyz: (await adminGet(s.b.adminPort, '/readyz')) + (await adminGet(s.b.adminPort, '/readyz?verbose=1')),
      metrics: await adminGet(s.b.adminPort, '/metrics'),
      responses: JSON.stringify(responses),
      files: (await textsUnder(s.b.dir)).join('\n'),
    };
    assert.ok(sinks.log.length > 10_000 && sinks.responses.length > 1_000, 'the sinks hold the whole matrix');
    const hits: string[] = [];
    for (const [sink, text] of Object.entries(sinks)) {
      for (const secret of [first, second]) {
        for (const form of formsOf(secret)) if (text.includes(form)) hits.push(`${sink}: ${form === secret ? 'raw' : form}`);
      }
      for (const form of keyForms(cert.keyPem)) if (text.includes(form)) hits.push(`${sink}: client certificate key`);
      for (const form of formsOf(shapedSecret)) if (text.includes(form)) hits.push(`${sink}: shaped credential's value`);
      if (sink !== 'responses' && text.includes(shaped)) hits.push(`${sink}: shaped placeholder`);
      for (const name of ['API_TOKEN', 'QUERY_KEY', 'BASIC_PASS']) if (sink !== 'responses' && text.includes(name)) hits.push(`${sink}: key name ${name}`);
      if (sink !== 'responses' && text.includes('openshell:resolve')) hits.push(`${sink}: placeholder`);
    }
    assert.deepEqual(hits, []);
  } finally {
    await s.close();
    await rm(cert.dir, { recursive: true, force: true });
  }
}

describe('credentials canary (CR-22): a unique secret appears in no sink', () => {
  it('json logs: zero hits in logs, OCSF, /readyz, /metrics, response bodies and the state dir', async () => {
    await run('json');
  });

  it('shorthand logs: zero hits in logs, OCSF, /readyz, /metrics, response bodies and the state dir', async () => {
    await run('shorthand');
  });
});

describe('credentials canary: token grants (client secret, refresh tokens, every access token issued) appear in no sink', () => {
  for (const format of ['json', 'shorthand'] as const) {
    it(`${format} logs: zero hits in logs, OCSF, /readyz, /metrics, response bodies and the state dir`, async () => {
      const run = await grantCanary({ format, secret: canaryValue(), refresh: canaryValue() });
      try {
        const sinks = {
          log: run.b.log.text(),
          ocsf: JSON.stringify(run.b.log.events()),
          readyz: (await adminGet(run.b.adminPort, '/readyz')) + (await adminGet(run.b.adminPort, '/readyz?verbose=1')),
          metrics: await adminGet(run.b.adminPort, '/metrics'),
          responses: JSON.stringify(run.responses),
          files: (await textsUnder(run.b.dir)).join('\n'),
        };
        assert.ok(run.secrets.length >= 6, 'the client secret, two refresh tokens and several access tokens');
        const hits: string[] = [];
        for (const [sink, text] of Object.entries(sinks)) {
          for (const [index, secret] of run.secrets.entries()) {
            for (const form of formsOf(secret)) if (text.includes(form)) hits.push(`${sink}: secret ${index} ${form === secret ? 'raw' : form}`);
          }
        }
        assert.deepEqual(hits, []);
      } finally {
        await run.close();
      }
    });
  }
});
