// The cluster DNS of the namespace-pair tests (netns-pair.ts): a real dnsmasq on the outside address, dig through
// the pod's resolv.conf as a given uid, optionally from a given source port, and a pod set up around them for
// boundary's policy DNS (startDnsPod).

import { spawn } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { DEFAULT_BOUNDARY_UID, DEFAULT_SYNTHETIC_CIDR } from '../../src/app/cli/init-netns.js';
import { cidrContains, parseCidr, parseIp } from '../../src/net/ip.js';
import { type BoundaryCli, spawnBoundaryCli } from './cli-boundary.js';
import { CLEAN_ENV, asUid, createNetnsPair, type NetnsPair, stopChild } from './netns-pair.js';
import { type StagedBoundary, stageBoundary } from './stage.js';

const DNSMASQ_READY_TIMEOUT_MS = 10_000;
// One try, bounded: a redirect to nothing is refused at once, and a wrong answer must not hide behind retries.
const DIG = ['dig', '+time=2', '+tries=1'];

/**
 * dnsmasq on the outside address, port 53, answering every name under example.test with that address, and the
 * names of an extra hosts file (`hostsFile`) with theirs.
 */
export function startDnsmasq(t: TestContext, pair: NetnsPair, pidFile: string, hostsFile?: string): Promise<void> {
  const child = spawn(
    'ip',
    [
      'netns', 'exec', pair.outside,
      'dnsmasq', '--no-daemon', '--no-resolv', '--no-hosts', '--port', '53', '--listen-address', pair.outsideIp,
      '--bind-interfaces', `--address=/example.test/${pair.outsideIp}`, `--pid-file=${pidFile}`, '--conf-file=/dev/null', '--user=root',
      ...(hostsFile === undefined ? [] : [`--addn-hosts=${hostsFile}`]),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: CLEAN_ENV },
  );
  t.after(() => stopChild(child));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`dnsmasq did not start: ${out}`)), DNSMASQ_READY_TIMEOUT_MS);
    child.stderr.setEncoding('utf8');
    // It binds its sockets before it logs that it started.
    child.stderr.on('data', (chunk: string) => {
      out += chunk;
      if (!out.includes('dnsmasq: started')) return;
      clearTimeout(timer);
      resolve();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`dnsmasq exited with ${code}: ${out}`));
    });
  });
}

export interface DigOptions {
  readonly transport?: 'udp' | 'tcp';
  /** The source port to ask from (dig -b). */
  readonly sourcePort?: number;
}

/** dig through the pod's resolv.conf as `uid` (root when undefined): the answer lines and the response status. */
export async function dig(pair: NetnsPair, uid: number | undefined, name: string, options: DigOptions = {}): Promise<{ status: string; answers: string[] }> {
  const as = uid === undefined ? [] : asUid(uid);
  const flags = [...(options.transport === 'tcp' ? ['+tcp'] : []), ...(options.sourcePort === undefined ? [] : ['-b', `0.0.0.0#${options.sourcePort}`])];
  const { stdout } = await pair.inPod(...as, ...DIG, ...flags, '+noall', '+comments', '+answer', name, 'A').catch((err: { stdout?: string }) => ({
    stdout: err.stdout ?? '',
  }));
  const status = /status: (\w+)/.exec(stdout)?.[1] ?? `no status in: ${stdout}`;
  const answers = stdout.split('\n').filter((line) => /\sIN\s+A\s/.test(line)).map((line) => line.trim().split(/\s+/).at(-1) ?? '');
  return { status, answers };
}

const SYNTHETIC = parseCidr(DEFAULT_SYNTHETIC_CIDR);

/** An address policy DNS hands out (boundary's default synthetic range). */
export function isSynthetic(ip: string): boolean {
  const parsed = parseIp(ip);
  return SYNTHETIC !== undefined && parsed !== undefined && cidrContains(SYNTHETIC, parsed);
}

/** A pod namespace with dnsmasq outside as its nameserver, `init-netns` run, and a policy file for boundary's uid. */
export interface DnsPod {
  readonly pair: NetnsPair;
  readonly staged: StagedBoundary;
  readonly files: { readonly policy: string; readonly state: string };
  /** boundary run in the pod as DEFAULT_BOUNDARY_UID with files.policy and files.state; stopped after the test. */
  startBoundary(): BoundaryCli;
}

/**
 * Creates the pair (`tag` names its namespaces), writes the pod's resolv.conf (the outside address, one try of 2 s)
 * and a policy of one wildcard entry, `*.example.test` port 443, whose names policy DNS resolves upstream before it
 * answers (the outside address is private, so the entry allows it), starts dnsmasq (with `hosts`, the lines of a
 * hosts file, when given) and runs `init-netns` for DEFAULT_BOUNDARY_UID. Everything is removed after `t`, the
 * directory last: boundary and dnsmasq write into it until they have stopped.
 */
export async function startDnsPod(t: TestContext, tag: string, hosts?: string): Promise<DnsPod> {
  const dir = await mkdtemp(join(tmpdir(), `boundary-${tag}-`));
  let boundary: BoundaryCli | undefined;
  try {
    const pair = await createNetnsPair(t, tag);
    const files = { policy: join(dir, 'policy.yaml'), state: join(dir, 'state') };
    await chmod(dir, 0o755);
    await mkdir(files.state);
    await chown(files.state, DEFAULT_BOUNDARY_UID, DEFAULT_BOUNDARY_UID);
    await writeFile(
      files.policy,
      `version: 1\nnetwork_policies:\n  api:\n    name: api\n    endpoints:\n      - host: "*.example.test"\n        port: 443\n        allowed_ips: ["${pair.outsideIp}/32"]\n    binaries: [{ path: "/**" }]\n`,
    );
    await mkdir(pair.etc, { recursive: true });
    await writeFile(join(pair.etc, 'resolv.conf'), `nameserver ${pair.outsideIp}\noptions attempts:1 timeout:2\n`);
    await writeFile(join(pair.etc, 'hosts'), '127.0.0.1 localhost\n');
    let hostsFile: string | undefined;
    if (hosts !== undefined) {
      hostsFile = join(dir, 'dnsmasq.hosts');
      await writeFile(hostsFile, hosts);
    }
    const [staged] = await Promise.all([stageBoundary(), startDnsmasq(t, pair, join(dir, 'dnsmasq.pid'), hostsFile)]);
    await pair.inPod(process.execPath, staged.main, 'init-netns', '--boundary-uid', String(DEFAULT_BOUNDARY_UID));
    const startBoundary = (): BoundaryCli => {
      boundary = spawnBoundaryCli(['--policy', files.policy, '--state-dir', files.state], {
        prefix: ['ip', 'netns', 'exec', pair.pod, ...asUid(DEFAULT_BOUNDARY_UID)],
        staged,
      });
      return boundary;
    };
    return { pair, staged, files, startBoundary };
  } finally {
    // After the pair's and dnsmasq's hooks; boundary is started later, so this hook stops it.
    t.after(async () => {
      await boundary?.stop();
      await rm(dir, { recursive: true, force: true });
    });
  }
}
