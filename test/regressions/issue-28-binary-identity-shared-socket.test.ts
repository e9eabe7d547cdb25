// Issue 28 (red-team report against boundary), finding 2(c): a connection was judged once, by whoever opened it.
// python3 (uid 65534) runs curl, which parks after its first, admitted request with the connection in its pool;
// python3 takes the socket out of curl with pidfd_getfd, lends it over SCM_RIGHTS to a second python3, which sends a
// DELETE on the same connection, through the forward proxy and inside an inspected CONNECT tunnel. The DELETE is
// decided by every process holding the connection when it arrives: refused, and its event names python3, not curl
// (docs/identity.md#shared-sockets).

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it } from 'node:test';
import { describeEachSource, PROXY_PORT, PROXY_URL, policyYaml } from '../harness/identity-netns.js';
import { realExe } from '../harness/identity-processes.js';
import { netnsSkipReason } from '../harness/netns-pair.js';

const CURL = realExe('/usr/bin/curl');
const PYTHON = realExe('/usr/bin/python3');
const skip = process.arch === 'x64' ? await netnsSkipReason(['setpriv', 'curl']) : 'pidfd_getfd is called by its x86_64 number';

function policy(port: number): string {
  return policyYaml(port, {
    curl_only: { host: 'api.example.test', binaries: ['/usr/bin/curl'] },
    curl_rest: { host: 'rest.example.test', binaries: ['/usr/bin/curl'], methods: ['GET', 'DELETE'] },
  });
}

/** The attack's two scripts, where uid 65534 can read them. */
async function writeScripts(dir: string): Promise<void> {
  await writeFile(join(dir, 'attack.py'), ATTACK);
  await writeFile(join(dir, 'lend.py'), LEND);
}

// The attacker. curl's first transfer goes through the proxy (its status on stderr, which curl does not buffer); its
// second reads stdin, so curl waits with the proxy connection still in its pool. Prints both statuses as JSON.
const ATTACK = `import ctypes, json, os, socket, subprocess, sys
PROXY = ('127.0.0.1', ${PROXY_PORT})
api, lend, via = sys.argv[1], sys.argv[2], sys.argv[3]
tunnel = ['--proxytunnel'] if via == 'connect' else []
curl = subprocess.Popen(['curl', '-sS', '--noproxy', '', '-x', '${PROXY_URL}', *tunnel, '-o', '/dev/null', '-w', '%{stderr}%{http_code}\\n', api + '/first', '--next', 'file:///dev/stdin'],
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
first = curl.stderr.readline().decode().strip()
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(curl.pid)
taken = None
for fd in sorted(int(n) for n in os.listdir('/proc/%d/fd' % curl.pid)):
    got = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
    if got < 0:
        continue
    try:
        s = socket.socket(fileno=got)
    except OSError:
        os.close(got)
        continue
    try:
        if s.getpeername() == PROXY:
            taken = s
            break
    except OSError:
        pass
    s.close()
ours, theirs = socket.socketpair()
accomplice = subprocess.Popen([sys.executable, lend, api, via], pass_fds=[theirs.fileno()], env={'LEND_FD': str(theirs.fileno())}, stdout=subprocess.PIPE)
theirs.close()
socket.send_fds(ours, [b'x'], [taken.fileno()])
taken.close()
deleted = accomplice.stdout.read().decode().strip()
curl.stdin.close()
curl.wait()
print(json.dumps({'first': first, 'delete': deleted, 'curl': curl.pid, 'accomplice': accomplice.pid}))
`;

// The accomplice: takes the lent socket and sends a DELETE on curl's connection.
const LEND = `import os, socket, sys
api, via = sys.argv[1], sys.argv[2]
host = api.split('//')[1]
# Inside a tunnel a request names its path only; to the forward proxy, the whole URL.
target = '/everything' if via == 'connect' else api + '/everything'
with socket.socket(fileno=int(os.environ['LEND_FD'])) as channel:
    _, fds, _, _ = socket.recv_fds(channel, 1, 1)
s = socket.socket(fileno=fds[0])
s.settimeout(20)  # curl's file is non-blocking; the flag travels with it
s.sendall(('DELETE %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % (target, host)).encode())
print(s.recv(65536).split(b'\\r\\n')[0].decode())
`;

/** How curl reaches its endpoint: the forward proxy, or a CONNECT tunnel the proxy inspects (each request decided). */
const ROUTES = [
  { via: 'forward', host: 'api.example.test' },
  { via: 'connect', host: 'rest.example.test' },
] as const;

describeEachSource('issue 28: every process holding a kept-alive connection decides its next request', { tag: 'ss', skip, policy, setup: writeScripts }, (env) => {
  for (const { via, host } of ROUTES) {
    it(`refuses a DELETE sent by python3 on the connection curl opened (${via}), and names python3`, async () => {
      const since = env().boundary.lines.length;
      const api = `http://${host}:${env().originPort}`;
      const ran = await env().asClient(['/usr/bin/python3', join(env().dir, 'attack.py'), api, join(env().dir, 'lend.py'), via]);
      const last = ran.stdout.trim().split('\n').at(-1) ?? '';
      assert.ok(last.startsWith('{'), `the attack ran: ${ran.stdout} ${ran.stderr}`);
      const seen = JSON.parse(last) as { first?: string; delete?: string; curl?: number; accomplice?: number };
      assert.equal(seen.first, '200', `curl's own request is allowed: ${ran.stdout} ${ran.stderr}`);
      assert.match(seen.delete ?? '', /^HTTP\/1\.1 403/, `the lent DELETE: ${ran.stdout} ${ran.stderr}`);
      assert.ok(!env().originSaw().includes('DELETE /everything'), 'the DELETE never reached the origin');
      const event = await env().event(since, (u, line) => u.reason_code !== undefined && JSON.stringify(line.ocsf).includes('/everything'));
      const u = event.ocsf?.unmapped ?? {};
      assert.deepEqual([u.reason_code, u.binary, u.binary_pid], ['binary-not-allowed', PYTHON, seen.accomplice]);
      assert.deepEqual([...(u.binary_holders as number[])].sort(), [seen.curl, seen.accomplice].sort(), 'both holders are named');
      assert.notEqual(u.binary, CURL);
      assert.equal((u.replay as { binary?: string }).binary, PYTHON, 'explain would replay it as python3');
    });
  }
});
