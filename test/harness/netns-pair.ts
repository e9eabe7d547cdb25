// Two network namespaces for root-only tests, "pod" and "outside", joined by a veth pair on a test-only
// 10.231.X.0/30 (and its ULA twin) that exists only inside them. createNetnsPair() registers the teardown
// (both namespaces, the veth with them, /etc/netns/<pod>) before it creates anything, so a failure cleans up.

import { type ChildProcess, execFile } from 'node:child_process';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const CLEAN_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
const CHILD_EXIT_TIMEOUT_MS = 5_000;
// A /30 chosen from the pid so that concurrent runs read apart in logs; it is assigned only inside our namespaces.
const SUBNET = 1 + (process.pid % 250);

export interface NetnsPair {
  readonly pod: string;
  readonly outside: string;
  readonly podIp: string;
  readonly outsideIp: string;
  readonly podIp6: string;
  readonly outsideIp6: string;
  /** The pod's /etc overlay: `ip netns exec` mounts its resolv.conf and hosts over /etc's. */
  readonly etc: string;
  inPod(...command: string[]): Promise<{ stdout: string; stderr: string }>;
  inOutside(...command: string[]): Promise<{ stdout: string; stderr: string }>;
}

/** setpriv to `uid` (group too, no supplementary groups): put after `ip netns exec <ns>`. */
export function asUid(uid: number): string[] {
  return ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
}

/** Why a namespace test cannot run here, or undefined: not root, a tool missing, no `ip netns`. */
export async function netnsSkipReason(tools: readonly string[]): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (creates network namespaces and iptables rules)';
  for (const tool of ['ip', ...tools]) {
    try {
      await run('sh', ['-c', `command -v ${tool}`], { env: CLEAN_ENV });
    } catch {
      return `${tool} is not installed`;
    }
  }
  try {
    await run('ip', ['netns', 'list']);
  } catch (err) {
    return `ip netns is unavailable: ${(err as Error).message}`;
  }
  return undefined;
}

/** `tag` (two letters) keeps the names of test files that run at the same time apart. */
export async function createNetnsPair(t: TestContext, tag: string): Promise<NetnsPair> {
  const pod = `${tag}p-${process.pid}`;
  const outside = `${tag}o-${process.pid}`;
  const etc = join('/etc/netns', pod);
  // Runs before the hooks registered after it (node:test keeps their order), and always: a namespace deleted under
  // a process still in it lasts until that process exits, and nothing writes in etc.
  t.after(async () => {
    await run('ip', ['netns', 'del', pod]).catch(() => undefined);
    await run('ip', ['netns', 'del', outside]).catch(() => undefined);
    await rm(etc, { recursive: true, force: true });
  });
  const pair: NetnsPair = {
    pod,
    outside,
    podIp: `10.231.${SUBNET}.1`,
    outsideIp: `10.231.${SUBNET}.2`,
    podIp6: `fd00:231:${SUBNET}::1`,
    outsideIp6: `fd00:231:${SUBNET}::2`,
    etc,
    // cwd /: the checkout may be closed to the uids a command switches to.
    inPod: (...command) => run('ip', ['netns', 'exec', pod, ...command], { env: CLEAN_ENV, cwd: '/' }),
    inOutside: (...command) => run('ip', ['netns', 'exec', outside, ...command], { env: CLEAN_ENV, cwd: '/' }),
  };
  await run('ip', ['netns', 'add', pod]);
  await run('ip', ['netns', 'add', outside]);
  // Interface names are at most 15 bytes; a pid has at most 7 digits.
  const podLink = `${tag}p${process.pid}`;
  const outsideLink = `${tag}o${process.pid}`;
  await run('ip', ['link', 'add', podLink, 'netns', pod, 'type', 'veth', 'peer', 'name', outsideLink, 'netns', outside]);
  for (const [ns, link, ip, ip6] of [
    [pod, podLink, pair.podIp, pair.podIp6],
    [outside, outsideLink, pair.outsideIp, pair.outsideIp6],
  ] as const) {
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await run('ip', ['-n', ns, 'addr', 'add', `${ip}/30`, 'dev', link]);
    // No duplicate address detection (for the link-local address either): usable at once, not after ~1 s.
    await run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${link}.accept_dad=0`]);
    await run('ip', ['-n', ns, '-6', 'addr', 'add', `${ip6}/126`, 'dev', link, 'nodad']);
    await run('ip', ['-n', ns, 'link', 'set', link, 'up']);
  }
  return pair;
}

/** SIGTERM, bounded wait, then SIGKILL: only this child, never by name. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_EXIT_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}
