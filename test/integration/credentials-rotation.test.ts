import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCommand, parseRunFlags } from '../../src/app/cli/run.js';
import { parseConfig } from '../../src/app/config.js';
import { exchange, nextRevision, PH, proxySocket, writeAtomically } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, credentialsYaml, HOSTS } from '../harness/credential-stack.js';
import { openTunnel, tlsOverTunnel } from '../harness/proxy-client.js';

const FIRST = 'tok-rot-first-51c7';
const SECOND = 'tok-rot-second-51c7';
const THIRD = 'tok-rot-third-51c7';

let s: CredentialStack;

before(async () => {
  s = await credentialStack({ values: { token: FIRST, query: 'q-51c7', basic: 'pw-51c7' } });
});

after(async () => {
  await s?.close();
});

async function rotate(token: string): Promise<void> {
  const changed = nextRevision(s.source, s.source.current().revision);
  await writeAtomically(s.credentialsPath, credentialsYaml({ ...s.values, token }, s.ports));
  await changed;
}

/** What the origin received last on `origin` (the workload's copy of the origin's echo of it is masked). */
function authorizationAt(origin: 'plain' | 'secure'): unknown {
  return s[origin].seen.at(-1)?.headers.authorization;
}

describe('credential rotation on a keep-alive connection', () => {
  it('forward: the next request on the same connection carries the rotated value, without a restart', async () => {
    const socket = await proxySocket(s.b.proxyPort);
    let closed = false;
    socket.once('close', () => {
      closed = true;
    });
    try {
      const authority = `${HOSTS.api}:${s.ports.plain}`;
      const request = `GET http://${authority}/v1/rotate HTTP/1.1\r\nHost: ${authority}\r\nAuthorization: Bearer ${PH}API_TOKEN\r\n\r\n`;
      const first = await exchange(socket, request);
      assert.equal(first.status, 200);
      assert.equal(authorizationAt('plain'), `Bearer ${FIRST}`);
      await rotate(SECOND);
      const second = await exchange(socket, request);
      assert.equal(second.status, 200);
      assert.equal(authorizationAt('plain'), `Bearer ${SECOND}`);
      assert.equal(closed, false, 'the same client connection carried both requests');
    } finally {
      socket.destroy();
    }
  });

  it('connect: the next request inside the same intercepted TLS tunnel carries the rotated value', async () => {
    const tunnel = await openTunnel(s.b.proxyPort, `${HOSTS.api}:${s.ports.secure}`);
    assert.equal(tunnel.status, 200);
    const socket: Socket = await tlsOverTunnel(tunnel.socket, { servername: HOSTS.api, ca: s.b.caPem as string });
    try {
      const request = `GET /v1/rotate-tls HTTP/1.1\r\nHost: ${HOSTS.api}:${s.ports.secure}\r\nAuthorization: Bearer ${PH}API_TOKEN\r\n\r\n`;
      const first = await exchange(socket, request);
      assert.equal(first.status, 200);
      assert.equal(authorizationAt('secure'), `Bearer ${SECOND}`);
      await rotate(THIRD);
      const second = await exchange(socket, request);
      assert.equal(second.status, 200);
      assert.equal(authorizationAt('secure'), `Bearer ${THIRD}`);
      assert.equal(s.secure.seen.filter((r) => r.url === '/v1/rotate-tls').length, 2);
    } finally {
      socket.destroy();
    }
  });
});

describe('run --credentials', () => {
  it('maps the flag to credentialsFile, resolved against the working directory', () => {
    const raw = parseRunFlags(['--policy', 'p.yaml', '--credentials', 'creds.yaml'], '/work/dir');
    assert.equal(typeof raw, 'object');
    assert.equal((raw as Record<string, unknown>).credentialsFile, '/work/dir/creds.yaml');
    assert.equal(parseConfig(raw).credentialsFile, '/work/dir/creds.yaml');
  });

  it('refuses a credentials file together with a supervisor', () => {
    assert.throws(
      () => parseConfig({ supervisor: '127.0.0.1:1', tlsDir: '/x', sandboxId: 'sb', credentialsFile: '/c.yaml' }),
      (err: { code?: string; issues?: { path: string }[] }) => err.code === 'CONFIG_INVALID' && err.issues?.some((i) => i.path === 'credentialsFile') === true,
    );
  });

  it('exits 1 naming CREDENTIALS_INVALID with the YAML location when the first load fails', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-run-creds-'));
    try {
      await writeFile(join(dir, 'policy.yaml'), 'version: 1\nnetwork_policies: {}\n');
      await writeFile(join(dir, 'creds.yaml'), 'providers:\n  acme:\n    env:\n      "1BAD": "x"\n');
      let stderr = '';
      const code = await runCommand(
        ['--policy', 'policy.yaml', '--credentials', 'creds.yaml', '--proxy-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--upstream-dns', '127.0.0.1:53', '--state-dir', 'state'],
        {
          stdout: { write: () => true },
          stderr: {
            write: (text: string) => {
              stderr += text;
              return true;
            },
          },
          env: {},
          cwd: dir,
          signal: AbortSignal.abort(),
          now: Date.now,
        },
      );
      assert.equal(code, 1);
      assert.match(stderr, /CREDENTIALS_INVALID/);
      assert.match(stderr, /line \d+/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
