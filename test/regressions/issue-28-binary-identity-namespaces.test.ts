// Issue 28 (red-team report against boundary), finding 2(a): binary identity trusted the path /proc/<pid>/exe names,
// so python bind-mounted over /usr/bin/curl inside `unshare -Urm` (uid 65534) was admitted as curl. Each source
// (/proc read by boundary, and `boundary identity serve`) in a network namespace of its own: the fake is refused
// with executable-unverified and a finding, while curl itself, curl in a user namespace without mounts, a fork
// of the same program and curl under a listed shell still pass (docs/identity.md#verification).

import assert from 'node:assert/strict';
import { it } from 'node:test';
import { describeEachSource, policyYaml, PROXY_URL } from '../harness/identity-netns.js';
import { realExe } from '../harness/identity-processes.js';
import { netnsSkipReason } from '../harness/netns-pair.js';

const CURL = realExe('/usr/bin/curl');
const PYTHON = realExe('/usr/bin/python3');
const BASH = realExe('/bin/bash');
const skip = await netnsSkipReason(['unshare', 'setpriv', 'curl']);

function policy(port: number): string {
  return policyYaml(port, {
    curl_only: { host: 'api.example.test', binaries: ['/usr/bin/curl'] },
    shell_tools: { host: 'shell.example.test', binaries: [BASH] },
  });
}

// python as "curl": it speaks HTTP to the proxy itself and prints the status line.
const FAKE_CURL = (port: number) => `import socket
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'GET http://api.example.test:${port}/fake HTTP/1.1\\r\\nHost: api.example.test:${port}\\r\\nConnection: close\\r\\n\\r\\n')
print(s.recv(65536).split(b'\\r\\n')[0].decode())`;

describeEachSource('issue 28: a binary is what runs, not the path it is seen at', { tag: 'na', skip, policy }, (env) => {
  const api = () => `http://api.example.test:${env().originPort}`;

  it('refuses python bind-mounted over /usr/bin/curl in a private user and mount namespace, and raises a finding', async () => {
    const since = env().boundary.lines.length;
    const mount = `mount --bind ${PYTHON} /usr/bin/curl && exec /usr/bin/curl -c "$0"`;
    const ran = await env().asClient(['unshare', '-Urm', 'sh', '-c', mount, FAKE_CURL(env().originPort)]);
    assert.match(ran.stdout, /^HTTP\/1\.1 403/, `the fake curl got: ${ran.stdout} ${ran.stderr}`);
    const event = await env().event(since, (u, line) => u.reason_code !== undefined && JSON.stringify(line.ocsf).includes('/fake'));
    assert.deepEqual([event.ocsf?.unmapped?.identity, event.ocsf?.unmapped?.identity_failure, event.ocsf?.unmapped?.binary], ['unavailable', 'executable-unverified', undefined]);
    const finding = await env().event(since, (u) => u.finding === 'executable-unverified');
    assert.match(finding.ocsf?.message ?? '', /\/usr\/bin\/curl/);
    assert.ok(!env().originSaw().includes('GET /fake'), 'the origin never saw the fake curl');
  });

  it('still admits curl itself, and curl in a user namespace of its own that mounts nothing', async () => {
    assert.equal((await env().curl(`${api()}/plain`)).status, '200');
    const inUserns = await env().asClient(['unshare', '-Ur', 'curl', '-sS', '--noproxy', '', '-x', PROXY_URL, '-w', '\n%{http_code}', `${api()}/userns`]);
    assert.match(inUserns.stdout, /\n200$/, `curl in its own user namespace: ${inUserns.stdout} ${inUserns.stderr}`);
  });

  it('admits curl under a listed shell (the ancestor verified), and a fork of the same program holding the socket', async () => {
    const since = env().boundary.lines.length;
    const underShell = await env().curl(`http://shell.example.test:${env().originPort}/shell`, { exe: [BASH, '-c', 'curl "$@"; exit $?', 'sh'] });
    assert.equal(underShell.status, '200');
    const event = await env().event(since, (u) => u.binary_ancestor === BASH);
    assert.equal(event.ocsf?.unmapped?.binary, CURL);
    // A forked subshell holds the connection too: two processes of one program, each allowed.
    const request = `GET http://shell.example.test:${env().originPort}/fork HTTP/1.1\r\nHost: shell.example.test:${env().originPort}\r\nConnection: close\r\n\r\n`;
    const script = `exec 3<>/dev/tcp/127.0.0.1/3128; ( read -r line <&3; echo "$line" ) & printf '${request}' >&3; wait`;
    const forked = await env().asClient([BASH, '-c', script]);
    assert.match(forked.stdout, /^HTTP\/1\.1 200/, `bash and its fork: ${forked.stdout} ${forked.stderr}`);
  });
});
