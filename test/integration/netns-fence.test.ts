// The fence end to end (root only): two network namespaces this test creates, "pod" and "outside" (netns-pair.ts).
// `boundary init-netns` installs the route, the DNS redirect and the fence in the pod; boundary runs there as an
// unprivileged uid, from a staged copy that uid can read. The workload (root in the pod, not boundary's uid)
// cannot reach the outside directly (TCP or UDP, IPv4 or IPv6) but reaches it through boundary.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { FENCE_CHAIN } from '../../src/app/cli/init-netns.js';
import { isDnsReady, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { buildQuery } from '../harness/dns-client.js';
import { asUid, CLEAN_ENV, createNetnsPair, type NetnsPair, netnsSkipReason, stopChild } from '../harness/netns-pair.js';
import { stageBoundary } from '../harness/stage.js';

const BOUNDARY_UID = 10001;
const AS_BOUNDARY = asUid(BOUNDARY_UID);
const CHILD_READY_TIMEOUT_MS = 20_000;
/**
 * Bounds each probe's wait, so a dropped packet ends as 'timeout' rather than a hang. A rejected dial is told apart
 * from a dropped one by its result (ECONNREFUSED, which only a reject gives), never by how long it took. Generous:
 * the first IPv6 contact on a fresh link takes ~1 s (a SYN retransmit) before the fence exists, more on a busy host.
 */
const PROBE_LIMIT_MS = 20_000;

// The outside world: an HTTP origin on the allowed port, another on a port the policy does not list, one on
// the IPv6 address, and a rogue resolver (UDP and TCP 53) that answers anything.
const OUTSIDE_SCRIPT = `
import { createServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { createSocket } from 'node:dgram';
const [host, host6] = process.argv.slice(2);
const origin = (name) => createServer((req, res) => res.end(name + ' saw ' + req.url));
const listen = (server, port, at = host) => new Promise((resolve) => server.listen(port, at, () => resolve(server.address().port)));
const allowed = await listen(origin('outside'), 0);
const unlisted = await listen(origin('unlisted'), 0);
const v6 = await listen(origin('outside6'), 0, host6);
await listen(createTcpServer((s) => s.end('rogue tcp dns')), 53);
for (const [type, at] of [['udp4', host], ['udp6', host6]]) {
  const udp = createSocket(type);
  udp.on('message', (msg, from) => udp.send(msg, from.port, from.address));
  await new Promise((resolve) => udp.bind(53, at, resolve));
}
console.log('READY ' + allowed + ' ' + unlisted + ' ' + v6);
process.on('SIGTERM', () => process.exit(0));
`;

// Direct dials from inside the pod, with no proxy: a TCP connect and one datagram on a connected UDP socket.
// The fence's verdict fails the send itself (EPERM) and its ICMP reject then comes back to the socket as
// ECONNREFUSED, which is what the UDP result waits for. Prints one JSON line; every wait is bounded.
const PROBE_SCRIPT = `
import { connect } from 'node:net';
import { createSocket } from 'node:dgram';
const [host, tcpPort, udpPort, hex, limit] = process.argv.slice(2);
function outcome(start, work) {
  return new Promise((resolve) => {
    let done = false;
    const finish = (result) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ result, ms: performance.now() - start });
    };
    const timer = setTimeout(() => finish('timeout'), Number(limit));
    work(finish);
  });
}
const tcp = await outcome(performance.now(), (finish) => {
  const socket = connect({ host, port: Number(tcpPort) });
  socket.once('connect', () => { socket.destroy(); finish('connected'); });
  socket.once('error', (err) => finish(err.code));
  socket.once('close', () => socket.destroy());
});
let send = 'sent';
const udp = await outcome(performance.now(), (finish) => {
  const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  const end = (result) => { finish(result); socket.close(); };
  socket.on('error', (err) => end(err.code));
  socket.on('message', () => end('answered'));
  socket.connect(Number(udpPort), host, () => socket.send(Buffer.from(hex, 'hex'), (err) => { if (err) send = err.code; }));
});
console.log(JSON.stringify({ tcp, udp: { ...udp, send } }));
`;

interface Probe {
  readonly tcp: { readonly result: string; readonly ms: number };
  readonly udp: { readonly result: string; readonly ms: number; readonly send: string };
}

/** curl from the workload side, with no proxy variable set; the exit code instead of a throw. */
async function curl(pair: NetnsPair, ...args: string[]): Promise<{ exit: number; body: string; status: string; stderr: string }> {
  try {
    const { stdout, stderr } = await pair.inPod('curl', '-sS', '--max-time', '10', '-w', '\n%{http_code}', ...args);
    const cut = stdout.lastIndexOf('\n');
    return { exit: 0, body: stdout.slice(0, cut), status: stdout.slice(cut + 1), stderr };
  } catch (err) {
    const failure = err as { code?: number; stdout?: string; stderr?: string };
    return { exit: failure.code ?? -1, body: failure.stdout ?? '', status: '', stderr: failure.stderr ?? '' };
  }
}

function startOutside(t: TestContext, pair: NetnsPair, scriptFile: string): Promise<{ allowed: number; unlisted: number; v6: number }> {
  const child = spawn('ip', ['netns', 'exec', pair.outside, process.execPath, scriptFile, pair.outsideIp, pair.outsideIp6], { stdio: ['ignore', 'pipe', 'pipe'], env: CLEAN_ENV });
  t.after(() => stopChild(child));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`outside server did not start: ${out}`)), CHILD_READY_TIMEOUT_MS);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    const onData = (chunk: string): void => {
      out += chunk;
      const match = /READY (\d+) (\d+) (\d+)/.exec(out);
      if (match === null) return;
      clearTimeout(timer);
      resolve({ allowed: Number(match[1]), unlisted: Number(match[2]), v6: Number(match[3]) });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (chunk: string) => {
      out += chunk;
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`outside server exited with ${code}: ${out}`));
    });
  });
}

async function probe(pair: NetnsPair, as: readonly string[], probeFile: string, tcpPort: number, host = pair.outsideIp): Promise<Probe> {
  const query = buildQuery('api.example.test').toString('hex');
  const { stdout } = await pair.inPod(...as, process.execPath, probeFile, host, String(tcpPort), '53', query, String(PROBE_LIMIT_MS));
  return JSON.parse(stdout) as Probe;
}

it('fences a pod namespace so that only boundary, running as its own uid, reaches the outside', async (t) => {
  const reason = await netnsSkipReason(['iptables', 'ip6tables', 'setpriv', 'sysctl', 'curl']);
  if (reason !== undefined) {
    t.skip(`netns fence test skipped: ${reason}`);
    return;
  }
  // boundary's state dir is in dir: removed after boundary's own hook has stopped it.
  await withStateDir(t, 'boundary-fence-', (dir) => fence(t, dir));
});

async function fence(t: TestContext, dir: string): Promise<void> {
  const pair = await createNetnsPair(t, 'bf');
  const { inPod } = pair;
  try {
    await inPod('iptables', '-w', '-S', 'OUTPUT');
  } catch (err) {
    t.skip(`netns fence test skipped: iptables does not work in a namespace: ${(err as Error).message}`);
    return;
  }

  const files = {
    outside: join(dir, 'outside.mjs'),
    probe: join(dir, 'probe.mjs'),
    policy: join(dir, 'policy.yaml'),
    hosts: join(dir, 'boundary-hosts'),
    state: join(dir, 'state'),
  };
  // boundary's uid reads the policy and hosts and owns its state dir; nothing else of ours is writable to it.
  await chmod(dir, 0o755);
  await mkdir(files.state);
  await chown(files.state, BOUNDARY_UID, BOUNDARY_UID);
  await Promise.all([
    writeFile(files.outside, OUTSIDE_SCRIPT),
    writeFile(files.probe, PROBE_SCRIPT),
    // boundary's own trusted view of the name: the real address, reachable only for boundary's uid.
    writeFile(files.hosts, `${pair.outsideIp} api.example.test\n`),
  ]);
  const [ports, staged] = await Promise.all([startOutside(t, pair, files.outside), stageBoundary()]);
  // L4 (no protocol): capture relays the bytes as they come, so plain HTTP works with no proxy settings.
  await writeFile(
    files.policy,
    `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${ports.allowed}
    binaries: [{ path: "/**" }]
`,
  );

  // Before the fence, the workload does reach every outside service: what follows is the fence's doing.
  for (const [port, host] of [
    [ports.allowed, pair.outsideIp],
    [ports.v6, pair.outsideIp6],
  ] as const) {
    const open = await probe(pair, [], files.probe, port, host);
    assert.deepEqual([open.tcp.result, open.udp.result], ['connected', 'answered'], JSON.stringify(open));
  }

  // The pod init step itself, with the fence and the DNS redirect (to policy DNS on 127.0.0.1:15053).
  const init = await inPod(process.execPath, staged.main, 'init-netns', '--synthetic-cidr', '198.18.0.0/15', '--boundary-uid', String(BOUNDARY_UID));
  assert.match(init.stdout, /ip route replace local 198\.18\.0\.0\/15 dev lo/);
  for (const tool of ['iptables', 'ip6tables']) {
    const rules = (await inPod(tool, '-w', '-S', FENCE_CHAIN)).stdout;
    assert.match(rules, new RegExp(`-m owner --uid-owner ${BOUNDARY_UID} -j ACCEPT`), `${tool}: ${rules}`);
    assert.match(rules, /-p tcp -j REJECT --reject-with tcp-reset/, `${tool}: ${rules}`);
    assert.match((await inPod(tool, '-w', '-S', 'OUTPUT')).stdout, new RegExp(`^-A OUTPUT -j ${FENCE_CHAIN}$`, 'm'));
  }
  // As in a pod: resolv.conf names the cluster's resolver (the rogue one stands in), which only boundary's uid
  // reaches; the workload's queries to it are redirected to policy DNS.
  await mkdir(pair.etc, { recursive: true });
  await writeFile(join(pair.etc, 'resolv.conf'), `nameserver ${pair.outsideIp}\noptions attempts:1 timeout:3\n`);
  await writeFile(join(pair.etc, 'hosts'), '127.0.0.1 localhost\n');

  // Control: boundary's uid is let out by the owner match, so the path itself works.
  const control = await probe(pair, AS_BOUNDARY, files.probe, ports.allowed);
  assert.deepEqual([control.tcp.result, control.udp.result], ['connected', 'answered'], JSON.stringify(control));

  // BY-01/BY-03 (TCP): rejected at once. BY-04/BY-06 (a DNS query to a rogue resolver over UDP, then TCP) never
  // reaches it: the redirect hands it to policy DNS, which is not up yet, so it too is refused at once.
  const direct = await probe(pair, [], files.probe, ports.allowed);
  assert.equal(direct.tcp.result, 'ECONNREFUSED', JSON.stringify(direct));
  assert.equal(direct.udp.result, 'ECONNREFUSED', JSON.stringify(direct));
  const rogueTcpDns = await probe(pair, [], files.probe, 53);
  assert.equal(rogueTcpDns.tcp.result, 'ECONNREFUSED', JSON.stringify(rogueTcpDns));
  // BY-07: IPv6 egress is fenced the same way (ip6tables), TCP and UDP.
  // IPv6 DNS is not redirected (policy DNS is IPv4 only): the fence refuses it at once instead.
  const direct6 = await probe(pair, [], files.probe, ports.v6, pair.outsideIp6);
  assert.deepEqual([direct6.tcp.result, direct6.udp.result], ['ECONNREFUSED', 'ECONNREFUSED'], JSON.stringify(direct6));
  // boundary's own uid does get out over IPv6, neighbour discovery included (the cache is emptied first:
  // the kernel sends those packets under no uid, so the fence has to let them through by type).
  await inPod('ip', '-6', 'neigh', 'flush', 'all');
  const control6 = await probe(pair, AS_BOUNDARY, files.probe, ports.v6, pair.outsideIp6);
  assert.deepEqual([control6.tcp.result, control6.udp.result], ['connected', 'answered'], JSON.stringify(control6));
  // The same with curl and every proxy disabled (BY-01): connection refused, not a timeout.
  const bypass = await curl(pair, '--noproxy', '*', `http://${pair.outsideIp}:${ports.allowed}/direct`);
  assert.equal(bypass.exit, 7, `curl: ${bypass.stderr}`);

  const boundary = spawnBoundaryCli(
    [
      '--policy', files.policy,
      '--proxy-listen', '127.0.0.1:3128',
      '--admin-listen', '127.0.0.1:9901',
      '--synthetic-cidr', '198.18.0.0/15',
      '--hosts', files.hosts,
      // Nothing listens there: every answer comes from --hosts.
      '--upstream-dns', '127.0.0.1:5399',
      '--state-dir', files.state,
    ],
    { prefix: ['ip', 'netns', 'exec', pair.pod, ...AS_BOUNDARY], staged },
  );
  t.after(() => boundary.stop());
  await boundary.waitFor(isDnsReady);

  // Through the forward proxy: boundary dials as its uid, which the fence lets out.
  const proxy = 'http://127.0.0.1:3128';
  const viaProxy = await curl(pair, '-x', proxy, `http://api.example.test:${ports.allowed}/via-proxy`);
  assert.deepEqual([viaProxy.body, viaProxy.status], ['outside saw /via-proxy', '200'], viaProxy.stderr);
  // Through policy DNS and capture, with no proxy settings at all.
  const viaCapture = await curl(pair, '--noproxy', '*', `http://api.example.test:${ports.allowed}/via-capture`);
  assert.deepEqual([viaCapture.body, viaCapture.status], ['outside saw /via-capture', '200'], viaCapture.stderr);
  const captured = await boundary.waitFor((line) => line.ocsf?.status_detail === 'transparent_tcp_allowed');
  assert.match(captured.ocsf?.message ?? '', new RegExp(`^TRANSPARENT allowed 198\\.1[89]\\.\\d+\\.\\d+:${ports.allowed} -> api\\.example\\.test:${ports.allowed}$`));

  // BY-08: the allowed host on a port the policy does not list (a server does listen there).
  const unlistedProxy = await curl(pair, '-x', proxy, `http://api.example.test:${ports.unlisted}/`);
  assert.equal(unlistedProxy.status, '403', unlistedProxy.body);
  assert.match(unlistedProxy.body, /"error":"policy_denied"/);
  const unlistedCapture = await curl(pair, '--noproxy', '*', `http://api.example.test:${ports.unlisted}/`);
  assert.equal(unlistedCapture.exit, 7, `curl: ${unlistedCapture.stderr}`);
  assert.match(unlistedCapture.stderr, /Couldn't connect|Connection refused/);
  // BY-03 through the proxy: the real address is not a policy host and never inherits the name's mapping.
  const literal = await curl(pair, '-x', proxy, `http://${pair.outsideIp}:${ports.allowed}/`);
  assert.equal(literal.status, '403', literal.body);
  assert.match(literal.body, /"error":"policy_denied"/);
  // And the workload's direct dial is still refused while boundary runs.
  const after = await probe(pair, [], files.probe, ports.allowed);
  assert.equal(after.tcp.result, 'ECONNREFUSED', JSON.stringify(after));
}
