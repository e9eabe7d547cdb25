// A refused name is a final answer to real resolvers (root only; docs/dns.md#why-nxdomain): in a network namespace this
// test creates, resolv.conf names boundary's policy DNS on 127.0.0.1:53, and Python's getaddrinfo (glibc), Node's
// dns.lookup (glibc) and dns.resolve4 (c-ares) must each report "no such name", never glibc's temporary EAI_AGAIN,
// which REFUSED used to produce and which invites an agent to retry forever. Traffic stays in the namespace.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { promisify } from 'node:util';
import { policyYaml } from '../harness/control.js';
import { type BoundaryCli, isDnsReady, PROJECT_ROOT, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { CLEAN_ENV, netnsSkipReason } from '../harness/netns-pair.js';

const run = promisify(execFile);
const NS = `bdf-${process.pid}`;
const NETNS_ETC = join('/etc/netns', NS);
const DENIED = 'denied.example.test';

// One line: the gaierror's symbolic name (EAI_NONAME, EAI_AGAIN, ...).
const PYTHON = `
import socket, sys
try:
    socket.getaddrinfo(sys.argv[1], 443, type=socket.SOCK_STREAM)
    print("resolved")
except socket.gaierror as e:
    print(next((k for k, v in vars(socket).items() if k.startswith("EAI_") and v == e.errno), str(e.errno)))
`;
// Two lines: dns.lookup's and dns.resolve4's error codes.
const NODE = `
const dns = require('node:dns');
const name = process.argv[1];
dns.lookup(name, (a) => dns.resolve4(name, (b) => console.log((a ? a.code : 'resolved') + '\\n' + (b ? b.code : 'resolved'))));
`;

it('answers a name policy refuses so that glibc, Python and Node report it as final, not temporary', async (t) => {
  const reason = await netnsSkipReason(['python3']);
  if (reason !== undefined) {
    t.skip(`netns DNS finality test skipped: ${reason}`);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'boundary-dns-final-'));
  let boundary: BoundaryCli | undefined;
  // Registered first, so it runs first (node:test runs hooks in order) and always: boundary, which writes its state
  // in dir until it has stopped, then the namespace, its /etc overlay and the temp files.
  t.after(async () => {
    await boundary?.stop();
    await run('ip', ['netns', 'del', NS]).catch(() => undefined);
    await rm(NETNS_ETC, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  });
  await run('ip', ['netns', 'add', NS]);
  await run('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
  await mkdir(NETNS_ETC, { recursive: true });
  // Two attempts: a temporary failure would be retried, a final one is not.
  await writeFile(join(NETNS_ETC, 'resolv.conf'), 'nameserver 127.0.0.1\noptions attempts:2 timeout:2\n');
  await writeFile(join(NETNS_ETC, 'hosts'), '127.0.0.1 localhost\n');
  const policy = join(dir, 'policy.yaml');
  await writeFile(policy, policyYaml('api.example.test'));
  boundary = spawnBoundaryCli(
    [
      '--policy', policy,
      '--dns-listen', '127.0.0.1:53',
      '--proxy-listen', '127.0.0.1:3128',
      // Nothing listens there, and a refused name is never asked upstream.
      '--upstream-dns', '127.0.0.1:5399',
      '--state-dir', join(dir, 'state'),
    ],
    { prefix: ['ip', 'netns', 'exec', NS] },
  );
  await boundary.waitFor(isDnsReady);
  const inNs = (...command: string[]) => run('ip', ['netns', 'exec', NS, ...command], { env: CLEAN_ENV, cwd: PROJECT_ROOT });

  const python = await inNs('python3', '-c', PYTHON, DENIED);
  assert.equal(python.stdout.trim(), 'EAI_NONAME', 'getaddrinfo: "Name or service not known", not EAI_AGAIN');
  const node = await inNs(process.execPath, '-e', NODE, DENIED);
  assert.deepEqual(node.stdout.trim().split('\n'), ['ENOTFOUND', 'ENOTFOUND'], 'dns.lookup and dns.resolve4');
  // glibc's getent: exit 2, "not found".
  await assert.rejects(inNs('getent', 'ahosts', DENIED), (err: { code?: number }) => err.code === 2);
  // Each refused question was logged once, with its type and reason.
  const refusal = await boundary.waitFor((line) => (line.ocsf?.message ?? '').startsWith(`DNS A ${DENIED} NXDOMAIN`));
  assert.equal(refusal.ocsf?.unmapped?.reason_code, 'no-endpoint-matched');
});
