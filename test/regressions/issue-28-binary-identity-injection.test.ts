// Issue 28 (red-team report against boundary), finding 2(b): code loaded into an allowed binary was admitted as that
// binary. curl with LD_PRELOAD (a library this test builds with gcc, and one the system ships), a preloaded library
// that wipes LD_PRELOAD from its own environment, and python3 loading a library the workload owns: each refused
// on an endpoint that names specific programs, with its identity failure and a finding; plain curl and python3
// still pass, and an endpoint open to any binary does not care (docs/identity.md#injected-code).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it } from 'node:test';
import { promisify } from 'node:util';
import { CLIENT_UID, describeEachSource, policyYaml } from '../harness/identity-netns.js';
import { netnsSkipReason } from '../harness/netns-pair.js';

const run = promisify(execFile);
const skip = await netnsSkipReason(['setpriv', 'curl', 'gcc']);
/** A shared library every Debian has, owned by root: loaded, it runs nothing of the workload's. */
const SYSTEM_LIBRARY = '/lib/x86_64-linux-gnu/libm.so.6';

const NOOP = '__attribute__((constructor)) static void injected(void) {}\n';
// Overwrites its own LD_PRELOAD in place, so /proc/<pid>/environ no longer shows it.
const WIPING = `#include <string.h>
extern char **environ;
__attribute__((constructor)) static void wipe(void) {
  for (char **e = environ; *e != 0; e++) if (strncmp(*e, "LD_PRELOAD=", 11) == 0) memset(*e, 'X', strlen(*e));
}
`;

function policy(port: number): string {
  return policyYaml(port, {
    curl_only: { host: 'api.example.test', binaries: ['/usr/bin/curl'] },
    python_only: { host: 'py.example.test', binaries: ['/usr/bin/python3'] },
    anyone: { host: 'any.example.test', binaries: ['/**'] },
  });
}

/** Builds the libraries: one root's (in a directory only root writes), two the workload's own. */
async function buildLibraries(dir: string): Promise<void> {
  const root = join(dir, 'root-libs');
  const own = join(dir, 'own-libs');
  await mkdir(root, { mode: 0o755 });
  await mkdir(own, { mode: 0o755 });
  await writeFile(join(dir, 'noop.c'), NOOP);
  await writeFile(join(dir, 'wiping.c'), WIPING);
  await run('gcc', ['-shared', '-fPIC', '-o', join(root, 'libnoop.so'), join(dir, 'noop.c')]);
  await run('gcc', ['-shared', '-fPIC', '-o', join(own, 'libwiping.so'), join(dir, 'wiping.c')]);
  await run('gcc', ['-shared', '-fPIC', '-o', join(own, 'libown.so'), join(dir, 'noop.c')]);
  await chmod(join(root, 'libnoop.so'), 0o755);
  await chown(own, CLIENT_UID, CLIENT_UID);
  for (const lib of ['libwiping.so', 'libown.so']) await chown(join(own, lib), CLIENT_UID, CLIENT_UID);
}

// python3 loads a library, then asks the proxy; prints the status.
const PYTHON_LOADING = (library: string, url: string) => `import ctypes, urllib.request
${library === '' ? '' : `ctypes.CDLL('${library}')`}
opener = urllib.request.build_opener(urllib.request.ProxyHandler({'http': 'http://127.0.0.1:3128'}))
try:
    print(opener.open('${url}', timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)`;

describeEachSource('issue 28: code loaded into an allowed binary is not that binary', { tag: 'ij', skip, policy, setup: buildLibraries }, (env) => {
  const url = (host: string, path: string) => `http://${host}.example.test:${env().originPort}${path}`;

  /** The decision event of the request to `path`, and the finding beside it. */
  async function refusal(since: number, path: string, failure: string) {
    const event = await env().event(since, (u, line) => u.reason_code !== undefined && JSON.stringify(line.ocsf).includes(path));
    const finding = await env().event(since, (u) => u.finding === failure);
    return { event: event.ocsf?.unmapped ?? {}, finding: finding.ocsf?.message ?? '' };
  }

  it('refuses curl with LD_PRELOAD of a library built here, and of one the system ships, with loader-injection', async () => {
    for (const [library, path] of [[join(env().dir, 'root-libs/libnoop.so'), '/built'], [SYSTEM_LIBRARY, '/system']] as const) {
      const since = env().boundary.lines.length;
      const seen = await env().curl(url('api', path), { env: { LD_PRELOAD: library } });
      assert.equal(seen.status, '403', `curl with LD_PRELOAD=${library}: ${seen.stdout} ${seen.stderr}`);
      const { event, finding } = await refusal(since, path, 'loader-injection');
      assert.deepEqual([event.reason_code, event.identity, event.identity_failure], ['identity-unavailable', 'unavailable', 'loader-injection']);
      assert.match(finding, /LD_PRELOAD is set/);
    }
  });

  it('refuses curl with LD_LIBRARY_PATH set', async () => {
    const since = env().boundary.lines.length;
    assert.equal((await env().curl(url('api', '/library-path'), { env: { LD_LIBRARY_PATH: join(env().dir, 'own-libs') } })).status, '403');
    assert.equal((await refusal(since, '/library-path', 'loader-injection')).event.identity_failure, 'loader-injection');
  });

  it('refuses a preloaded library that wipes LD_PRELOAD from its environment: it is mapped from a file the workload owns', async () => {
    const since = env().boundary.lines.length;
    const library = join(env().dir, 'own-libs/libwiping.so');
    assert.equal((await env().curl(url('api', '/wiped'), { env: { LD_PRELOAD: library } })).status, '403');
    const { event, finding } = await refusal(since, '/wiped', 'writable-code');
    assert.equal(event.identity_failure, 'writable-code');
    assert.ok(finding.includes(library), finding);
  });

  it('refuses python3 that loaded a library the workload owns, and admits python3 that did not', async () => {
    const since = env().boundary.lines.length;
    const library = join(env().dir, 'own-libs/libown.so');
    const loaded = await env().asClient(['/usr/bin/python3', '-c', PYTHON_LOADING(library, url('py', '/loaded'))]);
    assert.equal(loaded.stdout.trim(), '403', loaded.stderr);
    assert.equal((await refusal(since, '/loaded', 'writable-code')).event.identity_failure, 'writable-code');
    const plain = await env().asClient(['/usr/bin/python3', '-c', PYTHON_LOADING('', url('py', '/plain'))]);
    assert.equal(plain.stdout.trim(), '200', plain.stderr);
  });

  it('admits plain curl, and curl with LD_PRELOAD where any binary may go', async () => {
    assert.equal((await env().curl(url('api', '/plain'))).status, '200');
    assert.equal((await env().curl(url('any', '/preloaded'), { env: { LD_PRELOAD: SYSTEM_LIBRARY } })).status, '200');
    assert.deepEqual(
      env().originSaw().filter((saw) => /\/(built|system|library-path|wiped|loaded)$/.test(saw)),
      [],
      'no refused request reached the origin',
    );
  });
});
