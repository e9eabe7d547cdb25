// Placeholders shaped like the real token (docs/credentials.md#shaped-placeholders): `boundary env` prints them in the
// shapes the vendors publish; through forward HTTP and an intercepted CONNECT the bound origin receives the real
// secret; an unbound origin is refused them in a header, the query and a body, while a real token of the same shape
// that boundary did not generate passes untouched; no log or event holds one.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { envCommand } from '../../src/app/cli/env.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { type CredentialStack, credentialStack, HOSTS } from '../harness/credential-stack.js';
import { sendRequest } from '../harness/proxy-client.js';

const run = promisify(execFile);

/** The shapes as the vendors publish them (GitHub's token-format post, Slack's token types, AWS's IAM identifiers). */
const PUBLISHED: Readonly<Record<string, RegExp>> = {
  GH_TOKEN: /^ghp_[A-Za-z0-9]{36}$/,
  GH_PAT: /^github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}$/,
  SLACK_BOT_TOKEN: /^xoxb-[0-9]+-[0-9]+-[A-Za-z0-9]+$/,
  OPENAI_API_KEY: /^sk-proj-[A-Za-z0-9_-]+$/,
  ANTHROPIC_API_KEY: /^sk-ant-api03-[A-Za-z0-9_-]{93}AA$/,
  AWS_ACCESS_KEY_ID: /^AKIA[A-Z0-9]{16}$/,
  AWS_SECRET_ACCESS_KEY: /^[A-Za-z0-9/+]{40}$/,
  CUSTOM_TOKEN: /^tok_[a-z0-9]{36}$/,
};
const FORMATS: Readonly<Record<string, string>> = {
  GH_TOKEN: 'github-classic',
  GH_PAT: 'github-fine-grained',
  SLACK_BOT_TOKEN: 'slack-bot',
  OPENAI_API_KEY: 'openai',
  ANTHROPIC_API_KEY: 'anthropic',
  AWS_ACCESS_KEY_ID: 'aws-access-key-id',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-access-key',
  CUSTOM_TOKEN: '{ prefix: tok_, length: 40, alphabet: lower-alphanumeric }',
};

function providerYaml(dir: string, port: { plain: number; secure: number }): string {
  const env = Object.entries(FORMATS)
    .map(([key, format]) => `      ${key}: { value_from: { file: ${join(dir, key)} }, format: ${format} }\n`)
    .join('');
  const endpoints = [`{ host: ${HOSTS.api}, port: ${port.plain} }`, `{ host: ${HOSTS.api}, port: ${port.secure} }`, `{ host: ${HOSTS.rewrite}, port: ${port.plain} }`];
  return `  shaped:\n    env:\n${env}    endpoints:\n${endpoints.map((e) => `      - ${e}\n`).join('')}`;
}

async function envOf(path: string): Promise<Record<string, string>> {
  let stdout = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, env: {}, cwd: '/', signal: new AbortController().signal, now: () => 0 } as CliIo;
  assert.equal(await envCommand(['--credentials', path, '--format', 'json'], io), 0);
  return JSON.parse(stdout) as Record<string, string>;
}

describe('shaped placeholders', () => {
  let s: CredentialStack;
  let dir: string;
  let env: Record<string, string>;
  const secrets: Record<string, string> = {};

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-shaped-'));
    for (const key of Object.keys(FORMATS)) {
      secrets[key] = `real-${key}-${randomBytes(12).toString('hex')}`;
      await writeFile(join(dir, key), `${secrets[key]}\n`);
    }
    s = await credentialStack({ values: { token: 't-value', query: 'q-value', basic: 'b-value' }, extraEndpoints: (ports) => providerYaml(dir, ports) });
    env = await envOf(s.credentialsPath);
  });

  after(async () => {
    await s?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('boundary env prints each key in its published shape, the same every time', async () => {
    for (const [key, pattern] of Object.entries(PUBLISHED)) assert.match(env[key] ?? '', pattern, key);
    assert.equal(env.API_TOKEN, 'openshell:resolve:env:API_TOKEN', 'a key without a format keeps the placeholder forms');
    assert.deepEqual(await envOf(s.credentialsPath), env);
  });

  it('the bound origin receives the real secrets: header, query, forward and intercepted CONNECT', async () => {
    for (const transport of ['forward', 'connect'] as const) {
      const origin = transport === 'forward' ? s.plain : s.secure;
      const before = origin.seen.length;
      const answer = await s.through(transport, HOSTS.api, {
        path: `/shaped?key=${env.OPENAI_API_KEY}`,
        headers: { authorization: `Bearer ${env.GH_TOKEN}`, 'x-slack': env.SLACK_BOT_TOKEN ?? '', 'x-anthropic': env.ANTHROPIC_API_KEY ?? '', 'x-custom': env.CUSTOM_TOKEN ?? '' },
      });
      assert.equal(answer.status, 200, answer.body);
      const seen = origin.seen.slice(before);
      assert.equal(seen.length, 1);
      assert.equal(seen[0]?.headers.authorization, `Bearer ${secrets.GH_TOKEN}`);
      assert.equal(seen[0]?.headers['x-slack'], secrets.SLACK_BOT_TOKEN);
      assert.equal(seen[0]?.headers['x-anthropic'], secrets.ANTHROPIC_API_KEY);
      assert.equal(seen[0]?.headers['x-custom'], secrets.CUSTOM_TOKEN);
      assert.equal(seen[0]?.url, `/shaped?key=${secrets.OPENAI_API_KEY}`);
    }
  });

  it('a JSON body on an endpoint with request_body_credential_rewrite gets the real secret', async () => {
    const answer = await s.through('forward', HOSTS.rewrite, { method: 'POST', path: '/body', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: env.GH_PAT }) });
    assert.equal(answer.status, 200, answer.body);
    assert.deepEqual(JSON.parse(s.plain.seen.at(-1)?.body ?? '{}'), { token: secrets.GH_PAT });
  });

  it('transparent capture: a request to the synthetic address, with no proxy, gets the real secret too', async () => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(s.b.dnsPort), '+tries=1', '+time=3', '+short', HOSTS.api, 'A']);
    const synthetic = stdout.trim();
    assert.match(synthetic, /^127\.77\./, 'policy DNS gave a synthetic address');
    const socket = connect({ host: synthetic, port: s.ports.plain });
    await once(socket, 'connect');
    try {
      const answer = await sendRequest({ socket, path: '/captured', headers: { host: `${HOSTS.api}:${s.ports.plain}`, authorization: `Bearer ${env.GH_TOKEN}` } });
      assert.equal(answer.status, 200, answer.body);
    } finally {
      socket.destroy();
    }
    assert.equal(s.plain.seen.at(-1)?.url, '/captured');
    assert.equal(s.plain.seen.at(-1)?.headers.authorization, `Bearer ${secrets.GH_TOKEN}`);
  });

  it('an unbound origin never receives one (header, query, body; any case); a real token of the same shape passes', async () => {
    const lookalike = `ghp_${randomBytes(27).toString('base64').replace(/[^A-Za-z0-9]/g, 'x').slice(0, 36)}`;
    for (const transport of ['forward', 'connect'] as const) {
      const origin = transport === 'forward' ? s.otherPlain : s.otherSecure;
      const mismatch = await s.through(transport, HOSTS.other, { path: '/x', headers: { authorization: `Bearer ${env.GH_TOKEN}` } });
      assert.equal(mismatch.status, 403);
      assert.equal(JSON.parse(mismatch.body).error, 'credential_endpoint_mismatch');
      assert.equal((await s.through(transport, HOSTS.other, { path: `/x?k=${env.AWS_ACCESS_KEY_ID}` })).status, 403);
      const body = await s.through(transport, HOSTS.other, { method: 'POST', path: '/b', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ k: env.AWS_SECRET_ACCESS_KEY }) });
      assert.equal(body.status, 500);
      const lower = await s.through(transport, HOSTS.other, { path: '/x', headers: { 'x-key': (env.GH_PAT ?? '').toLowerCase() } });
      assert.equal(lower.status, 500, 'another case is a leftover');
      const passed = await s.through(transport, HOSTS.other, { path: '/real', headers: { authorization: `Bearer ${lookalike}` } });
      assert.equal(passed.status, 200);
      assert.equal(origin.seen.at(-1)?.headers.authorization, `Bearer ${lookalike}`);
    }
    const received = JSON.stringify([s.otherPlain.seen, s.otherSecure.seen]).toLowerCase();
    for (const key of Object.keys(FORMATS)) {
      assert.ok(!received.includes((env[key] ?? '').toLowerCase()), `${key}'s placeholder never reached an unbound origin`);
      assert.ok(!received.includes((secrets[key] ?? '').toLowerCase()), `${key}'s secret never reached an unbound origin`);
    }
  });

  it('no log line or event holds a shaped placeholder or its secret', () => {
    const sinks = s.b.log.text() + JSON.stringify(s.b.log.events());
    for (const key of Object.keys(FORMATS)) {
      assert.ok(!sinks.includes(env[key] ?? 'x'), `${key} placeholder`);
      assert.ok(!sinks.includes(secrets[key] ?? 'x'), `${key} secret`);
    }
  });
});
